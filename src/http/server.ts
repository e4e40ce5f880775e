import { serve } from "@hono/node-server";
import type { Server } from "node:http";

export interface HttpServer {
  url: string;
  close(): Promise<void>;
}

/**
 * Serves the app. Timeouts bound slow clients: headers must arrive within 10 s and the
 * whole request within 30 s, so a trickled body cannot hold a connection forever.
 */
export async function listen(app: { fetch: (req: Request) => Response | Promise<Response> }, port: number, host: string): Promise<HttpServer> {
  return await new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: host }, (info) => {
      const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
      resolve({
        url: `http://${shownHost}:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            (server as Server).close(() => done());
            (server as Server).closeIdleConnections();
          }),
      });
    }) as Server;
    server.headersTimeout = 10_000;
    server.requestTimeout = 30_000;
    server.keepAliveTimeout = 65_000;
    server.on("error", reject);
  });
}
