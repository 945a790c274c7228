/**
 * The Worker a wrapper runs: the bundle `npm run build` made for deployment, which soak/runtime.ts
 * loads beside the wrapper as DEPLOYED_MODULE. Imported at run time by name, so that bundling a
 * wrapper leaves the deployed bundle out and the soak runs it byte for byte.
 */
import { DEPLOYED_MODULE } from "../protocol.ts";

/** The deployed Worker's handlers. */
export async function deployedWorker<Env, Message = unknown>(): Promise<ExportedHandler<Env, Message>> {
  return (await deployedModule<{ default: ExportedHandler<Env, Message> }>()).default;
}

/** Everything the deployed bundle exports: its handlers and its Workflow classes. */
export async function deployedModule<Module>(): Promise<Module> {
  const specifier = `./${DEPLOYED_MODULE}`;
  return (await import(specifier)) as Module;
}
