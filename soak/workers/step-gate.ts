/**
 * Holds the wrapped Workflows' steps before they run, on the harness's say-so (STEPS_PATH), so
 * that requests racing an erasure can be sent between any two of its steps. A step held once is
 * not held again when the instance replays it (after a sleep, the runtime runs `run` anew and
 * answers the steps done from their stored results).
 */
import type { WorkflowStep } from "cloudflare:workers";
import { STEPS_PATH } from "../protocol.ts";

const HELD_POLL_MS = 20;

/** One per wrapper Worker isolate, shared by its fetch handler and its Workflows. */
export class StepGate {
  #holding = false;
  readonly #held = new Set<string>();
  readonly #passed = new Set<string>();

  /** Answers the harness on STEPS_PATH. */
  async control(request: Request): Promise<Response> {
    if (request.method === "POST") {
      const order = (await request.json()) as { hold?: boolean; release?: string };
      if (order.hold !== undefined) this.#holding = order.hold;
      for (const key of this.#held) if (!this.#holding || key === order.release) this.#held.delete(key);
    }
    return Response.json({ held: [...this.#held] });
  }

  /**
   * `step` of instance `instanceId`, each of its steps held at the gate while the gates are on.
   * The runtime's step is an RPC stub: its methods are called on it, never bound or inherited.
   */
  wrap(step: WorkflowStep, instanceId: string): WorkflowStep {
    const stub = step as unknown as Record<"do" | "sleep" | "sleepUntil" | "waitForEvent", (...args: unknown[]) => Promise<unknown>>;
    const gated = {
      do: async (name: string, ...rest: unknown[]) => {
        await this.#pass(`${instanceId} ${name}`);
        return stub.do(name, ...rest);
      },
      sleep: (...args: unknown[]) => stub.sleep(...args),
      sleepUntil: (...args: unknown[]) => stub.sleepUntil(...args),
      waitForEvent: (...args: unknown[]) => stub.waitForEvent(...args),
    };
    return gated as unknown as WorkflowStep;
  }

  // Waits on a timer, not on a promise the release would resolve: the runtime cancels an
  // invocation left waiting on nothing but another request's doing, as one that hung.
  async #pass(key: string): Promise<void> {
    if (!this.#holding || this.#passed.has(key)) return;
    this.#passed.add(key);
    this.#held.add(key);
    while (this.#held.has(key)) await new Promise((resolve) => setTimeout(resolve, HELD_POLL_MS));
  }
}
