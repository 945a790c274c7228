/**
 * Entry of the notifier Worker: consumes the queue's messages, each carrying one receipt or
 * erasure event, delivers the events to the app push service, and consumes their dead-letter
 * queue (docs/api.md#receipt-events). Both queues come to this one handler; `batch.queue` tells
 * them apart.
 */
import { deliveryTiming, pushTarget, type DeliveryTiming, type NotifierSettings, type PushTarget, type SettingsMemory } from "../shared/config.ts";
import type { NotifierEnv } from "../shared/env.ts";
import type { NoticeBundle, NoticeMessage, QueuedNotice } from "../shared/types.ts";
import { FAILED_NOTICES_QUEUE, storeDeadLetter, unbundle } from "./dead-letters.ts";
import { deliverBatch } from "./deliver.ts";
import { freshEndpointView, type EndpointView } from "./endpoint.ts";

/**
 * Everything the notifier keeps in memory between batches of one isolate: its parsed settings,
 * and what it last saw of the push service.
 */
interface IsolateState {
  timing: SettingsMemory<NotifierSettings, DeliveryTiming>;
  /** The push target, its signing keys imported once. */
  target: SettingsMemory<Pick<NotifierSettings, "APP_PUSH_URL" | "APP_PUSH_SECRET">, Promise<PushTarget>>;
  endpoint: EndpointView;
}

/** A notifier with isolate state of its own: the Worker has one; a test may make a fresh one. */
export function createNotifier(isolate: IsolateState = { timing: {}, target: {}, endpoint: freshEndpointView() }) {
  return {
    async queue(batch, env) {
      if (batch.queue === FAILED_NOTICES_QUEUE) {
        await Promise.all(
          batch.messages.map((message) =>
            "events" in message.body
              ? unbundle(message as Message<NoticeBundle>, env)
              : storeDeadLetter(message as Message<QueuedNotice>, env, deliveryTiming(env, isolate.timing).retry.windowMs),
          ),
        );
        return;
      }
      const target = await pushTarget(env, isolate.target);
      // Each message acks or retries on its own: one slow or failing push holds up no other.
      await deliverBatch(batch.messages, env, target, deliveryTiming(env, isolate.timing), isolate.endpoint);
    },
  } satisfies ExportedHandler<NotifierEnv, NoticeMessage>;
}

export default createNotifier();
