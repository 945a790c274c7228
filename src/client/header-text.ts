/** The client's own check of a header value, since it carries no schema library at run time. */

/** The most characters a header value may hold (docs/api.md#common-rules). */
export const MAX_HEADER_TEXT = 256;

// Printable ASCII with no space at either end: HTTP strips such spaces, so the value would
// arrive changed. The Worker's `headerText` schema allows them; test/client proves this rule
// accepts nothing that schema refuses.
const HEADER_TEXT = /^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$/;

/** Whether `value` reaches the service unchanged as a header and is a usable string there. */
export function isHeaderText(value: unknown): value is string {
  return typeof value === "string" && value.length <= MAX_HEADER_TEXT && HEADER_TEXT.test(value);
}
