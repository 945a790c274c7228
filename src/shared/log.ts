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
