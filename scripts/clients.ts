/**
 * Operators issue, list, show, disable, enable and rotate POS clients and the app push service's
 * clients (docs/api.md#operators). Records go to the CLIENTS KV namespace, the local state's
 * in-process or the deployment's through `wrangler kv` (scripts/lib/client-store.ts); the secret is printed once and only its hash is stored. The
 * commands are scripts/lib/client-commands.ts.
 */
import { CLIENTS_USAGE, clientCommands } from "./lib/client-commands.ts";
import { clientStore } from "./lib/client-store.ts";
import { runCommands } from "./lib/cli.ts";

await runCommands(CLIENTS_USAGE, clientCommands(clientStore));
