/**
 * The schemas that validate requests, and those of the events pushed to the app. They are the
 * single source for the Worker's checks, the OpenAPI document and the typed POS client: add a
 * header or field here, nowhere else.
 * zod/mini keeps the Worker small: the classic API would add about 90 KiB gzip to a cold start.
 */
import * as z from "zod/mini";
import { isRfc3339DateTime } from "./date-time.ts";
import { DR_RETAIL_FORMATS, type DrRetailFormat } from "./dr-retail-profiles.ts";
import { UUID_V7_PATTERN } from "./shard-ids.ts";

const printableAscii = /^[\x20-\x7E]*$/;

/**
 * A header value usable as a string (docs/api.md#common-rules): present values that are empty, longer than
 * `maxLength`, or hold anything but printable ASCII are refused with 406.
 */
function usableHeader(maxLength?: number) {
  const length = maxLength === undefined ? [] : [z.maxLength(maxLength, `is longer than ${maxLength} characters`)];
  return z.string().check(
    ...length,
    z.regex(printableAscii, "holds control or non-ASCII characters"),
    z.refine((value) => value.trim() !== "", "is empty"),
    // A refine has no JSON Schema; this pattern says the same two rules to the OpenAPI document.
    z.meta({ pattern: "^[\\x20-\\x7E]*[\\x21-\\x7E][\\x20-\\x7E]*$" }),
  );
}

/** The usual header value: at most 256 characters (docs/api.md#common-rules). */
export const headerText = usableHeader(256);

/** `Authorization` is exempt from the length rule: an over-long token is simply invalid (403). */
export const authorizationHeader = usableHeader().check(
  z.meta({ description: "Bearer <ACCESS_TOKEN>, the token from login", example: "Bearer eyJhbGciOiJIUzI1NiIs..." }),
);

/** A header value with its documentation. */
function documentedHeader(description: string, example?: string, schema = headerText) {
  return schema.check(z.meta(example === undefined ? { description } : { description, example }));
}

/**
 * A header that names who or what a request is about (docs/api.md#common-rules). The runtime
 * joins a header sent more than once into one value with ", ", so a comma is refused: otherwise
 * two app_user_id headers would store a receipt for a shopper called "user-42, user-43".
 */
function identifying(schema: z.ZodMiniString<string>) {
  return schema.check(
    z.refine((value) => !value.includes(","), "was sent more than once or holds a comma"),
    // Printable ASCII but the comma (0x2C), with one character that is not a space.
    z.meta({ pattern: "^[\\x20-\\x2B\\x2D-\\x7E]*[\\x21-\\x2B\\x2D-\\x7E][\\x20-\\x2B\\x2D-\\x7E]*$" }),
  );
}

/**
 * An identifying header value of at most 256 characters: what a client_id, chain_id, app_user_id
 * or receipt_id must be to travel in a request, which the operator scripts ask of an ID too.
 */
export const identifyingText = identifying(headerText);

/** A documented identifying header. */
function identifyingHeader(description: string, example: string) {
  return documentedHeader(`${description}. Sent once, without a comma.`, example, identifyingText);
}

const clientIdHeader = identifyingHeader("Client ID issued by the operator", "pos-acme-01");

/** Headers of `POST /receipts/v2/login` (docs/api.md#login). */
export const loginHeaders = z.object({
  client_id: clientIdHeader,
  client_secret: documentedHeader("Client secret issued by the operator"),
  token_type: documentedHeader("Must be Bearer", "Bearer"),
  scope: documentedHeader(
    "service.pos for a point-of-sale client (add, delete), service.app for the app push service's client (the event feed), service.ops for an operator's monitor (the status); must be among the client's scopes",
    "service.pos",
  ),
});
export type LoginHeaders = z.infer<typeof loginHeaders>;

/** Success body of login. */
export const loginResponse = z.object({
  data: z.object({
    access_token: z.string(),
    expires_in: z.literal(3600),
    token_type: z.literal("Bearer"),
  }),
  status: z.literal("OK"),
  status_code: z.literal(200),
});
export type LoginResponse = z.infer<typeof loginResponse>;

