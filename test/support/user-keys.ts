/**
 * The pseudonym of an app user under the test Workers' AUDIT_HASH_KEY: what names them in erasure
 * fences, the audit trail once erased, and the archive's object keys.
 */
import { importAuditHashKey, parseAuditHashKey, pseudonymWith } from "../../src/shared/audit-hash-key.ts";
import { TEST_AUDIT_HASH_KEY } from "./keys.ts";

const key = importAuditHashKey(parseAuditHashKey(TEST_AUDIT_HASH_KEY));

/** The test key's pseudonym of `appUserId`. */
export async function testUserKey(appUserId: string): Promise<string> {
  return pseudonymWith(await key, appUserId);
}
