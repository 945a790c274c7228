/**
 * The name an erasure fence gives an app user (src/storage/fences.ts): the keyed hash of the
 * app_user_id under AUDIT_HASH_KEY. Add computes it for every receipt, so the key is imported
 * once per isolate: hashing is then CPU only, no call leaves the isolate.
 */
import { importAuditHashKey, pseudonymWith } from "../shared/audit-hash-key.ts";
import type { ApiConfig } from "../shared/config.ts";
import type { IsolateState } from "./context.ts";

/** The keyed hash of `appUserId`, with the isolate's imported AUDIT_HASH_KEY. */
export async function userKeyOf(isolate: IsolateState, config: Pick<ApiConfig, "auditHashKey">, appUserId: string): Promise<string> {
  if (isolate.auditHashKey?.bytes !== config.auditHashKey) {
    isolate.auditHashKey = { bytes: config.auditHashKey, key: importAuditHashKey(config.auditHashKey) };
  }
  return pseudonymWith(await isolate.auditHashKey.key, appUserId);
}
