/**
 * Operators read the audit trail (docs/api.md#audit, docs/operations.md "Who removed this
 * receipt?"): the records of one receipt, client or chain on every shard, newest first, with the
 * queries of src/storage/audit.ts run on the local state in-process, or through D1's query API on
 * the deployment (scripts/lib/d1.ts). The command is
 * scripts/lib/audit-command.ts.
 */
import { AUDIT_USAGE, auditCommand } from "./lib/audit-command.ts";
import { runCli } from "./lib/cli.ts";
import { execute } from "./lib/d1.ts";

await runCli(AUDIT_USAGE, auditCommand(execute));
