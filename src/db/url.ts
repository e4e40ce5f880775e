/**
 * A postgres URL (DATABASE_URL, DATABASE_READ_URL) as tracklane's pools connect to it.
 *
 * libpq, psql and node-postgres (graphile-worker's driver) reach a server on the same host
 * through its Unix socket directory, spelt in any of three ways:
 *   postgres://user@/db?host=/var/run/postgresql           (`host` in the query)
 *   postgres:///db?host=/var/run/postgresql                (no authority at all)
 *   postgres://user@%2Fvar%2Frun%2Fpostgresql/db           (the directory as the host)
 * postgres.js takes none of them as such: it sends a query's `host` and `port` (and
 * libpq's other connection keywords `user`, `password` and `dbname`) to the server as
 * settings, which refuses them, and the WHATWG URL parser it uses refuses an empty host
 * after user info. So the pool takes them out of the URL and passes them as options; a
 * host with a slash is a socket directory (postgres.js connects to
 * `<dir>/.s.PGSQL.<port>`). Other query settings (sslmode, application_name, …) stay. A
 * URL with no host at all goes to PGHOST, else localhost, in both drivers. Pure: no I/O.
 */

export interface ConnectTarget {
  /**
   * What postgres.js parses: no host, port, user, password or dbname in its query, never an
   * encoded host, and no authority at all when the URL named no host (then PGHOST decides).
   */
  url: string;
  /** From the query's `host` or an encoded host: a socket directory (a slash in it) or a host name. */
  host?: string;
  /** From the query's `port`. */
  port?: number;
  /** From the query's `user`, `password` and `dbname`. */
  user?: string;
  pass?: string;
  database?: string;
}

/** User info followed by no host: `postgres://user@/db`. */
const NO_HOST_AFTER_LOGIN = /^(postgres(?:ql)?:\/\/[^/?#]*@)(?=[/?#]|$)/i;

/**
 * A URL as WHATWG's parser reads it, which needs a host after user info:
 * `postgres://user@/db` is read as `postgres://user@localhost/db`. Null if it cannot be
 * parsed.
 */
export function parseUrl(raw: string): URL | null {
  try {
    return new URL(raw.replace(NO_HOST_AFTER_LOGIN, "$1localhost"));
  } catch {
    return null;
  }
}

/**
 * Parses a postgres URL as libpq reads its host, port, user, password and database.
 * Throws an Error naming the problem (never the URL, which may hold a password) when it
 * cannot be parsed.
 */
export function connectTarget(raw: string): ConnectTarget {
  if (!/^postgres(ql)?:\/\//i.test(raw)) throw new Error("must be a postgres:// or postgresql:// URL");
  const url = parseUrl(raw);
  if (url === null) throw new Error("is not a valid URL");
  const target: ConnectTarget = { url: "" };
  const take = (key: string): string | null => {
    const value = url.searchParams.get(key);
    url.searchParams.delete(key);
    return value === "" ? null : value;
  };
  const [host, port, user, pass, database] = ["host", "port", "user", "password", "dbname"].map(take);
  if (user != null) target.user = user;
  if (pass != null) target.pass = pass;
  if (database != null) target.database = database;
  if (host != null) {
    target.host = host;
  } else if (/^%2f/i.test(url.hostname)) {
    target.host = decodeURIComponent(url.hostname);
    url.hostname = "localhost";
  }
  if (port != null) {
    const n = Number(port);
    if (!/^\d+$/.test(port) || n < 1 || n > 65_535) throw new Error(`has port=${port} in its query: a port is a whole number from 1 to 65535`);
    target.port = n;
  }
  if (target.host === undefined && (url.hostname === "" || NO_HOST_AFTER_LOGIN.test(raw))) {
    // No host at all: PGHOST, else localhost, as node-postgres reads it. postgres.js does
    // the same for a URL without an authority, so the login moves to the options.
    if (target.user === undefined && url.username !== "") target.user = decodeURIComponent(url.username);
    if (target.pass === undefined && url.password !== "") target.pass = decodeURIComponent(url.password);
    target.url = `${url.protocol}//${url.pathname}${url.search}`;
    return target;
  }
  target.url = url.toString();
  return target;
}

/**
 * The same server, reached the same way (socket or host, login, settings), but another
 * database: what tools that make and drop scratch databases (the tests, the benches)
 * connect to. A `dbname` in the query would win over the path, so it goes. Throws like
 * connectTarget when the URL cannot be parsed.
 */
export function withDatabase(raw: string, database: string): string {
  const url = parseUrl(raw);
  if (url === null) throw new Error("is not a valid URL");
  url.pathname = `/${encodeURIComponent(database)}`;
  if (url.searchParams.has("dbname")) url.searchParams.delete("dbname");
  const out = url.toString();
  // parseUrl read `user@/db` as `user@localhost/db`: give the host back to PGHOST.
  return NO_HOST_AFTER_LOGIN.test(raw) ? out.replace(/^(postgres(?:ql)?:\/\/[^/?#]*@)localhost(?=[/?#]|$)/i, "$1") : out;
}

/**
 * Where a URL connects, for messages: `host:port/db`, or `socket <dir>/.s.PGSQL.<port>/db`;
 * never the user or password (a URL with no host at all says localhost, though PGHOST
 * would win). Null when it cannot be parsed.
 */
export function describeTarget(raw: string): string | null {
  let target: ConnectTarget;
  try {
    target = connectTarget(raw);
  } catch {
    return null;
  }
  const url = new URL(target.url);
  const port = target.port ?? (url.port === "" ? 5432 : Number(url.port));
  const db = target.database === undefined ? (url.pathname.length > 1 ? url.pathname : "") : `/${target.database}`;
  const host = target.host ?? (url.hostname || "localhost");
  return host.includes("/") ? `socket ${host.replace(/\/$/, "")}/.s.PGSQL.${port}${db}` : `${host}:${port}${db}`;
}
