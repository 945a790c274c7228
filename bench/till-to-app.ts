/**
 * The till-to-app target of `npm run bench`: how soon the shopper's phone hears of a receipt.
 * Receipts are added at a steady rate through the API Worker, as deployed, with the notifier
 * pushing to a local receiver that answers at once; each receipt's time is from the moment the
 * till has add's answer to the moment its `receipt.created` push arrives. Then the same receipts
 * are deleted at the same rate, timed from delete's answer to the `receipt.deleted` push. It runs
 * in a Miniflare of its own (the HTTP routes' notifier logs and acks instead of pushing), and
 * also measures what each added receipt grew the shards' databases by.
 */
import { percentile } from "../harness/percentile.ts";
import { PATHS } from "../src/shared/paths.ts";
import type { Bundles } from "./build.ts";
import { arrivalKey, startReceiver, type Receiver } from "./receiver.ts";
import { addHeaders, logIn, tokenHeaders } from "./requests.ts";
import { startRuntime } from "./runtime.ts";

/** One rate's figures, in milliseconds from the till's answer to the push's arrival. */
export interface TillToAppRow {
  /** Receipts added (and then deleted) a second. */
  rate: number;
  receipts: number;
  created_p50_ms: number;
  created_p99_ms: number;
  deleted_p50_ms: number;
  deleted_p99_ms: number;
  /**
   * The till's own wait for add's and delete's answers, p99: when it rises with the push's, the
   * machine (its CPU, or the disk every D1 write waits for) was busy, not the way to the app.
   */
  add_answer_p99_ms: number;
  delete_answer_p99_ms: number;
  /** D1's own size of every shard, grown by the adds, per receipt added (the receipt, its key record and its event). */
  d1_bytes_per_receipt: number;
}

/** Receipts added and deleted before the timing, so no isolate's first request is timed. */
const WARM_UP = 20;
const WARM_UP_RATE = 20;
/** How long a run waits for the last push before it fails. */
const ARRIVAL_TIMEOUT_MS = 60_000;
const POLL_MS = 20;

/** Times the way from till to app at each rate, for `seconds` of adds and as many deletes each. */
export async function benchTillToApp(bundles: Bundles, rates: readonly number[], seconds: number, body: string): Promise<TillToAppRow[]> {
  const receiver = await startReceiver();
  const secret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64")}`;
  const runtime = await startRuntime(bundles, { url: receiver.url, secret });
  try {
    const client = await runtime.issueClient("till");
    const token = await logIn(runtime, client);
    const till = {
      add: async (): Promise<string> => {
        const response = await fetch(runtime.urls.api + PATHS.add, {
          method: "POST",
          headers: { ...addHeaders(client, token), "idempotency-key": crypto.randomUUID() },
          body,
        });
        const answer = (await response.json()) as { data?: { receipt_id?: string } };
        if (response.status !== 200 || !answer.data?.receipt_id) throw new Error(`add answered ${response.status}: ${JSON.stringify(answer).slice(0, 300)}`);
        return answer.data.receipt_id;
      },
      delete: async (receiptId: string): Promise<string> => {
        const response = await fetch(runtime.urls.api + PATHS.delete, { method: "POST", headers: { ...tokenHeaders(client, token), receipt_id: receiptId } });
        if (response.status !== 200) throw new Error(`delete answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
        await response.arrayBuffer();
        return receiptId;
      },
    };
    const warm = await paced(WARM_UP_RATE, WARM_UP, till.add);
    await arrived(receiver, "receipt.created", warm);
    await arrived(receiver, "receipt.deleted", await paced(WARM_UP_RATE, WARM_UP, (i) => till.delete(warm[i]!.receiptId)));

    const rows: TillToAppRow[] = [];
    for (const rate of rates) {
      const count = Math.round(rate * seconds);
      const before = await runtime.storedBytes();
      const added = await paced(rate, count, till.add);
      const created = await arrived(receiver, "receipt.created", added);
      const grown = (await runtime.storedBytes()) - before;
      const removed = await paced(rate, count, (i) => till.delete(added[i]!.receiptId));
      const deleted = await arrived(receiver, "receipt.deleted", removed);
      rows.push({
        rate,
        receipts: count,
        created_p50_ms: percentile(created, 0.5),
        created_p99_ms: percentile(created, 0.99),
        deleted_p50_ms: percentile(deleted, 0.5),
        deleted_p99_ms: percentile(deleted, 0.99),
        add_answer_p99_ms: percentile(waits(added), 0.99),
        delete_answer_p99_ms: percentile(waits(removed), 0.99),
        d1_bytes_per_receipt: Math.round(grown / count),
      });
    }
    return rows;
  } finally {
    await runtime.dispose();
    receiver.server.close();
  }
}

/** A receipt, when the till sent its request and when it had the answer (`performance.now()`). */
interface Answered {
  receiptId: string;
  sent: number;
  at: number;
}

/** How long each request waited for its answer, sorted. */
function waits(answered: readonly Answered[]): number[] {
  return answered.map(({ sent, at }) => at - sent).sort((a, b) => a - b);
}

/**
 * Sends `count` requests at `rate` a second, each on its schedule whether or not the ones before
 * it were answered (a till does not wait for another till), and returns them in order.
 */
async function paced(rate: number, count: number, send: (i: number) => Promise<string>): Promise<Answered[]> {
  const start = performance.now();
  const requests: Promise<Answered>[] = [];
  for (let i = 0; i < count; i += 1) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const sent = performance.now();
    requests.push(send(i).then((receiptId) => ({ receiptId, sent, at: performance.now() })));
  }
  return Promise.all(requests);
}

/** Waits until each receipt's event of `type` has arrived; returns the times from answer to arrival, sorted. */
async function arrived(receiver: Receiver, type: string, answered: readonly Answered[]): Promise<number[]> {
  const deadline = performance.now() + ARRIVAL_TIMEOUT_MS;
  const missing = () => answered.filter(({ receiptId }) => !receiver.arrivals.has(arrivalKey(type, receiptId)));
  while (missing().length > 0) {
    if (performance.now() > deadline) throw new Error(`${missing().length} of ${answered.length} ${type} events did not arrive`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
  return answered.map(({ receiptId, at }) => receiver.arrivals.get(arrivalKey(type, receiptId))! - at).sort((a, b) => a - b);
}
