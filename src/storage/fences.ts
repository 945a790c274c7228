/**
 * Erasure fences (migration 0006, docs/api.md#erasure): every statement on `erasure_fences`. An
 * erasure writes one on a shard before it sweeps it; from then on add stores nothing there for
 * that app user created at or before the erasure's instant. This file stays free of Workers
 * types: the soak runs the erasure on Node.
 */
import { statement, type Statement } from "./statement.ts";

/** How long a fence is kept after its instant: far longer than any add stays in flight. */
export const FENCE_KEPT_MS = 60 * 60 * 1000;

/** The fence of an erasure of the app user `userKey` (their pseudonym) at `instant`; a second write changes nothing. */
export function writeFence(userKey: string, instant: string): Statement {
  return statement("INSERT INTO erasure_fences (user_key, instant) VALUES (?1, ?2) ON CONFLICT DO NOTHING", userKey, instant);
}

/**
 * SQL that is true while a fence of `userKey` stands at or after `createdAt`: the two are
 * placeholders or columns of the statement it goes in. One probe of the primary key.
 *
 * @example `INSERT ... SELECT ... WHERE NOT ${fenced("?8", "?6")}`
 */
export function fenced(userKey: string, createdAt: string): string {
  return `EXISTS (SELECT 1 FROM erasure_fences WHERE user_key = ${userKey} AND instant >= ${createdAt})`;
}

/** Up to `limit` fences whose instant is before `cutoff`. */
export function purgeFences(cutoff: Date, limit: number): Statement {
  return statement(
    `DELETE FROM erasure_fences WHERE rowid IN (SELECT rowid FROM erasure_fences WHERE instant < ?1 LIMIT ?2)`,
    cutoff.toISOString(),
    limit,
  );
}
