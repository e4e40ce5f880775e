/**
 * Phase (f)'s webhook receiver, in its own process (forked by bench/lib/phases.ts) so that
 * its CPU is neither tracklane's nor the load generator's. A bare node:http server on
 * 127.0.0.1 that reads each POST's body, notes when it arrived and its `webhook-id`, and
 * answers 200 at once (no signature check: that would be the receiver's cost, not
 * tracklane's). Sends `{url}` once listening; on the message "report" sends back every
 * arrival (first arrival per id, and how many arrived in all), and keeps serving.
 */
import { createServer } from "node:http";

export interface ReceiverReport {
  /** Each webhook-id received, with the epoch ms (sub-millisecond) of its first arrival. */
  ids: string[];
  firstAt: number[];
  /** Every POST received, repeats of an id included. */
  arrivals: number;
  /** POSTs without a webhook-id header (none expected). */
  withoutId: number;
  /** CPU seconds the receiver used since it listened (its start excluded). */
  cpuS: number;
}

const now = () => performance.timeOrigin + performance.now();

const first = new Map<string, number>();
let arrivals = 0;
let withoutId = 0;

const server = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const at = now();
    arrivals++;
    const id = req.headers["webhook-id"];
    if (typeof id !== "string") withoutId++;
    else if (!first.has(id)) first.set(id, at);
    res.writeHead(200, { "content-length": "0" }).end();
  });
});
// Longer than the sender's idle sockets live, so a kept-alive socket is never closed under it.
server.keepAliveTimeout = 60_000;

let cpuAtListen = 0;
server.listen(0, "127.0.0.1", () => {
  const usage = process.cpuUsage();
  cpuAtListen = (usage.user + usage.system) / 1e6;
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  process.send!({ url: `http://127.0.0.1:${port}` });
});

process.on("message", (m) => {
  if (m !== "report") return;
  const usage = process.cpuUsage();
  const report: ReceiverReport = {
    ids: [...first.keys()],
    firstAt: [...first.values()],
    arrivals,
    withoutId,
    cpuS: (usage.user + usage.system) / 1e6 - cpuAtListen,
  };
  process.send!(report);
});
process.on("SIGTERM", () => process.exit(0));