/** Headers of `POST /receipts/v2/add` (docs/api.md#add). */
export const addHeaders = z.object({
  Authorization: authorizationHeader,
  client_id: clientIdHeader,
  chain_id: identifyingHeader("ID of the retail chain the receipt belongs to; one of the client's chains", "chain-nord"),
  app_user_id: identifyingHeader("Internal ID of the app user who holds the receipt", "au-7f3c9e"),
  "Content-Type": documentedHeader("application/json; a charset parameter, if sent, must be utf-8", "application/json"),
  "Idempotency-Key": z.optional(
    identifying(usableHeader(255)).check(
      z.meta({
        description:
          "Optional, 1–255 printable ASCII characters but the comma, chosen by the client and sent once. Repeating it within 24 hours returns the first answer instead of adding a second receipt.",
        example: "till-7-20261122-000123",
      }),
    ),
  ),
});
export type AddHeaders = z.infer<typeof addHeaders>;

/** An amount in minor units (cents): an integer JSON numbers can carry exactly. */
function minorUnits(description: string, example: number) {
  // One wording for a fraction, a string and a number beyond 2^53; a missing field keeps its own.
  const error = (issue: { input?: unknown }) =>
    issue.input === undefined
      ? undefined
      : `must be an integer of minor units from -${Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER}`;
  return z.int({ error }).check(z.meta({ description, example }));
}

/**
 * A string of `min`–`max` characters, counted as Unicode code points the way JSON Schema's
 * minLength/maxLength count them, so that the OpenAPI document and the Worker agree; zod's own
 * length checks count UTF-16 units and would refuse 200 emoji.
 */
function characters(min: number, max: number, meta: { description: string; example: string }) {
  return z.string().check(
    z.refine((value) => {
      // A string has from half its UTF-16 length to all of it in code points: only one near a
      // bound is counted, which spares an add of 40 KB a copy of each of its strings.
      if (value.length <= max && value.length >= 2 * min) return true;
      const length = [...value].length;
      return length >= min && length <= max;
    }, min === 0 ? `must be at most ${max} characters` : `must be ${min}–${max} characters`),
    z.meta({ ...meta, minLength: min, maxLength: max }),
  );
}

/** A VAT rate in percent, 0–100, of a line or of a DR receipt's VAT total. */
function vatRate(example: number) {
  return z.number().check(
    z.gte(0, "must be a percentage from 0 to 100"),
    z.lte(100, "must be a percentage from 0 to 100"),
    z.meta({ description: "VAT rate in percent, 0–100", example }),
  );
}

/** One line of a receipt. Fields beyond these are kept as sent: tills add their own. */
export const lineItem = z.looseObject({
  description: characters(1, 200, { description: "What was sold, as printed on the receipt", example: "Oat milk 1 l" }),
  quantity: z.number().check(
    z.refine((value) => value !== 0, "must not be 0"),
    z.meta({
      description: "How many; not 0, negative for a returned item, fractional for weighed goods",
      example: 2,
      not: { const: 0 },
    }),
  ),
  unit_price: minorUnits("Price of one unit in minor units (cents)", 149),
  total: minorUnits("Amount of the line in minor units; a discount line may be negative", 298),
  sku: z.optional(z.string().check(z.meta({ description: "Stock keeping unit", example: "4006381333931" }))),
  vat_rate: z.optional(vatRate(7)),
});
export type LineItem = z.infer<typeof lineItem>;

/** One payment that settled the receipt. */
export const payment = z.looseObject({
  method: z.string().check(z.meta({ description: "How it was paid", example: "card" })),
  amount: minorUnits("Amount paid this way, in minor units", 298),
});

