/**
 * Messages of the notices queue that carry several events (a {@link NoticeBundle}, the cron's
 * hand-over after an outage): the notifier deals with each event as with a message of its own,
 * and the bundle's message is acked once every event of it was, or retried whole, after the
 * longest delay asked, when any was retried (a copy of an event delivered meanwhile costs no
 * second push: its claim finds it delivered).
 */
import { noticesOf, type NoticeMessage, type QueuedNotice } from "../shared/types.ts";

/**
 * One message per event of `messages`, and `settle`, which acks or retries each bundle's message
 * as its events' messages went; call it once they all have. A message of one event is passed on as it is.
 */
export function eventMessages(messages: readonly Message<NoticeMessage>[]): { events: Message<QueuedNotice>[]; settle: () => void } {
  const events: Message<QueuedNotice>[] = [];
  const bundles: { message: Message<NoticeMessage>; outcomes: BundledOutcome[] }[] = [];
  for (const message of messages) {
    if (!("events" in message.body)) {
      events.push(message as Message<QueuedNotice>);
      continue;
    }
    const outcomes = noticesOf(message.body).map((): BundledOutcome => ({ acked: false }));
    bundles.push({ message, outcomes });
    noticesOf(message.body).forEach((body, index) => events.push(bundled(message, body, `${message.id}/${index}`, outcomes[index]!)));
  }
  return {
    events,
    settle: () => {
      for (const { message, outcomes } of bundles) {
        const retried = outcomes.filter((outcome) => !outcome.acked);
        if (retried.length === 0) message.ack();
        else message.retry({ delaySeconds: Math.max(0, ...retried.map((outcome) => outcome.delaySeconds ?? 0)) });
      }
    },
  };
}

/** What became of one event of a bundle: acked, or retried (an event never settled counts as retried). */
interface BundledOutcome {
  acked: boolean;
  delaySeconds?: number;
}

function bundled(message: Message<NoticeMessage>, body: QueuedNotice, id: string, outcome: BundledOutcome): Message<QueuedNotice> {
  return {
    id,
    timestamp: message.timestamp,
    attempts: message.attempts,
    body,
    ack: () => {
      outcome.acked = true;
    },
    retry: (options?: QueueRetryOptions) => {
      outcome.acked = false;
      outcome.delaySeconds = options?.delaySeconds;
    },
  };
}
