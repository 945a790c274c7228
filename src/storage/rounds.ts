/**
 * Deletes in short rounds: D1 runs one statement at a time, and one long delete would hold up
 * every add and delete of its shard.
 */

/** Ten rounds of a thousand rows a minute clear 14 million rows a day; a larger backlog drains over later ticks. */
const ROUND_ROWS = 1000;
const MAX_ROUNDS = 10;

/**
 * Runs `sql` (a DELETE of at most ?2 rows older than ?1) until it deletes less than a round's
 * rows, or the rounds run out; returns how many rows it deleted.
 */
export async function deleteInRounds(db: D1Database, sql: string, cutoff: string): Promise<number> {
  let deleted = 0;
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const { meta } = await db.prepare(sql).bind(cutoff, ROUND_ROWS).run();
    deleted += meta.changes;
    if (meta.changes < ROUND_ROWS) break;
  }
  return deleted;
}
