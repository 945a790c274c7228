/**
 * The map of personal data (docs/storage.md#personal-data): every place where the service can hold
 * an app user's ID or a receipt's content, in every store, and how an erasure of that app user
 * reaches it. The erasure (src/storage/erasure.ts, src/storage/archive/erasure.ts) builds its
 * statements by walking {@link D1_TABLES}, so a table that holds such data takes part in the
 * erasure by being on the map; test/storage/personal-data.node.test.ts fails when a migration adds
 * a table or column, or a wrangler config a binding, that the map does not classify.
 *
 * A new store enters here first: say what it holds, how the erasure reaches it (removed,
 * pseudonymised, never readable), and when. This file stays free of Workers types.
 */
import {
  auditErasedReceipts,
  earlierErasuresOf,
  pseudonymiseAudit,
  receiptsAuditedFor,
} from "./audit.ts";
import { archiveUserPrefix, legacyUserPrefix, type ArchivedReceipt } from "./archive/layout.ts";
import { forgetOwners } from "./archive/owners.ts";
import { eraseTombstonesUnder } from "./archive/tombstones.ts";
import { eraseEventsOfReceipts, eraseLeftoverEventsOfReceipts } from "./outbox/statements.ts";
import { LIMITED_ROUTES, RATE_TIERS, ratePolicy } from "../shared/rate-limits.ts";
import { eraseExportCopies, eraseExportHolds } from "./export.ts";
import { enclose, statement, type Statement } from "./statement.ts";

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

/** What an erasure page on one shard works with (src/storage/erasure.ts). */
export interface ErasedUser {
  id: string;
  pseudonym: string;
  /** The erasure's ID, which its audit records keep as request_id. */
  event_id: string;
  /** The erasure's instant. */
  occurred_at: string;
}

/** The receipts of the app user a receipt page erases: a query of one column, receipt_id. */
export interface ReceiptPage {
  user: ErasedUser;
  receipts: Statement;
}

/** A page of what the app user's deleted receipts and earlier erasures left, up to `limit` rows a statement. */
export interface LeftoverPage {
  user: ErasedUser;
  limit: number;
}

/** Archived receipts the erasure's archive pass read on one shard, erased at `at`. */
export interface ArchivedPage {
  receipts: readonly Pick<ArchivedReceipt, "receipt_id" | "client_id">[];
  at: string;
}

/** The statements by which one D1 table takes part in each of an erasure's passes over a shard. */
export interface TableErasure {
  /** With a page of the app user's live receipts, before they go. */
  receiptPage?: (page: ReceiptPage) => Statement[];
  /** With what the app user's deleted receipts and earlier erasures left. Each returns a row per change. */
  leftoverPage?: (page: LeftoverPage) => Statement[];
  /** With the app user's archived receipts that the archive pass read. */
  archivedPage?: (page: ArchivedPage) => Statement[];
}

/** A D1 table on the map: each column classified, and how the erasure reaches the table. */
export interface MappedTable {
  columns: Record<string, ColumnClass>;
  erasure?: TableErasure;
}

const PAGE_COMMITS = "in the erasure's page on each shard, in the page's transaction";

// The columns of the views that carry IDs, times and formats alone.
const VIEW_ONLY_IDS = new Set(["receipt_id", "chain_id", "client_id", "created_at", "event_id", "event_at", "format"]);

