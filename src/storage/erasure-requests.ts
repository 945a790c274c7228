/**
 * Every statement on `erasure_requests` (migration 0020): the app_user_id an erasure works on,
 * named in its Workflow's params by a request ID alone (docs/storage.md#personal-data). Written on
 * the first shard by whatever starts the erasure, read by its steps, deleted in the batch that
 * records its event. This file stays free of Workers types: the operator script writes it from
 * Node (scripts/lib/d1.ts).
 */
import { statement, type Statement } from "./statement.ts";

/** The request `requestId` to erase `appUserId`, made at `at`; written again, it changes nothing. */
export function recordErasureRequest(requestId: string, appUserId: string, at: Date): Statement {
  return statement(
    "INSERT INTO erasure_requests (request_id, app_user_id, requested_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    requestId,
    appUserId,
    at.toISOString(),
  );
}

/** The app_user_id of a request. Row: `app_user_id`; none once its erasure recorded its event. */
export function readErasureRequest(requestId: string): Statement {
  return statement("SELECT app_user_id FROM erasure_requests WHERE request_id = ?1", requestId);
}

/**
 * The earlier requests of `requestId`'s app user (by rowid: a row inserted gets one above every
 * row present), oldest first, at most `limit`. Rows: `request_id`. Each is an instance that failed
 * and was started again, or one still running beside this one.
 */
export function earlierErasureRequests(requestId: string, limit = EARLIER_REQUESTS): Statement {
  return statement(
    `SELECT earlier.request_id FROM erasure_requests AS done
       JOIN erasure_requests AS earlier ON earlier.app_user_id = done.app_user_id AND earlier.rowid < done.rowid
       WHERE done.request_id = ?1 ORDER BY earlier.rowid LIMIT ?2`,
    requestId,
    limit,
  );
}

/**
 * The request is done with, in the batch that records the erasure's event, and so are `ended`:
 * earlier requests of its app user whose instances ended (an instance that failed leaves its
 * request, and the operator starts the erasure again: docs/operations.md). An earlier request
 * whose instance still runs stays: that instance reads it in each step until it records its own
 * event, and removes it then.
 */
export function forgetErasureRequests(requestId: string, ended: readonly string[]): Statement {
  return statement(
    "DELETE FROM erasure_requests WHERE request_id = ?1 OR request_id IN (SELECT value FROM json_each(?2))",
    requestId,
    JSON.stringify(ended),
  );
}

// A hundred failed runs of one app user's erasure is an operator's loop; the next erasure takes more.
const EARLIER_REQUESTS = 100;