// The fields of our receipt, which add's body and the model that events carry share.
const receiptFields = {
  purchased_at: z.string().check(
    z.refine(isRfc3339DateTime, "must be an RFC 3339 timestamp with an offset, e.g. 2026-11-22T14:03:00+01:00"),
    z.meta({ description: "When the purchase happened: RFC 3339 with an offset", format: "date-time", example: "2026-11-22T14:03:00+01:00" }),
  ),
  currency: z.string().check(
    z.regex(/^[A-Z]{3}$/, "must be an ISO 4217 code of 3 upper-case letters"),
    z.meta({ description: "ISO 4217 currency code", example: "EUR" }),
  ),
  total: minorUnits("Amount of the receipt in minor units; equals the sum of line_items[].total", 298),
  line_items: z.array(lineItem).check(
    z.minLength(1, "must hold at least 1 item"),
    z.maxLength(500, "must hold at most 500 items"),
    z.meta({ description: "The lines of the receipt, 1–500" }),
  ),
  store_id: z.optional(z.string().check(z.meta({ description: "The chain's ID of the store", example: "store-0042" }))),
  pos_receipt_number: z.optional(
    z.string().check(z.meta({ description: "The number printed at the till", example: "0042-7-000123" })),
  ),
  payments: z.optional(z.array(payment).check(z.meta({ description: "How the receipt was paid" }))),
  metadata: z.optional(
    z
      .record(z.string(), characters(0, 200, { description: "A value of at most 200 characters", example: "4711" }))
      .check(
        z.refine((value) => Object.keys(value).length <= 20, "must hold at most 20 keys"),
        z.meta({ description: "The client's own string keys and values, at most 20", maxProperties: 20, example: { loyalty_card: "4711" } }),
      ),
  ),
};

// Our total is what the shopper paid: the sum of the lines, kept exact however many there are.
const totalIsSumOfLines = z.superRefine((receipt: { total: number; line_items: readonly { total: number }[] }, context) => {
  const sum = sumOfLineTotals(receipt.line_items);
  // An unusable total or line total has its own issue already; a sum of them would only mislead.
  if (sum === undefined || !Number.isSafeInteger(receipt.total) || BigInt(receipt.total) === sum) return;
  context.issues.push({
    code: "custom",
    message: `must equal the sum of line_items[].total, which is ${sum}`,
    path: ["total"],
    input: receipt.total,
  });
});

/**
 * The body of `POST /receipts/v2/add` (docs/api.md#add): one JSON object of at most 64 KiB. Unknown
 * top-level fields are refused, so that a typo cannot vanish silently.
 */
export const receiptBody = z.strictObject(receiptFields).check(totalIsSumOfLines);
export type ReceiptBody = z.infer<typeof receiptBody>;

/** One VAT rate of a receipt mapped from DR Retail: its `vat` total's sub-total, in minor units. */
export const vatAtRate = z.object({
  rate: vatRate(25),
  amount: minorUnits("VAT at this rate, in minor units; negative where refunded", 2380),
  taxable_amount: minorUnits("Amount taxed at this rate, VAT included, in minor units", 11900),
  net_amount: minorUnits("Amount taxed at this rate, VAT excluded, in minor units", 9520),
});

/**
 * The receipt as every consumer reads it (docs/api.md#dr-retail-mapping): our body's fields,
 * and `vat` per rate where a receipt mapped from DR Retail stated it. A receipt added in our
 * shape is its body as given.
 */
export const receiptModel = z
  .strictObject({
    ...receiptFields,
    vat: z.optional(z.array(vatAtRate).check(z.meta({ description: "VAT per rate, only on receipts added in DR Retail that state it (totals of type vat)" }))),
  })
  .check(totalIsSumOfLines);
export type ReceiptModel = z.infer<typeof receiptModel>;

// Exact even where 500 lines of large amounts would pass 2^53 as a float sum.
function sumOfLineTotals(items: readonly { total: number }[]): bigint | undefined {
  let sum = 0n;
  for (const item of items) {
    if (!Number.isSafeInteger(item.total)) return undefined;
    sum += BigInt(item.total);
  }
  return sum;
}

