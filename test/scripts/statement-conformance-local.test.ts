/**
 * The conformance suite of statements (test/support/statement-conformance.ts), run as a local
 * operator command runs them: `execute` in-process on a throwaway local state, values bound.
 */
import { afterAll } from "vitest";
import { execute } from "../../scripts/lib/d1.ts";
import { closeLocalStates } from "../../scripts/lib/local-state.ts";
import { configPaths, readShards } from "../../scripts/lib/shards.ts";
import { freshState } from "../support/run-script.ts";
import { describeStatementConformance } from "../support/statement-conformance.ts";

const target = { remote: false, persistTo: freshState() };
const { api } = configPaths();
const shard = { ...readShards(api)[0]!, config: api };
afterAll(() => closeLocalStates());

describeStatementConformance("in-process on the local state", (statements) => execute(target, shard, statements));
