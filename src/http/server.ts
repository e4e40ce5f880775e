import { serve } from "@hono/node-server";
import type { Server } from "node:http";

export interface HttpServer {
  url: string;
  close(): Promise<void>;
}

export interface HttpTimeouts {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
}

/**
 * Serves the app. Timeouts bound slow clients: headers must arrive within
 * HTTP_HEADERS_TIMEOUT_MS (default 10 s) and the whole request within
 * HTTP_REQUEST_TIMEOUT_MS (default 30 s), so a trickled body cannot hold a connection
 * forever. Node only notices an expired request when it next checks its connections
 * (every 30 s by default), so the check runs at a tenth of the shorter timeout (at most
 * every second): a slow client is cut within about its timeout.
 */
export async function listen(
  app: { fetch: (req: Request) => Response | Promise<Response> },
  port: number,
  host: string,
  timeouts: HttpTimeouts = { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000 },
): Promise<HttpServer> {
  const { requestTimeoutMs, headersTimeoutMs } = timeouts;
  const serverOptions = {
    requestTimeout: requestTimeoutMs,
    headersTimeout: headersTimeoutMs,
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(Math.min(requestTimeoutMs, headersTimeoutMs) / 10))),
  };
  return await new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host, serverOptions }, (info) => {
      const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
      resolve({
        url: `http://${shownHost}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            // A keep-alive connection whose request was in flight at close() turns idle only
            // once answered, and close() would then wait for its client (65 s) to let go.
            const sweep = setInterval(() => (server as Server).closeIdleConnections(), 100);
            (server as Server).close(() => {
              clearInterval(sweep);
              done();
            });
            (server as Server).closeIdleConnections();
          }),
      });
    }) as Server;
    server.keepAliveTimeout = 65_000;
    server.on("error", reject);
  });
}