/**
 * Every D1 table and view of a shard (migrations/), in the order the erasure's statements run
 * within a page: a table whose statements select receipts comes before `receipts`, whose rows go
 * last.
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
    erasure: {
      receiptPage: ({ user, receipts }) => [auditErasedReceipts(receipts, user.occurred_at, user.pseudonym, user.event_id)],
      leftoverPage: ({ user, limit }) => [pseudonymiseAudit(user.id, user.pseudonym, limit)],
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
    erasure: {
      receiptPage: ({ user, receipts }) => [
        enclose(
          receipts,
          (ids, at) => `UPDATE idempotency_keys SET ${erasedKeyRecord(at!)}
          WHERE ${keyRecordsOf(ids, `SELECT client_id FROM receipts WHERE receipt_id IN (${ids})`)}`,
          user.occurred_at,
        ),
      ],
      leftoverPage: ({ user, limit }) => [
        enclose(
          receiptsAuditedFor(user.id, user.pseudonym, user.occurred_at),
          // A deleted receipt's audit record names the client that added it: only its owner may delete it.
          (audited, rows, at) => `UPDATE idempotency_keys SET ${erasedKeyRecord(at!)}
          WHERE (client_id, idempotency_key) IN (SELECT client_id, idempotency_key FROM idempotency_keys
            WHERE ${keyRecordsOf(`SELECT receipt_id FROM (${audited})`, `SELECT client_id FROM (${audited})`)} AND erased_at IS NULL
            LIMIT ${rows}) RETURNING 1`,
          limit,
          user.occurred_at,
        ),
      ],
      // An archived receipt's line names its client; its audit record, once erased, names the operator.
      archivedPage: ({ receipts, at }) => [
        enclose(
          statement("SELECT value ->> 'receipt_id' AS receipt_id, value ->> 'client_id' AS client_id FROM json_each(?1)", JSON.stringify(receipts)),
          (lines, erasedAt) => `UPDATE idempotency_keys SET ${erasedKeyRecord(erasedAt!)}
          WHERE ${keyRecordsOf(`SELECT receipt_id FROM (${lines})`, `SELECT client_id FROM (${lines})`)} AND erased_at IS NULL`,
          at,
        ),
      ],
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
          when: `${PAGE_COMMITS} (every event of the user's receipts, live, deleted or archived, and of their earlier erasures once delivered); an erasure's own app_user.erased event stays until it is delivered and then until the purge of delivered events after EVENT_FEED_DAYS, or until a later erasure of the user after its delivery`,
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
      archived_body: {
        holds: ["receipt"],
        reach: {
          how: "removed",
          when: "with its row (the archived receipt's created event) in the archive pass's batch; a trigger (migration 0019) also clears it when the archived receipt's owner row goes. For a receipt added in DR Retail it is the model and the original together, with the original's fields that identify a person (docs/api.md \"DR Retail receipts\")",
        },
      },
    },
    erasure: eventsErasure(0),
  },
  failed_notices: {
    columns: {
      event_id: NOT_PERSONAL,
      receipt_id: NOT_PERSONAL,
      payload: { holds: ["app_user_id"], reach: { how: "removed", when: `${PAGE_COMMITS}, as the outbox's` } },
      created_at: NOT_PERSONAL,
      failed_at: NOT_PERSONAL,
      attempts: NOT_PERSONAL,
      last_error: NOT_PERSONAL,
    },
    erasure: eventsErasure(1),
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
    erasure: {
      leftoverPage: ({ user, limit }) =>
        [archiveUserPrefix(user.pseudonym), legacyUserPrefix(user.id)].map((prefix) => eraseTombstonesUnder(prefix, limit, { purgedOnly: true })),
    },
  },
  archived_owners: {
    columns: {
      receipt_id: NOT_PERSONAL,
      client_id: NOT_PERSONAL,
      chain_id: NOT_PERSONAL,
      app_user_id: { holds: ["app_user_id"], reach: { how: "removed", when: "in the archive pass's batch on the receipt's shard, with the audit records of the lines it read" } },
    },
    erasure: {
      archivedPage: ({ receipts }) => [forgetOwners(receipts.map(({ receipt_id }) => receipt_id))],
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
      app_user_id: { holds: ["app_user_id"], reach: { how: "removed", when: "in the erasure's last step, in the transaction that records its event, with every earlier request of the app user (an instance that failed)" } },
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
    erasure: {
      leftoverPage: ({ user }) => [statement("DELETE FROM export_requests WHERE app_user_id = ?1 RETURNING 1", user.id)],
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
    erasure: {
      // Before export_holds' rows go: the copies are found through them.
      leftoverPage: ({ user }) => [eraseExportCopies(user.pseudonym)],
    },
  },
  export_holds: {
    columns: {
      job_id: NOT_PERSONAL,
      user_key: { holds: ["app_user_id"], reach: { how: "removed", when: "by the export's release steps; by the erasure's leftover page on each shard" } },
    },
    erasure: {
      leftoverPage: ({ user }) => [eraseExportHolds(user.pseudonym)],
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
  // Views: an insert into one writes `receipts` and `notice_outbox` (migrations 0014, 0015, 0018, 0022), and none holds a row.
  receipt_adds: { columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "body", "created_at", "event_id", "event_payload", "event_at"]) },
  receipt_format_adds: {
    columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "body", "format", "mapped", "created_at", "event_id", "event_payload", "event_at"]),
  },
  receipt_deflated_adds: {
    columns: viewColumns(["receipt_id", "chain_id", "client_id", "app_user_id", "format", "deflated", "created_at", "event_id", "event_payload", "event_at"]),
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
    erasure: {
      receiptPage: ({ receipts }) => [enclose(receipts, (ids) => `DELETE FROM receipts WHERE receipt_id IN (${ids}) RETURNING receipt_id`)],
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


/** The statements of one pass of the erasure over a shard, table by table in the map's order. */
export function erasureStatements<P extends keyof TableErasure>(pass: P, page: Parameters<NonNullable<TableErasure[P]>>[0]): Statement[] {
  return Object.values(D1_TABLES as Record<string, MappedTable>).flatMap((table) => {
    const build = table.erasure?.[pass] as ((page: Parameters<NonNullable<TableErasure[P]>>[0]) => Statement[]) | undefined;
    return build ? build(page) : [];
  });
}

