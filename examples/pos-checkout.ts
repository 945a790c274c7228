/**
 * A till's checkout with the POS client, against a running receipts.v2: log in, add a receipt,
 * make the return code the app shows as a QR code, read it back as the till's scanner would,
 * and delete the receipt, as a return at the till does.
 *
 *     npm start                                   # in one terminal
 *     npm run example                             # in another
 *     npm run example -- --base-url https://receipts.example.com   # a deployment
 *
 * Settings, all optional:
 * - --base-url, else RECEIPTS_BASE_URL: where the service answers; by default the local
 *   `npm start`, on the port it recorded in its state (or --persist-to's), else 8787.
 * - RECEIPTS_CLIENT_ID, RECEIPTS_CLIENT_SECRET and RECEIPTS_CHAIN_ID: the client to act as.
 *   Without them, once the service has answered, the example issues a client for chain c1 into
 *   the local state of `npm start`, as an operator would (`npm run clients -- issue --chain c1
 *   --json`), and keeps it in .wrangler/example-client.json for the next runs.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { ReceiptsClient, ReceiptsError, makeReturnCode, parseReturnCode, type Receipt } from "../src/client/index.ts";
import { asksForHelp } from "../scripts/lib/cli.ts";
import { localServiceUrl, stateDirectory } from "../scripts/lib/start-record.ts";
import { PATHS } from "../src/shared/paths.ts";

const USAGE =
  "Usage: npm run example [-- --base-url <http(s) URL of receipts.v2> | --persist-to <dir>]\n\n" +
  "  A till's checkout: log in, add a receipt, read its return code back, delete it. Against the\n" +
  "  npm start serving .wrangler/state (or --persist-to's state), on the port it recorded, unless\n" +
  "  --base-url (or RECEIPTS_BASE_URL) names another service.";
const { baseUrl, persistTo } = settings();
// Beside the local state the saved client belongs to (npm start's own, in git-ignored .wrangler/).
const SAVED_CLIENT = persistTo
  ? path.join(stateDirectory(persistTo), "example-client.json")
  : path.join(import.meta.dirname, "..", ".wrangler", "example-client.json");

try {
  await checkout();
} catch (error) {
  if (error instanceof ReceiptsError) {
    console.error(`receipts.v2 answered ${error.status} ${error.statusWord}: ${error.message}`);
  } else {
    console.error(`${(error as Error).message}\nIs receipts.v2 running at ${baseUrl}? Start it with: npm start`);
  }
  process.exitCode = 1;
}

async function checkout(): Promise<void> {
  console.log(`receipts.v2 at ${baseUrl}`);
  // Nothing is issued for a run that cannot reach the service.
  const answered = await fetch(new URL(PATHS.openapi, baseUrl)).then((response) => (void response.body?.cancel(), response.ok), () => false);
  if (!answered) throw new Error(`No receipts.v2 answers at ${baseUrl}.`);
  const { clientId, clientSecret, chainId, saved } = credentials();
  let client = new ReceiptsClient({ baseUrl, clientId, clientSecret });

  let token;
  try {
    token = await client.login();
  } catch (error) {
    // A saved client from an earlier local state (wiped, or another --persist-to) is unknown here.
    if (!(saved && error instanceof ReceiptsError && error.status === 403)) throw error;
    const issued = issueClient(chainId);
    client = new ReceiptsClient({ baseUrl, clientId: issued.clientId, clientSecret: issued.clientSecret });
    token = await client.login();
  }
  console.log(`2. Logged in: a ${token.token_type} token for ${token.expires_in} s; the client renews it by itself.`);

  const appUserId = `au-${crypto.randomUUID().slice(0, 8)}`;
  const receipt = sampleReceipt();
  // The till's own receipt number as the key: after a crash the till can repeat the add safely.
  const idempotencyKey = `till-7-${receipt.pos_receipt_number}`;
  const added = await client.add(receipt, { chainId, appUserId, idempotencyKey });
  console.log(
    `3. Added receipt ${added.receipt_id} for app user ${added.app_user_id}: ` +
      `${receipt.line_items.length} lines, total ${(receipt.total / 100).toFixed(2)} ${receipt.currency}.`,
  );

  const code = makeReturnCode({ receiptId: added.receipt_id, appUserId: added.app_user_id });
  console.log(`4. Return code in the app's QR code: ${code}`);

  const scanned = parseReturnCode(code);
  console.log(`5. The till scanned it: receipt ${scanned.receiptId}, app user ${scanned.appUserId}.`);

  const deleted = await client.delete({ ...scanned, chainId });
  console.log(`6. Deleted: ${deleted.message}`);

  try {
    await client.delete({ ...scanned, chainId });
  } catch (error) {
    if (!(error instanceof ReceiptsError)) throw error;
    console.log(`7. Deleting it again is refused: ${error.status} ${error.statusWord}, "${error.message}"`);
  }
}

interface Credentials {
  clientId: string;
  clientSecret: string;
  chainId: string;
}

function credentials(): Credentials & { saved: boolean } {
  const { RECEIPTS_CLIENT_ID: clientId, RECEIPTS_CLIENT_SECRET: clientSecret, RECEIPTS_CHAIN_ID: chainId = "c1" } = process.env;
  if (clientId && clientSecret) {
    console.log(`1. Acting as client ${clientId} for chain ${chainId} (from RECEIPTS_CLIENT_ID).`);
    return { clientId, clientSecret, chainId, saved: false };
  }
  if (existsSync(SAVED_CLIENT)) {
    const saved = JSON.parse(readFileSync(SAVED_CLIENT, "utf8")) as Credentials;
    if (saved.chainId === chainId) {
      console.log(`1. Acting as client ${saved.clientId} for chain ${chainId}, issued by an earlier run (${path.relative(process.cwd(), SAVED_CLIENT)}).`);
      return { ...saved, saved: true };
    }
  }
  return { ...issueClient(chainId), saved: false };
}

/** Issues a client as an operator would, and keeps it for the next runs. */
function issueClient(chainId: string): Credentials {
  // npm run puts the project's Node and wrangler first on PATH; the operator command needs both.
  const output = execFileSync("npm", ["run", "-s", "clients", "--", "issue", "--chain", chainId, "--json", ...(persistTo ? ["--persist-to", persistTo] : [])], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const issued = JSON.parse(output.trim().split("\n").at(-1)!) as { client_id: string; client_secret: string };
  console.log(`1. Issued client ${issued.client_id} for chain ${chainId}: npm run clients -- issue --chain ${chainId} --json`);
  const credentials = { clientId: issued.client_id, clientSecret: issued.client_secret, chainId };
  mkdirSync(path.dirname(SAVED_CLIENT), { recursive: true });
  writeFileSync(SAVED_CLIENT, `${JSON.stringify(credentials)}\n`, { mode: 0o600 });
  return credentials;
}

/**
 * --base-url, else RECEIPTS_BASE_URL, else the local npm start where it recorded its port;
 * anything but an http(s) URL is a usage error (exit 2), and --help prints the usage (exit 0).
 */
function settings(): { baseUrl: string; persistTo?: string } {
  if (asksForHelp(process.argv.slice(2))) {
    console.log(USAGE);
    process.exit(0);
  }
  try {
    const { values } = parseArgs({ options: { "base-url": { type: "string" }, "persist-to": { type: "string" } } });
    const persistTo = values["persist-to"];
    const url = values["base-url"] ?? process.env.RECEIPTS_BASE_URL ?? localServiceUrl(stateDirectory(persistTo));
    if (!/^https?:$/.test(new URL(url).protocol)) throw new Error(`not an http(s) URL: ${url}`);
    return { baseUrl: url, ...(persistTo ? { persistTo } : {}) };
  } catch (error) {
    console.error(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
}

function sampleReceipt(): Receipt & { total: number; currency: string; pos_receipt_number: string } {
  const lines = [
    { description: "Oat milk 1 l", quantity: 2, unit_price: 149, total: 298, vat_rate: 7 },
    { description: "Rye bread", quantity: 1, unit_price: 249, total: 249, vat_rate: 7 },
    { description: "Loyalty discount", quantity: 1, unit_price: -100, total: -100 },
  ];
  const total = lines.reduce((sum, line) => sum + line.total, 0);
  return {
    purchased_at: new Date().toISOString(),
    currency: "EUR",
    total,
    line_items: lines,
    store_id: "store-0042",
    pos_receipt_number: `0042-7-${Date.now()}`,
    payments: [{ method: "card", amount: total }],
  };
}
