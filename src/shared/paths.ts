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
} as const;
