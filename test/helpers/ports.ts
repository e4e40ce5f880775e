/**
 * Ports for what a test must name before it starts (a child's PORT, a proxy's, an address
 * where nothing listens).
 *
 * Asking the kernel for any free port (listen on 0) and releasing it races: that port comes
 * from the ephemeral range (32768–60999 on Linux), which every outgoing connection of every
 * test file running beside draws from too (PostgreSQL clients, fetch), and the kernel hands
 * it to the next bind on 0; the child's bind could then fail with EADDRINUSE. These ports
 * come from below that range, which the kernel gives to no one unasked: chosen at random,
 * checked free on every IPv4 interface, and never the same twice in one test process. Test
 * files running at once meet only by choosing the same number in the same moment.
 */
import { createServer } from "node:net";

const LOW = 20_000;
const HIGH = 32_000;
const given = new Set<number>();

/** Whether something could listen on `port` on every IPv4 interface now. */
async function listenable(port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", () => resolve(false));
    srv.listen({ port, host: "0.0.0.0", exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/** A port nothing listens on, outside the ephemeral range; never one of `avoid`. */
export async function freePort(avoid: readonly number[] = []): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (given.has(port) || avoid.includes(port)) continue;
    given.add(port);
    if (await listenable(port)) return port;
  }
  throw new Error(`no free port between ${LOW} and ${HIGH}`);
}
