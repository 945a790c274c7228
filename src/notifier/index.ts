/**
 * Entry of the notifier Worker: consumes the queue's messages, each carrying one receipt or
 * erasure event, delivers the events to the app push service, and consumes their dead-letter
 * queue (docs/api.md#receipt-events). Both queues come to this one handler; `batch.queue` tells
 * them apart.
 */
import type { NotifierEnv } from "../shared/env.ts";
import type { QueuedNotice } from "../shared/types.ts";
import { deliveryTiming, pushTarget } from "./config.ts";
import { FAILED_NOTICES_QUEUE, storeDeadLetter } from "./dead-letters.ts";
import { deliverBatch } from "./deliver.ts";

export default {
  async queue(batch, env) {
    if (batch.queue === FAILED_NOTICES_QUEUE) {
      await Promise.all(batch.messages.map((message) => storeDeadLetter(message, env)));
      return;
    }
    const target = await pushTarget(env);
    // Each message acks or retries on its own: one slow or failing push holds up no other.
    await deliverBatch(batch.messages, env, target, deliveryTiming(env));
  },
} satisfies ExportedHandler<NotifierEnv, QueuedNotice>;
