/**
 * The notifier's floor: a queue consumer that only pushes each message to PUSH_URL and acks it,
 * with no outbox, no claim, no signature and no log. Events per second delivered by the notifier
 * divided by this one's say what its exactly-once bookkeeping costs.
 *
 * Never deployed: bench/notifier.ts bundles it and runs it beside the notifier in one Miniflare.
 */
interface FloorEnv {
  PUSH_URL: string;
}

// A Worker holds at most six connections open at once: the notifier's bound, and the floor's.
const PUSH_CONCURRENCY = 6;

export default {
  async queue(batch, env): Promise<void> {
    const messages = [...batch.messages];
    const push = async (): Promise<void> => {
      for (let message = messages.shift(); message; message = messages.shift()) {
        const response = await fetch(env.PUSH_URL, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(message.body),
        });
        await response.body?.cancel();
        message.ack();
      }
    };
    await Promise.all(Array.from({ length: PUSH_CONCURRENCY }, push));
  },
} satisfies ExportedHandler<FloorEnv>;
