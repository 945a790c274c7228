/**
 * docs/operations.md: a local command beside `npm start` or another command waits out the local
 * state's busy files, for a bound, and names the cause past it. Which failures count as busy, and
 * the bound, on their own; test/scripts/beside-npm-start.test.ts runs the commands beside a real
 * `npm start`.
 */
import { describe, expect, it } from "vitest";
import { LocalStateBusy, isLocalStateBusy, whileLocked } from "../../../scripts/lib/local-state.ts";

// What the local runtime answered commands run beside `npm start` and each other.
const BUSY = [
  "D1_ERROR: Failed to get session commit token: internal error; reference = n8t9e7butq5du1nb684cl74a",
  "internal error; reference = nu3nu2us7vl4mbl4ug6p6av3",
  "D1_ERROR: internal error; reference=0a1b2c3d",
  "D1_ERROR: database is locked: SQLITE_BUSY",
  "KV GET failed: 500 Internal Server Error",
  "KV PUT failed: 500 Internal Server Error",
];
// Real failures: running them again cannot help, and a wait would only hide them.
const NOT_BUSY = [
  "D1_ERROR: no such table: failed_notices: SQLITE_ERROR",
  "D1_ERROR: no such column: event_id: SQLITE_ERROR",
  "D1_ERROR: UNIQUE constraint failed: receipts.receipt_id: SQLITE_CONSTRAINT",
  "KV PUT failed: 413 Payload Too Large",
  "a receipt's body holds an internal error; reference = its own words",
];

describe("docs/operations.md local commands: what counts as a busy local state", () => {
  it.each(BUSY)("busy, made again: %s", (message) => {
    expect(isLocalStateBusy(new Error(message))).toBe(true);
  });

  it.each(NOT_BUSY)("a real failure, not made again: %s", (message) => {
    expect(isLocalStateBusy(new Error(message))).toBe(false);
  });
});

describe("docs/operations.md local commands: waiting out a busy local state", () => {
  it("a call that finds the state busy is made again until it succeeds", async () => {
    let calls = 0;
    const answer = await whileLocked(async () => {
      calls += 1;
      if (calls < 3) throw new Error(BUSY[calls - 1]);
      return "answer";
    }, {});
    expect([answer, calls]).toEqual(["answer", 3]);
  });

  it("a real failure is thrown at once, as is a busy one for a call that must not be made late", async () => {
    let calls = 0;
    const failing = (message: string) => async () => {
      calls += 1;
      throw new Error(message);
    };
    await expect(whileLocked(failing(NOT_BUSY[0]!), {})).rejects.toThrow(NOT_BUSY[0]!);
    await expect(whileLocked(failing(BUSY[0]!), { retryLocked: false })).rejects.toThrow(BUSY[0]!);
    expect(calls).toBe(2);
  });

  it("past the bound the call fails naming the busy state, its last cause, and what to do", async () => {
    let calls = 0;
    const error = await whileLocked(
      async () => {
        calls += 1;
        throw new Error(BUSY[0]);
      },
      {},
      1_000,
    ).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(LocalStateBusy);
    expect(calls).toBeGreaterThan(1);
    const message = (error as Error).message;
    expect(message).toContain("The local state stayed busy for 1 s, held by npm start or another command");
    expect(message).toContain(`the last: ${BUSY[0]}`);
    expect(message).toContain("Nothing of the failed call was stored; run the command again.");
  });
});
