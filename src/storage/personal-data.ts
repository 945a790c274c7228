/**
 * The map of personal data (docs/storage.md#personal-data): every place where the service can hold
 * an app user's ID or a receipt's content, in every store, and how an erasure of that app user
 * reaches it, in words. test/storage/personal-data.node.test.ts fails when a migration adds a table
 * or column, or a wrangler config a binding, that the map does not classify, and when a table the
 * map says the erasure changes has no statements in the erasure's list
 * (src/storage/erasure-statements.ts, which the erasure runs).
 *
 * A new store enters here first: say what it holds, how the erasure reaches it (removed,
 * pseudonymised, never readable), and when. Tests, docs and scripts read this file; the Workers
 * never import it, so its words stay out of their bundles. This file stays free of Workers types.
 */
import { LIMITED_ROUTES, RATE_TIERS, ratePolicy } from "../shared/rate-limits.ts";

/** What a place can hold of an app user. */
export type PersonalField = "app_user_id" | "receipt";

/** How an erasure of the app user reaches a place. */
export type Reach =
  /** The erasure deletes the copy, or the part of it that names the app user. */
  | { how: "removed"; when: string }
  /** The erasure replaces the app_user_id with its keyed hash, which no one without AUDIT_HASH_KEY can test a guess against. */
  | { how: "pseudonymised"; when: string }
  /** The place is written, but only with the keyed hash, or never with the data at all. */
  | { how: "never readable"; why: string };

/** A column, object, message, parameter or attribute that can hold personal data. */
export interface PersonalPlace {
  holds: readonly PersonalField[];
  reach: Reach;
}

/** A column that holds nothing of an app user: IDs of receipts, clients, chains and events, times, counts. */
export const NOT_PERSONAL = "not personal";

/** How a D1 column is classified: personal, with its reach, or not. */
export type ColumnClass = PersonalPlace | typeof NOT_PERSONAL;

/** A D1 table on the map: each column classified. */
export interface MappedTable {
  columns: Record<string, ColumnClass>;
}

const PAGE_COMMITS = "in the erasure's page on each shard, in the page's transaction";

// The columns of the views that carry IDs, times, formats and a fence's verdict alone.
const VIEW_ONLY_IDS = new Set(["receipt_id", "chain_id", "client_id", "created_at", "event_id", "event_at", "format", "fenced"]);

/**
 * Every D1 table and view of a shard (migrations/). A column whose reach is "removed" or
 * "pseudonymised" is reached by its table's statements in src/storage/erasure-statements.ts.
 */
