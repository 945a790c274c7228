/**
 * Structured logs: one JSON object per line, so Workers Logs can filter on any field. Callers
 * pass only identifiers and outcomes, never a secret, a token or a receipt body.
 */
export type LogFields = Record<string, string | number | boolean | null | undefined>;

/** Writes one structured line; errors go to the error stream so they stand out. */
export function logLine(level: "info" | "warn" | "error", event: string, fields: LogFields): void {
  const line = JSON.stringify({ time: new Date().toISOString(), level, event, ...fields });
  if (level === "error") console.error(line);
  else console.log(line);
}

/**
 * A thrown value as a log cause: its name and message. A stack would only repeat what the
 * request reference or event_id of the line already locates.
 */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