/** Success body of add. */
export const addResponse = z.object({
  data: z.object({
    receipt_id: z.string().check(
      z.meta({ description: "The service's ID of the receipt: a UUIDv7", example: "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17" }),
    ),
    chain_id: z.string(),
    client_id: z.string(),
    app_user_id: z.string(),
    created_at: z.string().check(
      z.meta({ description: "When the service stored the receipt (UTC)", format: "date-time", example: "2026-11-22T13:03:05.123Z" }),
    ),
    masked_fields: z.optional(
      z.array(z.string()).check(
        z.meta({
          description:
            "Present only when the body held a full card number in free text: the JSON pointer (RFC 6901) of each string in which the service masked it (first six and last four digits kept), in the order of the body. The receipt is stored, pushed, exported and archived masked (docs/api.md, No full card number)",
          example: ["/payments/0/tender/tender_details/collection/0"],
        }),
      ),
    ),
  }),
  status: z.literal("OK"),
  status_code: z.literal(200),
});
export type AddResponse = z.infer<typeof addResponse>;

/** The body of every error response (docs/api.md#errors). */
export const errorResponse = z.object({
  message: z.string(),
  status: z.string(),
  status_code: z.int(),
});
export type ErrorResponse = z.infer<typeof errorResponse>;

/** Headers of `POST /receipts/v2/delete` (docs/api.md#delete), in the documented order. */
export const deleteHeaders = z.object({
  Authorization: authorizationHeader,
  receipt_id: identifyingHeader(
    "Internal document ID of the receipt to remove: the receipt_id add returned, shown in the app's return QR code",
    "019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17",
  ),
  client_id: clientIdHeader,
  chain_id: identifyingHeader(
    "ID of the requesting chain; must equal the receipt's chain_id, so that a chain removes only its own receipts",
    "chain-nord",
  ),
  app_user_id: identifyingHeader("Internal ID of the app user; must equal the receipt's app_user_id", "au-7f3c9e"),
});
export type DeleteHeaders = z.infer<typeof deleteHeaders>;

/** Success body of delete. */
export const deleteResponse = z.object({
  message: z.string().check(
    z.meta({
      description: "Says that the receipt was deleted and the app user notified",
      example: "Receipt 019aa8a4-3c1e-7d2b-9f41-6c0e5b2d8a17 was deleted and the app user notified.",
    }),
  ),
  status: z.literal("OK"),
  status_code: z.literal(200),
});
export type DeleteResponse = z.infer<typeof deleteResponse>;

// The events the notifier pushes to the app push service (docs/api.md#receipt-events). They are
// the OpenAPI document's webhooks and the types of the queue messages.

const eventFields = {
  event_id: z.string().check(z.meta({ description: "Unique per event, kept through every retry; the webhook-id" })),
  occurred_at: z.string().check(z.meta({ description: "When the change happened (UTC)", format: "date-time" })),
  receipt_id: z.string(),
  app_user_id: z.string(),
  chain_id: z.string(),
  client_id: z.string(),
};

/**
 * The push of `receipt.created`: the stored receipt in our model (its body as add stored it, or
 * the model of a DR Retail body), and for a DR Retail receipt its format and the body as sent.
 */
export const receiptCreatedEvent = z.object({
  ...eventFields,
  type: z.literal("receipt.created"),
  created_at: z.string().check(z.meta({ description: "The receipt's created_at, as add answered it", format: "date-time" })),
  receipt: receiptModel,
  format: z.optional(
    z.enum(DR_RETAIL_FORMATS as [DrRetailFormat, ...DrRetailFormat[]]).check(
      z.meta({ description: "Only on a receipt added in DR Retail: its format and version. Absent: added in our own shape", example: "dr-retail/v1.1" }),
    ),
  ),
  original: z.optional(
    z.record(z.string(), z.unknown()).check(
      z.meta({ description: "Only on a receipt added in DR Retail: the body as the till sent it (the format's own JSON object), a full card number in free text masked (docs/api.md, No full card number)" }),
    ),
  ),
});
export type ReceiptCreatedEvent = z.infer<typeof receiptCreatedEvent>;

