/**
 * The Worker a wrapper runs: the bundle `npm run build` made for deployment, which soak/runtime.ts
 * loads beside the wrapper as DEPLOYED_MODULE. Imported at run time by name, so that bundling a
 * wrapper leaves the deployed bundle out and the soak runs it byte for byte.
 */
import { DEPLOYED_MODULE } from "../protocol.ts";

/** The deployed Worker's handlers. */
export async function deployedWorker<Env, Message = unknown>(): Promise<ExportedHandler<Env, Message>> {
  const specifier = `./${DEPLOYED_MODULE}`;
  const module = (await import(specifier)) as { default: ExportedHandler<Env, Message> };
  return module.default;
}