/**
 * The archive pass's statements for the archived receipts it read on one shard: the copies D1 still
 * holds of them (their Idempotency-Key answers, their events, their owner rows).
 */
export function eraseCopiesOfArchived(receipts: ArchivedPage["receipts"], at: string): Statement[] {
  return erasureStatements("archivedPage", { receipts: receipts.map(({ receipt_id, client_id }) => ({ receipt_id, client_id })), at });
}

// The erasure of the events of the app user's receipts, in the outbox (0) or the failed events (1):
// the outbox's statements come in pairs, one a table. Leftovers are the events of the receipts
// the user's audit records name (their deleted ones) and of their earlier erasures, delivered or
// dead-lettered: one still to deliver goes out, so that the app is told of every erasure.
function eventsErasure(table: 0 | 1): TableErasure {
  return {
    receiptPage: ({ receipts }) => [eraseEventsOfReceipts(receipts)[table]],
    leftoverPage: ({ user, limit }) => [
      eraseLeftoverEventsOfReceipts(receiptsAuditedFor(user.id, user.pseudonym, user.occurred_at), limit)[table],
      eraseLeftoverEventsOfReceipts(earlierErasuresOf(user.pseudonym, user.occurred_at, user.event_id), limit, true)[table],
    ],
    archivedPage: ({ receipts }) => [eraseEventsOfReceipts(archivedIds(receipts))[table]],
  };
}

function archivedIds(receipts: ArchivedPage["receipts"]): Statement {
  return statement("SELECT value ->> 'receipt_id' FROM json_each(?1)", JSON.stringify(receipts));
}

// The Idempotency-Key records of the receipts `ids` selects, whose clients `clients` selects:
// the table has no index by receipt (migration 0012), so they are found under their client,
// the first column of its primary key, among that client's last day of keys.
function keyRecordsOf(ids: string, clients: string): string {
  return `client_id IN (${clients}) AND receipt_id IN (${ids})`;
}

// An Idempotency-Key record in erased form (migration 0006): no app_user_id in its answer;
// `at` is the placeholder of the erasure's instant.
function erasedKeyRecord(at: string): string {
  return `response = json_remove(response, '$.data.app_user_id'), erased_at = ${at}`;
}
