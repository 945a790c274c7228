/**
 * Every file starts from the migrated schema on every shard (storage is per test file): each
 * shard's migrations in one batch, recorded in `d1_migrations` as `applyD1Migrations` records them.
 * That function's batch a migration made 24 round trips a shard, half the time a file spent
 * migrating (about 1 s against 0.5 on a busy machine), 70 files over.
 */
import { env } from "cloudflare:workers";
import { SHARDS } from "./shards.ts";

// The table of cloudflare:test's applyD1Migrations, whose rows the status endpoint reads.
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS d1_migrations (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`;

await Promise.all(
  SHARDS.map(({ db }) =>
    db.batch([
      db.prepare(MIGRATIONS_TABLE),
      ...env.TEST_MIGRATIONS.flatMap(({ name, queries }) => [
        ...queries.map((query) => db.prepare(query)),
        db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(name),
      ]),
    ]),
  ),
);
