/**
 * Deletes in short rounds: D1 runs one statement at a time, and one long delete would hold up
 * every add and delete of its shard.
 */
import { bound, type Statement } from "./statement.ts";

/** Ten rounds of a thousand rows a minute clear 14 million rows a day; a larger backlog drains over later ticks. */
const ROUND_ROWS = 1000;
/** The most statements one {@link deleteInRounds} runs: what a caller budgets D1 queries with. */
export const MAX_ROUNDS = 10;

/**
 * Runs `round(rows)`, a DELETE of at most `rows` rows, until it deletes less than a round's
 * rows, or the rounds run out; returns how many rows it deleted.
 */
export async function deleteInRounds(db: D1Database, round: (rows: number) => Statement): Promise<number> {
  let deleted = 0;
  for (let count = 0; count < MAX_ROUNDS; count += 1) {
    const { meta } = await bound(db, round(ROUND_ROWS)).run();
    deleted += meta.changes;
    if (meta.changes < ROUND_ROWS) break;
  }
  return deleted;
}
