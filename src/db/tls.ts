/**
 * DATABASE_URL's sslmode, read the same way by both drivers. postgres.js (tracklane's pools)
 * reads it as libpq does: `prefer` tries TLS and falls back to a plain connection, `require`
 * encrypts without checking the certificate. node-postgres (graphile-worker's driver)
 * reads `prefer`, `require` and `verify-ca` as `verify-full` unless the URL says
 * `uselibpqcompat=true`, and has no fallback: with `sslmode=prefer` on a server without
 * TLS, migrate and the worker failed ("The server does not support SSL connections") while
 * the web ran; with `sslmode=require` on a managed server whose certificate authority is
 * not Node's (RDS, Cloud SQL), the worker failed its certificate check while the web ran.
 * So graphile-worker is given the URL with the mode spelt in libpq's terms.
 */
import { connect } from "node:net";
import { connectTarget, parseUrl } from "./url.ts";

/** How long the server gets to answer whether it speaks TLS. */
const PROBE_MS = 5_000;

/**
 * Whether the server at host:port accepts TLS: PostgreSQL's SSLRequest, answered `S` or
 * `N`. An error or no answer counts as yes: the driver's own connection then says why.
 */
export function acceptsTls(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    const done = (yes: boolean) => {
      socket.destroy();
      resolve(yes);
    };
    socket.setTimeout(PROBE_MS, () => done(true));
    socket.once("error", () => done(true));
    socket.once("connect", () => socket.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])));
    socket.once("data", (data: Buffer) => done(data[0] !== 0x4e)); // 'N'
  });
}

/** `url` for graphile-worker (node-postgres): its sslmode in libpq's meaning. */
export async function workerConnectionString(url: string): Promise<string> {
  const parsed = parseUrl(url);
  const mode = parsed?.searchParams.get("sslmode");
  if (parsed === null || mode == null || parsed.searchParams.has("uselibpqcompat")) return url;
  const set = (params: Record<string, string>) => {
    const at = url.indexOf("?");
    const query = new URLSearchParams(at < 0 ? "" : url.slice(at + 1));
    for (const [k, v] of Object.entries(params)) query.set(k, v);
    return `${at < 0 ? url : url.slice(0, at)}?${query.toString()}`;
  };
  if (mode === "require" || mode === "verify-ca") return set({ uselibpqcompat: "true" });
  if (mode !== "prefer") return url;
  const target = connectTarget(url);
  const named = target.url.includes("//") && !target.url.startsWith("postgres:///") && !target.url.startsWith("postgresql:///");
  const host = target.host ?? (named ? new URL(target.url).hostname : "");
  if (host === "") return url; // PGHOST decides, in both drivers: left to them
  if (host.includes("/")) return set({ sslmode: "disable" }); // a Unix socket: libpq uses no TLS there
  const port = target.port ?? (Number(new URL(target.url).port) || 5432);
  if (!(await acceptsTls(host, port))) return set({ sslmode: "disable" });
  return set({ sslmode: "require", uselibpqcompat: "true" });
}
