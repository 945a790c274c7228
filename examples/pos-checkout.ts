/**
 * A till's checkout with the POS client, against a running receipts.v2: log in, add a receipt,
 * make the return code the app shows as a QR code, read it back as the till's scanner would,
 * and delete the receipt, as a return at the till does.
 *
 *     npm start                 # in one terminal
 *     npm run example           # in another
 *
 * Settings, all optional:
 * - RECEIPTS_BASE_URL: where the service answers (default http://127.0.0.1:8787).
 * - RECEIPTS_CLIENT_ID, RECEIPTS_CLIENT_SECRET and RECEIPTS_CHAIN_ID: the client to act as.
 *   Without them the example issues a client for chain c1 into the local state of `npm start`,
 *   as an operator would: `npm run clients -- issue --chain c1 --json`.
 */
import { execFileSync } from "node:child_process";
import { ReceiptsClient, ReceiptsError, makeReturnCode, parseReturnCode, type Receipt } from "../src/client/index.ts";

const baseUrl = process.env.RECEIPTS_BASE_URL ?? "http://127.0.0.1:8787";

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
  const { clientId, clientSecret, chainId } = credentials();
  const client = new ReceiptsClient({ baseUrl, clientId, clientSecret });

  const token = await client.login();
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

function credentials(): { clientId: string; clientSecret: string; chainId: string } {
  const { RECEIPTS_CLIENT_ID: clientId, RECEIPTS_CLIENT_SECRET: clientSecret, RECEIPTS_CHAIN_ID: chainId = "c1" } = process.env;
  if (clientId && clientSecret) {
    console.log(`1. Acting as client ${clientId} for chain ${chainId} (from RECEIPTS_CLIENT_ID).`);
    return { clientId, clientSecret, chainId };
  }
  // npm run puts the project's Node and wrangler first on PATH; the operator command needs both.
  const output = execFileSync("npm", ["run", "-s", "clients", "--", "issue", "--chain", chainId, "--json"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const issued = JSON.parse(output.trim().split("\n").at(-1)!) as { client_id: string; client_secret: string };
  console.log(`1. Issued client ${issued.client_id} for chain ${chainId}: npm run clients -- issue --chain ${chainId} --json`);
  return { clientId: issued.client_id, clientSecret: issued.client_secret, chainId };
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
