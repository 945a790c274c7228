import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

// Idempotent, and storage is per test file, so every file starts from the migrated schema.
await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
