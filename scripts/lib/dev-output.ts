/**
 * What `npm start` shows of wrangler's output: what serves where, each request, each delivered
 * event and every warning, without the lines that repeat every minute and bury them (the cron
 * trigger's own request and the jobs that found nothing to do) or the migration tables.
 */

/**
 * A filter for one of wrangler dev's output streams: true for a line to show. Beyond the routine
 * lines it drops a Worker's bindings table that wrangler prints again once the server is up, and
 * the types warning wrangler prints after any Worker's table but `typedWorker`'s: wrangler dev
 * checks every config against the one ./worker-configuration.d.ts, which holds the first
 * config's types (the API Worker's; the notifier's are in notifier-configuration.d.ts), so for
 * the others it warns whatever their types are. `npm run typecheck` checks both files.
 */
export function devOutputFilter(typedWorker?: string): (line: string) => boolean {
  const tablesShown = new Set<string>();
  let inRepeatedTable = false;
  let tableOf: string | undefined;
  return (line) => {
    const table = /^(\S+) has access to the following bindings:$/.exec(line);
    if (table) {
      tableOf = table[1];
      inRepeatedTable = tablesShown.has(line);
      tablesShown.add(line);
      return !inRepeatedTable;
    }
    if (TYPES_WARNING.test(line) && typedWorker !== undefined && tableOf !== typedWorker) return false;
    if (inRepeatedTable && /^(?:Binding\s|env\.)/.test(line)) return false;
    inRepeatedTable = false;
    return !isRoutineLine(line);
  };
}

const TYPES_WARNING = /Your types might be out of date/;

/** Wrangler's advice for stale types, as this project follows it: `npm run types`, which writes both files with the flags `npm run typecheck` checks. */
export function withTypesAdvice(line: string): string {
  return TYPES_WARNING.test(line) ? line.replace(/Re-run `wrangler types`/, "Run `npm run types`") : line;
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

/**
 * The line with the API Worker's name where wrangler dev printed `[undefined]`: with several
 * configs it prefixes each Worker's console lines with its name, but takes it from the bundle's
 * entry, which wrangler 4.155 leaves unnamed for a Worker with a custom build command (the API
 * Worker's `build.command`, which copies the API reference's files). The prefix may be coloured.
 */
export function withWorkerName(line: string, name: string): string {
  return line.replace(/^((?:\x1b\[[0-9;]*m)?)\[undefined\]/, `$1[${name}]`);
}

/**
 * Resolves once `url` answers a GET with a success, asking every `pauseMs` meanwhile (nothing
 * listens yet, or wrangler's proxy waits for its Workers): what `npm start` waits for before it
 * tells a newcomer to log in, so that the command it prints finds the service up.
 */
export async function untilServing(url: string, options: { fetcher?: typeof fetch; pauseMs?: number; signal?: AbortSignal } = {}): Promise<void> {
  const { fetcher = fetch, pauseMs = 500, signal } = options;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const response = await fetcher(url, { signal });
      await response.body?.cancel();
      if (response.ok) return;
    } catch {
      // Nothing listens yet; stopped, it ends here.
      signal?.throwIfAborted();
    }
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}
