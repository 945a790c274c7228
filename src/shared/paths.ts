/**
 * The paths receipts.v2 answers, relative to the base URL (docs/api.md#operations, #versioning). The Worker routes them,
 * the OpenAPI document describes them and the POS client calls them: one spelling for all three.
 */
export const PATHS = {
  login: "/receipts/v2/login",
  add: "/receipts/v2/add",
  delete: "/receipts/v2/delete",
  openapi: "/receipts/v2/openapi.json",
  docs: "/receipts/v2/docs",
  events: "/receipts/v2/events",
  status: "/receipts/v2/status",
  exportAppUser: "/receipts/v2/app-users/export",
  eraseAppUser: "/receipts/v2/app-users/erase",
  job: "/receipts/v2/jobs/:job_id",
  jobExport: "/receipts/v2/jobs/:job_id/export",
} as const;

/** A job's path, with its ID in place of the parameter. */
export function jobPath(jobId: string, file: "state" | "export" = "state"): string {
  return (file === "state" ? PATHS.job : PATHS.jobExport).replace(":job_id", encodeURIComponent(jobId));
}
