/**
 * A TCP proxy on loopback in front of the test server, for outage tests that must not stop
 * the server other tests share: `down()` drops every connection through it and refuses new
 * ones (as a stopped or failed-over PostgreSQL does), `up()` takes connections again on the
 * same port.
 *
 * The port is the kernel's choice (listen on 0, then read it back), never one picked and
 * released: another test file running at the same time could take such a port first.
 * Between `down()` and `up()` the port is free, as a stopped server's is: `up()` says so
 * plainly if something else took it meanwhile.
 */
import { connect, createServer } from "node:net";
import type { Server, Socket } from "node:net";
import { connectTarget } from "../../src/db/url.ts";

export interface DatabaseProxy {
  /** `url` with its host and port replaced by the proxy's (TCP on 127.0.0.1). */
  url: string;
  down(): Promise<void>;
  up(): Promise<void>;
  /** Drops every connection through it (the server terminating its backends); new ones are taken. */
  dropConnections(): void;
  /**
   * While set, a connection is dropped the moment its client sends bytes holding `text`
   * (before the server sees them): a connection lost during that statement.
   */
  cutWhenClientSends(text: string | null): void;
  /**
   * Frozen, nothing passes either way and no connection is closed: a network path that
   * silently drops packets. Unfrozen, what was held is passed on, in order.
   */
  freeze(frozen: boolean): void;
  close(): Promise<void>;
}

/** Where `url` reaches the server: a TCP host and port, or a Unix socket's path. */
function upstreamOf(url: string): { host: string; port: number } | { path: string } {
  const target = connectTarget(url);
  const parsed = new URL(target.url.replace(/^postgres(ql)?:\/\/\//i, "postgres://localhost/"));
  const port = target.port ?? (parsed.port === "" ? Number(process.env["PGPORT"] ?? 5432) : Number(parsed.port));
  const host = target.host ?? (parsed.hostname === "" ? (process.env["PGHOST"] ?? "localhost") : parsed.hostname);
  if (host.startsWith("/")) return { path: `${host}/.s.PGSQL.${port}` };
  return { host: host.replace(/^\[|\]$/g, ""), port };
}

export async function startDatabaseProxy(url: string): Promise<DatabaseProxy> {
  const upstream = upstreamOf(url);
  const target = connectTarget(url);
  const parsed = new URL(target.url.replace(/^postgres(ql)?:\/\/\//i, "postgres://localhost/"));
  const user = target.user ?? decodeURIComponent(parsed.username);
  const pass = target.pass ?? decodeURIComponent(parsed.password);
  const database = target.database ?? parsed.pathname.slice(1);
  const login = `${encodeURIComponent(user)}${pass ? `:${encodeURIComponent(pass)}` : ""}@`;
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  let port = 0; // the kernel's choice at the first listen, the same one after
  let cutOn: Buffer | null = null;
  let frozen = false;
  let held: (() => void)[] = [];
  const forward = (to: Socket, chunk: Buffer) => {
    if (frozen) held.push(() => to.write(chunk));
    else to.write(chunk);
  };

  const listen = async () => {
    const srv = createServer((client) => {
      const server = "path" in upstream ? connect(upstream.path) : connect(upstream.port, upstream.host);
      for (const s of [client, server]) {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
        s.on("error", () => {});
      }
      client.on("data", (chunk: Buffer) => {
        if (cutOn !== null && chunk.includes(cutOn)) {
          client.destroy();
          server.destroy();
          return;
        }
        forward(server, chunk);
      });
      server.on("data", (chunk: Buffer) => forward(client, chunk));
      client.on("close", () => server.destroy());
      server.on("close", () => client.destroy());
    });
    await new Promise<void>((resolve, reject) => {
      srv.once("error", (err: NodeJS.ErrnoException) =>
        reject(port !== 0 && err.code === "EADDRINUSE" ? new Error(`database proxy: port ${port} was taken by another process while the proxy was down`, { cause: err }) : err),
      );
      srv.listen(port, "127.0.0.1", () => resolve());
    });
    const address = srv.address();
    if (address === null || typeof address === "string") throw new Error(`database proxy: no TCP address (${String(address)})`);
    port = address.port;
    server = srv;
  };
  await listen();

  const down = async () => {
    const srv = server;
    server = undefined;
    const closed = srv === undefined ? Promise.resolve() : new Promise<void>((r) => srv.close(() => r()));
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    url: `postgres://${login}127.0.0.1:${port}/${database}`,
    down,
    up: async () => {
      if (server === undefined) await listen();
    },
    close: down,
    dropConnections: () => {
      for (const s of sockets) s.destroy();
    },
    freeze: (on) => {
      frozen = on;
      if (on) return;
      const release = held;
      held = [];
      for (const write of release) write();
    },
    cutWhenClientSends: (text) => {
      cutOn = text === null ? null : Buffer.from(text);
    },
  };
}