/** The push of `receipt.deleted`, also its queue message. */
export const receiptDeletedEvent = z.object({ ...eventFields, type: z.literal("receipt.deleted") });
export type ReceiptDeletedEvent = z.infer<typeof receiptDeletedEvent>;

/**
 * The push of `app_user.erased` (docs/api.md#erasure): every receipt of the app user is gone from
 * the service, with every copy of their data; the app drops whatever it still holds of them. It
 * stands for every event of theirs that had not gone out.
 */
export const appUserErasedEvent = z.object({
  event_id: eventFields.event_id,
  type: z.literal("app_user.erased"),
  occurred_at: z.string().check(
    z.meta({ description: "The erasure's instant (UTC): every receipt of the app user created at or before it is gone", format: "date-time" }),
  ),
  app_user_id: z.string(),
  receipts: z.number().check(z.int(), z.meta({ description: "How many receipts this erasure removed" })),
});
export type AppUserErasedEvent = z.infer<typeof appUserErasedEvent>;

/** Headers of `GET /receipts/v2/events` (docs/api.md#event-feed): the app push service's client. */
export const feedHeaders = z.object({
  Authorization: authorizationHeader,
  client_id: identifyingHeader("Client ID of the app push service's client, issued with --app", "app-push-01"),
});
export type FeedHeaders = z.infer<typeof feedHeaders>;

/** Headers of the app-user jobs' starts (docs/api.md#jobs): the app push service's client asks for one app user. */
export const appUserJobHeaders = z.object({
  Authorization: authorizationHeader,
  client_id: identifyingHeader("Client ID of the app push service's client, issued with --app", "app-push-01"),
  app_user_id: identifyingHeader("Internal ID of the app user whose data the job is for", "au-7f3c9e"),
  "Idempotency-Key": identifying(usableHeader(255)).check(
    z.meta({
      description:
        "1–255 printable ASCII characters but the comma, chosen by the client and sent once. The same key again, for the same app user and kind of job, answers the same job while its record is kept (EXPORT_KEPT_DAYS, 7 days).",
      example: "forget-au-7f3c9e-1",
    }),
  ),
});
export type AppUserJobHeaders = z.infer<typeof appUserJobHeaders>;

/** Headers of a job's reads (docs/api.md#jobs). */
export const jobHeaders = feedHeaders;

/** A job's state as the app reads it (docs/api.md#jobs): never the app user. */
export const jobState = z.object({
  job_id: z.string().check(z.meta({ description: "The job's ID, made by the service", example: "5b0a9f6e-3f1c-4d2a-9c1e-7a2b3c4d5e6f" })),
  kind: z.enum(["export", "erasure"]),
  state: z.enum(["running", "complete", "failed"]).check(
    z.meta({ description: "running until the job ends; complete; or failed (start it again with a new Idempotency-Key)" }),
  ),
  occurred_at: z.optional(z.string().check(z.meta({ description: "The job's instant, once complete: an export holds what was committed before it; an erasure took effect at it" }))),
  counts: z.optional(
    z.record(z.string(), z.union([z.number(), z.boolean(), z.record(z.string(), z.number())])).check(
      z.meta({ description: "Once complete. An export: receipts, archived_receipts, audit_records, by_chain and archive_read. An erasure: receipts_erased" }),
    ),
  ),
});
export type JobState = z.infer<typeof jobState>;

/** The answer of a job's start (docs/api.md#jobs): 202, the job and its state. */
export const jobAccepted = z.object({
  data: z.object({ job_id: jobState.shape.job_id, kind: jobState.shape.kind, state: jobState.shape.state }),
  status: z.literal("Accepted"),
  status_code: z.literal(202),
});

/** The answer of a job's read (docs/api.md#jobs). */
export const jobResponse = z.object({ data: jobState, status: z.literal("OK"), status_code: z.literal(200) });

