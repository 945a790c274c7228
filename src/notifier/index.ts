/** Entry of the notifier Worker: consumes deletion notices. */
import { logLine } from "../shared/log.ts";
import type { NotifierEnv } from "../shared/env.ts";
import type { DeletionNotice } from "../shared/types.ts";

export default {
  async queue(batch: MessageBatch<DeletionNotice>): Promise<void> {
    for (const message of batch.messages) {
      logLine("info", "notice", { queue: batch.queue, event_id: message.body.event_id, receipt_id: message.body.receipt_id });
      message.ack();
    }
  },
} satisfies ExportedHandler<NotifierEnv, DeletionNotice>;