export const D1_TABLES = {
  audit_log: {
    columns: {
      audit_id: NOT_PERSONAL,
      at: NOT_PERSONAL,
      action: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      chain_id: NOT_PERSONAL,
      client_id: NOT_PERSONAL,
      app_user: { holds: ["app_user_id"], reach: { how: "pseudonymised", when: PAGE_COMMITS } },
      request_id: NOT_PERSONAL,
    },
  },
  idempotency_keys: {
    columns: {
      client_id: NOT_PERSONAL,
      idempotency_key: NOT_PERSONAL,
      fingerprint: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      response: {
        holds: ["app_user_id"],
        reach: { how: "removed", when: `${PAGE_COMMITS}, or the archive pass's for an archived receipt: the answer loses its app_user_id, and the record stays so that a till's retry replays` },
      },
      created_at: NOT_PERSONAL,
      erased_at: NOT_PERSONAL,
    },
  },
  notice_outbox: {
    columns: {
      event_id: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      payload: {
        holds: ["app_user_id"],
        reach: {
          how: "removed",
          when: `${PAGE_COMMITS} (every event of the user's receipts, live, deleted or archived, and of their earlier erasures once delivered; one still to deliver then goes in the batch that records its delivery, or its dead letter, once the erasure's last step has committed); an erasure's own app_user.erased event stays until it is delivered and then until the purge of delivered events after EVENT_FEED_DAYS, or until a later erasure of the user (at its delivery, if it was still to deliver then)`,
        },
      },
      created_at: NOT_PERSONAL,
      enqueued_at: NOT_PERSONAL,
      delivered_at: NOT_PERSONAL,
      claimed_until: NOT_PERSONAL,
      attempts: NOT_PERSONAL,
      last_error: NOT_PERSONAL,
      next_attempt_at: NOT_PERSONAL,
      retry_until: NOT_PERSONAL,
      window_down_ms: NOT_PERSONAL,
      attempt_due_at: NOT_PERSONAL,
      attempt_down_ms: NOT_PERSONAL,
      late_ms: NOT_PERSONAL,
      archived_body: {
        holds: ["receipt"],
        reach: {
          how: "removed",
          when: "with its row (the archived receipt's created event) in the archive pass's batch; a trigger (migration 0019) also clears it when the archived receipt's owner row goes. For a receipt added in DR Retail it is the model and the original together, with the original's fields that identify a person (docs/api.md \"DR Retail receipts\")",
        },
      },
    },
  },
  failed_notices: {
    columns: {
      event_id: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      payload: {
        holds: ["app_user_id"],
        reach: {
          how: "removed",
          when: `${PAGE_COMMITS}, as the outbox's; an earlier erasure's event dead-lettered after the pages, in the erasure's last step, and none is stored after that step`,
        },
      },
      created_at: NOT_PERSONAL,
      failed_at: NOT_PERSONAL,
      attempts: NOT_PERSONAL,
      last_error: NOT_PERSONAL,
    },
  },
  archive_tombstones: {
    columns: {
      receipt_id: NOT_PERSONAL,
      object_key: {
        holds: ["app_user_id"],
        reach: {
          how: "removed",
          when: "the key names the app user by their keyed hash (the first layout's by the ID itself): the erasure's pages drop purged ones, its archive pass the rest",
        },
      },
      deleted_at: NOT_PERSONAL,
      purged_at: NOT_PERSONAL,
    },
  },
  archived_owners: {
    columns: {
      receipt_id: NOT_PERSONAL,
      client_id: NOT_PERSONAL,
      chain_id: NOT_PERSONAL,
      app_user_id: { holds: ["app_user_id"], reach: { how: "removed", when: "in the archive pass's batch on the receipt's shard, with the audit records of the lines it read" } },
    },
  },
  archive_pages: {
    columns: {
      page: NOT_PERSONAL,
      run_id: NOT_PERSONAL,
      lines: { holds: ["app_user_id"], reach: { how: "never readable", why: "each line's user_key and object key name the app user by the keyed hash" } },
      new_objects: { holds: ["app_user_id"], reach: { how: "never readable", why: "object keys, which name the app user by the keyed hash" } },
    },
  },
  erasure_fences: {
    columns: {
      user_key: { holds: ["app_user_id"], reach: { how: "never readable", why: "the keyed hash of the app_user_id" } },
      instant: NOT_PERSONAL,
    },
  },
  erasure_requests: {
    columns: {
      request_id: NOT_PERSONAL,
      app_user_id: { holds: ["app_user_id"], reach: { how: "removed", when: "in the erasure's last step, in the transaction that records its event, with every earlier request of the app user whose instance has ended (one that failed); one still running keeps its own until its own last step" } },
      requested_at: NOT_PERSONAL,
    },
  },
  app_user_jobs: {
    columns: {
      job_id: NOT_PERSONAL,
      kind: NOT_PERSONAL,
      client_id: NOT_PERSONAL,
      idempotency_key: NOT_PERSONAL,
      user_key: { holds: ["app_user_id"], reach: { how: "never readable", why: "the keyed hash of src/shared/audit-hash-key.ts; the erasure finds the user's exports by it and deletes their files" } },
      created_at: NOT_PERSONAL,
    },
  },
  export_requests: {
    columns: {
      request_id: NOT_PERSONAL,
      app_user_id: {
        holds: ["app_user_id"],
        reach: { how: "removed", when: "by the export's last step; by the erasure's leftover page, every request of the app user, so that no export of theirs starts after it" },
      },
      requested_at: NOT_PERSONAL,
    },
  },
  export_copies: {
    columns: {
      job_id: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      deleted_at: NOT_PERSONAL,
      line: {
        holds: ["app_user_id", "receipt"],
        reach: { how: "removed", when: "by the export's release steps, once its file is written; by the erasure's leftover page on each shard, with the holds of the app user" },
      },
      deflated: {
        holds: ["receipt"],
        reach: { how: "removed", when: "with its row, as `line` (the receipt's texts deflated, as the receipt's row kept them: migration 0022)" },
      },
    },
  },
  export_holds: {
    columns: {
      job_id: NOT_PERSONAL,
      user_key: { holds: ["app_user_id"], reach: { how: "removed", when: "by the export's release steps; by the erasure's leftover page on each shard" } },
    },
  },
  export_seen: { columns: { job_id: NOT_PERSONAL, receipt_id: NOT_PERSONAL } },
  archive_runs: {
    columns: {
      run_id: NOT_PERSONAL,
      cutoff: NOT_PERSONAL,
      started_at: NOT_PERSONAL,
      finished_at: NOT_PERSONAL,
      receipts: NOT_PERSONAL,
      objects: NOT_PERSONAL,
      bytes: NOT_PERSONAL,
    },
  },
  push_endpoint: {
    columns: { id: NOT_PERSONAL, down_since: NOT_PERSONAL, probe_at: NOT_PERSONAL, up_since: NOT_PERSONAL, down_ms: NOT_PERSONAL },
  },
  // Views: an insert into one writes `receipts` and `notice_outbox` (migrations 0014, 0015, 0018, 0022, 0025), and none holds a row.
  receipt_adds: { columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "body", "created_at", "event_id", "event_payload", "event_at"]) },
  receipt_format_adds: {
    columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "body", "format", "mapped", "created_at", "event_id", "event_payload", "event_at"]),
  },
  receipt_deflated_adds: {
    columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "format", "deflated", "created_at", "event_id", "event_payload", "event_at"]),
  },
  receipt_timely_adds: {
    columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "format", "deflated", "created_at", "event_id", "event_payload", "event_at", "fenced"]),
  },
  event_records: { columns: viewColumns(["event_id", "receipt_id", "payload", "created_at"]) },
  receipts: {
    columns: {
      receipt_id: NOT_PERSONAL,
      chain_id: NOT_PERSONAL,
      client_id: NOT_PERSONAL,
      app_user_id: { holds: ["app_user_id"], reach: { how: "removed", when: `${PAGE_COMMITS}: the row goes` } },
      body: {
        holds: ["receipt"],
        reach: {
          how: "removed",
          when: `${PAGE_COMMITS}: the row goes. A DR Retail body keeps, in the original, the fields that identify a person (masked card numbers, card tokens, civic IDs, e-mail, phone: docs/api.md "DR Retail"); they go with it`,
        },
      },
      format: NOT_PERSONAL,
      mapped: { holds: ["receipt"], reach: { how: "removed", when: `${PAGE_COMMITS}: the row goes` } },
      created_at: NOT_PERSONAL,
      deflated: {
        holds: ["receipt"],
        reach: {
          how: "removed",
          when: `${PAGE_COMMITS}: the row goes. The body and model of a receipt added since migration 0022, deflated (src/storage/stored-body.ts): a byte search finds nothing in it, so the scans inflate it (harness/state-scan.ts)`,
        },
      },
    },
  },
} satisfies Record<string, MappedTable>;