/** A complete export's file (docs/api.md#export): NDJSON, a receipt or an audit record a line, then the summary. */
export const exportFile = z.string().check(
  z.meta({ description: "NDJSON: one line per receipt (`receipt_id`, `chain_id`, `client_id`, `app_user_id`, `created_at`, `archived`, `receipt` in our model, and `format` and `original` for one added in another format), one per audit record naming the app user (`audit`), then one `summary` line" }),
);

// What the status reports, healthy or not (docs/api.md#status).
const statusData = z.looseObject({
  healthy: z.boolean().check(z.meta({ description: "false when any threshold is passed; then the answer is 503" })),
  reasons: z.array(
    z.object({
      code: z.string().check(z.meta({ description: "no_open_shard, shard_filling, shard_unreadable, migrations_lagging, delivery_late, failed_notices, endpoint_down, archive_behind, first_layout_left" })),
      message: z.string(),
      shard: z.optional(z.string()),
    }),
  ),
  checked_at: z.string().check(z.meta({ description: "When the status was computed (UTC); reused for STATUS_CACHE_SECONDS", format: "date-time" })),
  shards: z.array(z.looseObject({ name: z.string(), state: z.enum(["open", "closed"]) })).check(
    z.meta({ description: "Per shard: state, bytes and fill against SHARD_FILL_BYTES, migrations, undelivered events, failed notices, the archive's lag, when it was read" }),
  ),
  delivery: z.looseObject({ undelivered: z.number(), failed_notices: z.number() }),
  clients: z.object({ active: z.number(), disabled: z.number() }),
  thresholds: z.looseObject({}),
});

/** Success body of the status (docs/api.md#status): the report in `data`; a 503 carries it too, beside its message. */
export const statusResponse = z.object({
  data: statusData,
  status: z.literal("OK"),
  status_code: z.literal(200),
});

/** The answer of `GET /receipts/v2/status` when a threshold is passed: the same data, 503 (docs/api.md#status). */
export const unhealthyStatusResponse = z.object({
  data: statusData,
  message: z.string().check(z.meta({ description: "`Unhealthy: <codes>.`, each reason's code once, then where to read more" })),
  status: z.literal("Service Unavailable"),
  status_code: z.literal(503),
});

/** Headers of `GET /receipts/v2/status` (docs/api.md#status): an operator's monitor. */
export const statusHeaders = z.object({
  Authorization: authorizationHeader,
  client_id: identifyingHeader("Client ID of an operator's monitor, issued with --ops", "ops-monitor-01"),
});

/** Query parameters of the event feed (docs/api.md#event-feed); each is read once. */
export const feedQuery = z.object({
  after: z.optional(
    z.string().check(
      z.regex(UUID_V7_PATTERN, "is not an event_id"),
      z.meta({
        description:
          "The event_id of the last event applied: the page starts after it. Without it, the page starts at the feed's window (EVENT_FEED_DAYS, 14 days)",
        example: "019aa8a4-3c1e-7d2b-8a41-6c0e5b2d8a01",
      }),
    ),
  ),
  limit: z.optional(
    z.string().check(
      z.regex(/^(100|[1-9][0-9]?)$/, "is not a whole number from 1 to 100"),
      z.meta({ description: "How many events at most, 1–100; 100 when absent", example: "100" }),
    ),
  ),
});

/** Success body of the event feed: events as pushed, in event_id order, and the cursor. */
export const feedResponse = z.object({
  data: z.object({
    events: z.array(z.union([receiptCreatedEvent, receiptDeletedEvent, appUserErasedEvent])).check(
      z.meta({ description: "The events after `after`, in event_id order, exactly as pushed" }),
    ),
    next: z.nullable(z.string()).check(
      z.meta({ description: "The last event's event_id, to send as `after` next; null when no event followed `after`" }),
    ),
  }),
  status: z.literal("OK"),
  status_code: z.literal(200),
});
