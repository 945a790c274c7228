/**
 * The counting Worker: runs the API Worker's own code for one request with its storage bindings
 * wrapped, and answers with every storage call it made and whether the answer waited for it.
 * Used once per route, apart from the timed runs, so that counting costs the timings nothing.
 *
 * Never deployed: bench/run.ts bundles it with `wrangler deploy --dry-run` and gives it the API
 * Worker's bindings. Each counted request should name a client this Worker has not seen, so the
 * per-isolate client cache cannot hide the KV read a cold isolate makes.
 */
import api from "../../src/api/index.ts";
import type { ApiEnv } from "../../src/shared/env.ts";
import { StorageLedger } from "../../test/support/storage-ledger.ts";
import type { CountedAnswer } from "../protocol.ts";

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const ledger = new StorageLedger();
    const deferred: Promise<unknown>[] = [];
    const countedEnv = ledger.instrumentEnv(env);
    const countedCtx = new Proxy(ctx, {
      get: (target, property) => {
        if (property === "waitUntil") return (promise: Promise<unknown>) => void deferred.push(promise);
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const response = await api.fetch(request, countedEnv, countedCtx);
    const body = await response.text();
    ledger.answered = true;
    await Promise.allSettled(deferred);
    await ledger.drain();
    const answer: CountedAnswer = { status: response.status, body, calls: ledger.calls };
    return Response.json(answer);
  },
} satisfies ExportedHandler<ApiEnv>;
