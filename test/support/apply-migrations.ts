import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { SHARDS } from "./shards.ts";

// Idempotent, and storage is per test file, so every file starts from the migrated schema, on
// every shard.
await Promise.all(SHARDS.map((shard) => applyD1Migrations(shard.db, env.TEST_MIGRATIONS)));