/** A table of {@link D1_TABLES}. */
export type MappedTableName = keyof typeof D1_TABLES;

/**
 * Every binding of the two Workers (wrangler.jsonc, src/notifier/wrangler.jsonc) whose store is not a
 * shard's D1 (those are {@link D1_TABLES}): what it can hold of an app user, and how the erasure
 * reaches it, or NOT_PERSONAL.
 */
export const BINDINGS: Record<string, Record<string, PersonalPlace> | typeof NOT_PERSONAL> = {
  ARCHIVE: {
    "object keys": {
      holds: ["app_user_id"],
      reach: { how: "never readable", why: "users/<keyed hash>/…: the app user is named by the hash of src/shared/audit-hash-key.ts; the first layout's keys, named by the ID, are renamed by the move, and an erasure refuses to start while one is left (docs/storage.md#first-layout)" },
    },
    objects: {
      holds: ["app_user_id", "receipt"],
      reach: { how: "removed", when: "in the erasure's archive pass, after every shard's pages: each object under the user's prefix is read, its lines audited, then deleted" },
    },
    "export files": {
      holds: ["receipt"],
      reach: {
        how: "removed",
        when: "exports/<job_id>/…, named by the job alone: the erasure's `erase exports` step deletes every export of the user (app_user_jobs by keyed hash); an export that finds the user erased since its instant deletes its own; the cron deletes each EXPORT_KEPT_DAYS after it was made",
      },
    },
  },
  // The API reference's files and the OpenAPI document, the same for every deployment.
  ASSETS: NOT_PERSONAL,
  CLIENTS: NOT_PERSONAL,
  SHARD_STATES: NOT_PERSONAL,
  NOTICES: {
    messages: {
      holds: ["app_user_id"],
      reach: {
        how: "removed",
        when: "a message lives until the notifier acks it (the queue keeps no acked message); a message whose event the erasure removed from the outbox finds no event to claim and is acked unpushed",
      },
    },
  },
  FAILED_NOTICES: {
    messages: { holds: ["app_user_id"], reach: { how: "removed", when: "the notifier moves each dead letter into failed_notices and acks it; the erasure removes it there" } },
  },
  SWEEPS: NOT_PERSONAL,
  EXPORT: {
    params: { holds: ["app_user_id"], reach: { how: "never readable", why: "an instance starts with the ID of its request (export_requests), never the app_user_id" } },
    "step results and output": { holds: ["app_user_id"], reach: { how: "never readable", why: "counts, cursors of receipt and audit IDs, the instant and R2 list cursors of the hashed prefix" } },
  },
  ERASURE: {
    params: { holds: ["app_user_id"], reach: { how: "never readable", why: "an instance starts with the ID of its request (erasure_requests), never the app_user_id" } },
    "step results and output": { holds: ["app_user_id"], reach: { how: "never readable", why: "counts, instants, event IDs and hashed object keys only" } },
  },
  ARCHIVING: {
    params: { holds: [], reach: { how: "never readable", why: "a shard's name" } },
    "step results and output": { holds: ["app_user_id"], reach: { how: "never readable", why: "counts and cutoffs; a rename's step returns a count, never a key" } },
  },
  LOGIN_LIMITER: NOT_PERSONAL,
  // Keyed by client_id, per route and tier (src/shared/rate-limits.ts).
  ...Object.fromEntries(
    LIMITED_ROUTES.flatMap((route) => RATE_TIERS.map((tier) => [ratePolicy(route, tier).binding, NOT_PERSONAL])),
  ),
  METRICS: {
    "data points": {
      holds: ["app_user_id", "receipt"],
      reach: {
        how: "never readable",
        why: "Analytics Engine keeps points for months where no erasure reaches: each carries the route or event type, outcome, client_id, chain_id, shard, duration and bytes, never an app_user_id or a body (test/api/metrics.test.ts, test/notifier/metrics.test.ts)",
      },
    },
  },
};

