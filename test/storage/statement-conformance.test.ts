/**
 * The conformance suite of statements (test/support/statement-conformance.ts), run the way a
 * Worker runs them: bound, as one batch, on a real local D1 binding.
 */
import { runBatch } from "../../src/storage/statement.ts";
import { SHARDS } from "../support/shards.ts";
import { describeStatementConformance } from "../support/statement-conformance.ts";

describeStatementConformance("bound in a Worker", async (statements) =>
  (await runBatch(SHARDS[0]!.db, statements)).map(({ results }) => results),
);
