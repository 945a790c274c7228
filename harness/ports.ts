/**
 * Ports for a local Worker that a harness or a test starts: free now, and out of reach of any
 * other process's listen on port 0 until the Worker binds them.
 */
import { once } from "node:events";
import net from "node:net";

// Ports to choose from: below those the system hands out for a listen on port 0 (32768 and up on
// Linux, 49152 and up on macOS).
const LOWEST_PORT = 10_000;
const BELOW_EPHEMERAL_PORTS = 32_768;

/**
 * A TCP port on 127.0.0.1 that nothing listens on, chosen at random below the ports the system
 * hands out for port 0. wrangler dev binds the ports it is given seconds after it starts, and
 * meanwhile other tests' workerd listen on port 0: a port from that range could go to one of
 * them first ("Address already in use").
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const port = LOWEST_PORT + Math.floor(Math.random() * (BELOW_EPHEMERAL_PORTS - LOWEST_PORT));
    if (await portIsFree(port)) return port;
  }
}

/** Whether this process could listen on `port` now. */
export async function portIsFree(port: number): Promise<boolean> {
  const server = net.createServer();
  try {
    server.listen(port, "127.0.0.1");
    await once(server, "listening");
    return true;
  } catch {
    return false;
  } finally {
    server.close();
  }
}
