/**
 * What `npm start` shows of wrangler's output: what serves where, each request, each delivered
 * event and every warning, without the lines that repeat every minute and bury them (the cron
 * trigger's own request and the jobs that found nothing to do) or the migration tables.
 */

/**
 * A filter for one of wrangler dev's output streams: true for a line to show. Beyond the routine
 * lines it drops a Worker's bindings table that wrangler prints again once the server is up.
 */
export function devOutputFilter(): (line: string) => boolean {
  const tablesShown = new Set<string>();
  let inRepeatedTable = false;
  return (line) => {
    if (/has access to the following bindings:$/.test(line)) {
      inRepeatedTable = tablesShown.has(line);
      tablesShown.add(line);
      return !inRepeatedTable;
    }
    if (inRepeatedTable && /^(?:Binding\s|env\.)/.test(line)) return false;
    inRepeatedTable = false;
    return !isRoutineLine(line);
  };
}

/** Whether wrangler dev's output line is routine noise a person at the terminal does not need. */
export function isRoutineLine(line: string): boolean {
  // The request npm start sends every minute to fire the cron trigger.
  if (line.includes("/cdn-cgi/handler/scheduled")) return true;
  // The cron's sweeps, consumed a group of shards per message: their job lines say what they did.
  if (line.includes("QUEUE receipts-v2-sweeps ")) return true;
  const json = line.slice(line.indexOf("{"));
  if (!json.startsWith("{")) return false;
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return false;
  }
  // A job's line that counts nothing done; one that did something, or failed, stays.
  return (
    entry.event === "scheduled" &&
    entry.level === "info" &&
    Object.values(entry).every((value) => typeof value !== "number" || value === 0)
  );
}

/**
 * One line for `wrangler d1 migrations apply`'s output on a shard: the migrations it applied, or
 * that there were none, instead of its tables.
 */
export function migrationSummary(shard: string, output: string): string {
  const applied = [...new Set([...output.matchAll(/\b(\d{4}_[\w.-]+\.sql)\b/g)].map((match) => match[1]!))];
  return applied.length === 0
    ? `Shard ${shard}: migrations up to date.`
    : `Shard ${shard}: applied ${applied.length} migration${applied.length === 1 ? "" : "s"} (${applied.join(", ")}).`;
}
