import type { D1Migration } from "cloudflare:test";
import type { ApiEnv } from "../src/shared/env.ts";

declare global {
  namespace Cloudflare {
    interface Env extends ApiEnv {
      TEST_MIGRATIONS: D1Migration[];
      /** Pushes the test push receiver got (test/support/push-receiver.js). */
      PUSH_LOG: KVNamespace;
    }
    interface GlobalProps {
      mainModule: typeof import("../src/api/index.ts");
    }
  }
}

declare module "vitest" {
  /**
   * What vitest.config.ts provides to the tests: the fuzzing's campaign size and seed, and in the
   * "workers-wide" project the steps each Workflow instance may run and the shards of a part.
   */
  interface ProvidedContext {
    fuzzRuns: number;
    fuzzSeconds: number;
    fuzzSeed: number | null;
    wideStepLimit: number;
    widePartShards: number;
  }
}
