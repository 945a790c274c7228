/**
 * The CPU time add spends deflating a body before its batch (migration 0022), in the runtime add
 * runs in: the floor Worker deflates a body a number of rounds, and the time of that request less
 * the time of one of no rounds, over the rounds, is a deflate's. Timed from outside, since a
 * Worker's own clock stands still while it computes; the median of several pairs, so that a burst
 * of other work on the machine moves one pair, not the figure.
 */
import { FLOOR_PATHS, type Deflate } from "./protocol.ts";

const ROUNDS = 200;
const PAIRS = 7;

/** Milliseconds of one deflate of `body` the way `deflateWith` names, in the floor Worker at `floorUrl`. */
export async function deflateMs(floorUrl: string, body: string, deflateWith: Deflate): Promise<number> {
  const timed = async (rounds: number) => {
    const started = performance.now();
    const answer = await fetch(new URL(FLOOR_PATHS.deflate, floorUrl), { method: "POST", body, headers: { rounds: String(rounds), "deflate-with": deflateWith } });
    if (!answer.ok) throw new Error(`deflate with ${deflateWith}: HTTP ${answer.status}`);
    await answer.arrayBuffer();
    return performance.now() - started;
  };
  await timed(ROUNDS);
  const perDeflate: number[] = [];
  for (let pair = 0; pair < PAIRS; pair += 1) perDeflate.push(((await timed(ROUNDS)) - (await timed(0))) / ROUNDS);
  return perDeflate.sort((a, b) => a - b)[Math.floor(PAIRS / 2)]!;
}