/**
 * What no store keeps but the service emits: log lines and trace attributes. Neither can be erased
 * once written, so neither is ever written with personal data.
 */
export const EMITTED: Record<string, PersonalPlace> = {
  "log lines": {
    holds: ["app_user_id", "receipt"],
    reach: {
      how: "never readable",
      why: "src/shared/log.ts: callers pass IDs of requests, receipts, clients, events and jobs, never an app_user_id or a body (test/api/logs.test.ts); the one exception is the notifier with no push URL, which logs each event whole, in local development only",
    },
  },
  "trace attributes": {
    holds: ["app_user_id"],
    reach: {
      how: "never readable",
      why: "D1 spans carry the SQL text, whose values are bound, never inlined; KV spans carry client IDs and shard names; R2 spans carry object keys and list prefixes, which name the app user by the keyed hash, but for the first layout's rename, which runs before any erasure may start (docs/storage.md#first-layout); the erasure scans read the trace store",
    },
  },
};

// The columns of a view that holds no row: whatever goes in lands in the tables the map lists.
function viewColumns(names: readonly string[]): Record<string, ColumnClass> {
  const landsElsewhere: PersonalPlace = { holds: ["app_user_id", "receipt"], reach: { how: "never readable", why: "a view of no rows: what goes in lands in receipts and notice_outbox" } };
  return Object.fromEntries(names.map((name) => [name, VIEW_ONLY_IDS.has(name) ? NOT_PERSONAL : landsElsewhere]));
}
