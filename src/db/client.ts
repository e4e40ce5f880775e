import { connect } from "node:net";
import type { Socket } from "node:net";
import postgres from "postgres";
import type { Sql, TransactionSql } from "postgres";
import { parseTimestamp } from "./timestamps.ts";
import { connectTarget } from "./url.ts";

/** What a statement runs on: the pool (autocommit) or a caller's transaction. */
export type Tx = Sql | TransactionSql;

export interface Database {
  /** The process's pool: every write of tracklane's own runs on it, and every read that is not a page's. */
  sql: Sql;
  /**
   * Where the API's GETs and the console's pages read: a read-only pool on
   * DATABASE_READ_URL (a streaming replica), or `sql` itself when there is none.
   */
  readSql: Sql;
  /** Ends both pools. */
  close(): Promise<void>;
}

/**
 * The database's clock: the one its now() dates rows with (received_at, finished_at, the
 * day an order was first seen). Retention and the event log's partitions count from it, so
 * a host whose own clock is off by minutes or days neither drops what is still kept nor
 * makes its partitions for another day than the one appends store events under.
 */
export async function databaseNow(sql: Tx): Promise<Date> {
  const [row] = await sql<{ now: Date }[]>`select now() as now`;
  return row!.now;
}

/**
 * The application_name of each role's pool: how pg_stat_activity, and the console's System
 * page, tell them apart. The read pool's connections are on the read server; each worker
 * process holds one `workerLiveness` connection for its life.
 */
export const POOL_NAMES = {
  web: "tracklane-web",
  read: "tracklane-web-read",
  worker: "tracklane-worker",
  workerLiveness: "tracklane-worker-liveness",
} as const;

export interface ReadPoolOptions {
  url: string;
  max: number;
  /** Application name shown in pg_stat_activity (of the read server). */
  name: string;
}

export interface DatabaseOptions {
  max?: number;
  /** Application name shown in pg_stat_activity. */
  name?: string;
  /** A second pool for page reads (DATABASE_READ_URL); absent: reads share `sql`. */
  read?: ReadPoolOptions | undefined;
}

/**
 * postgres.js 3.4.9 mishandles a connection that the server closes under load (a
 * PostgreSQL restart), see porsager/postgres#1154 and #1208:
 * - a query it rejects in its 'close' handler is followed by the transaction's ROLLBACK
 *   on a socket it has just set to null: an uncaught TypeError that kills the process;
 * - a write still waiting for its setImmediate flush is cancelled there without being
 *   forgotten: that pool slot never sends again (every later query on it ends in
 *   CONNECT_TIMEOUT).
 * So the driver learns of such a close in two steps here. First an error, which rejects
 * what is in flight while the socket still exists; a query it writes meanwhile (the
 * ROLLBACK, or one pipelined onto the dead connection) is rejected the same way. The
 * 'close' itself follows right after one of the driver's deferred flushes, the one moment
 * it has no write waiting (or, if it writes nothing, after a quarter second). TLS sockets
 * are made by the driver and keep the upstream behaviour; the two-line upstream fix makes
 * all this unnecessary.
 */
function socketFactory() {
  let next = 0;
  const closedError = () => Object.assign(new Error("the server closed the connection"), { code: "CONNECTION_CLOSED" });
  return (options: { host: string[]; port: number[]; path?: string | undefined }): Socket => {
    const i = next++ % Math.max(1, options.host.length);
    const host = options.host[i] ?? "localhost";
    const port = options.port[i] ?? options.port[0] ?? 5432;
    const socket = options.path ? connect(options.path) : connect(port, host);
    Object.assign(socket, { host, port }); // what the driver reads for TLS and error messages
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    let established = false;
    let held: unknown[] | null = null; // the 'close' not passed on yet
    let fallback: NodeJS.Timeout | undefined;
    socket.once("connect", () => (established = true));
    // Some connects fail at once, reported on the next tick: EMFILE (no file descriptor
    // left) or a socket path too long. The driver awaits this factory before it listens,
    // so that 'error' went unheard and killed the process. What comes before the driver
    // listens is passed on once it does (it adds its listeners as the await returns,
    // before the next turn of the event loop).
    let early: [string | symbol, unknown[]][] | null = [];
    setImmediate(() => {
      const pending = early ?? [];
      early = null;
      for (const [event, args] of pending) socket.emit(event, ...args);
    });
    const pass = () => {
      if (held === null) return;
      const args = held;
      held = null;
      clearTimeout(fallback);
      emit("close", ...args);
    };
    const armFallback = () => {
      clearTimeout(fallback);
      fallback = setTimeout(() => setImmediate(() => setImmediate(pass)), 250);
    };
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (early !== null && (event === "error" || event === "close")) {
        early.push([event, args]);
        return true;
      }
      // Not connected yet (refused, timed out): nothing was in flight; as upstream.
      if (event !== "close" || !established) return emit(event, ...args);
      if (args[0] !== true) emit("error", closedError()); // a clean close had no 'error' first
      held = args;
      armFallback();
      return true;
    }) as Socket["emit"];
    socket.write = ((...args: unknown[]) => {
      if (held === null) return write(...args);
      const [chunk] = args;
      const callback = args.find((a): a is (err: Error) => void => typeof a === "function");
      // A small write without a callback is the driver's deferred flush (larger ones and
      // those with a callback are written at once, maybe with more to come).
      const deferredFlush = callback === undefined && Buffer.isBuffer(chunk) && chunk.length < 1024;
      armFallback();
      process.nextTick(() => {
        callback?.(closedError());
        if (held === null) return;
        emit("error", closedError());
        if (deferredFlush) pass();
      });
      return true;
    }) as Socket["write"];
    return socket;
  };
}

type PoolOptions = postgres.Options<Record<string, postgres.PostgresType>>;

/**
 * bigint (int8) columns read as numbers, as the schema's `bigint({ mode: "number" })`
 * types them: ids and counts stay far below 2^53.
 */
const INT8_AS_NUMBER = { to: 20, from: [20], serialize: (n: number | bigint) => String(n), parse: (s: string) => Number(s) };

/**
 * Dates and timestamps as postgres.js reads them (its `date` type), with a faster parse
 * (timestamps.ts). A UTC string (ending in Z, as toISOString writes them) is sent as it
 * is: the append's column arrays carry such strings, and a round trip through Date per
 * element cost 4 % of the worker's CPU when the projection's write sent them too. Any
 * other string goes through Date, so that a time without a zone means UTC, not the
 * session's zone.
 */
const TIMESTAMPS = {
  to: 1184,
  from: [1082, 1114, 1184],
  serialize: (x: Date | string | number) => (typeof x === "string" && x.endsWith("Z") ? x : (x instanceof Date ? x : new Date(x)).toISOString()),
  parse: parseTimestamp,
};

/**
 * A postgres.js pool with tracklane's timeouts and the workaround above; `overrides` win.
 * The URL may name a Unix socket directory as libpq does (src/db/url.ts).
 */
export function createPool(url: string, max: number, name: string, overrides: PoolOptions = {}): Sql {
  const { connection, ...rest } = overrides;
  // What the URL's query or encoded host held (a socket directory, say) goes as options.
  const { url: plain, ...where } = connectTarget(url);
  const options: PoolOptions & { socket: ReturnType<typeof socketFactory> } = {
    ...where,
    max,
    onnotice: () => {},
    connection: { application_name: name, ...connection },
    types: { int8: INT8_AS_NUMBER, date: TIMESTAMPS },
    // A dead server must surface as an error (503), not as requests waiting forever.
    connect_timeout: 5,
    // postgres.js backs off up to 20 s between reconnects while the server is down, and a
    // query waiting for a connection waits that long: retry within a second, so an outage
    // answers 503 at once and is over as soon as the server is back.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1) * (0.5 + Math.random() / 2),
    idle_timeout: 60,
    socket: socketFactory(),
    ...rest,
  };
  return postgres(plain, options);
}

/**
 * postgres.js itself on a URL as tracklane reads it (a socket directory too), with none of
 * the pool's settings: for tools' own connections (the tests, the benches, scripts), which
 * make and drop databases and read what the driver returns by default.
 */
export function driverSql(url: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}): Sql {
  const { url: plain, ...where } = connectTarget(url);
  return postgres(plain, { ...where, onnotice: () => {}, ...options });
}

/**
 * The read pool's sessions are read-only (default_transaction_read_only): a replica is so
 * anyway, and a DATABASE_READ_URL that names a writable server (the primary itself, or a
 * copy) then refuses a write sent to the wrong pool instead of storing it where nothing
 * reads it, or where it is lost.
 */
export const READ_ONLY: PoolOptions = { connection: { default_transaction_read_only: true } };

/**
 * The process's pool, and a web process's read pool when DATABASE_READ_URL is set
 * (graphile-worker keeps its own node-postgres pool: docs/architecture.md).
 */
export function createDatabase(url: string, options: DatabaseOptions = {}): Database {
  const sql = createPool(url, options.max ?? 10, options.name ?? "tracklane");
  const read = options.read;
  if (read === undefined) return { sql, readSql: sql, close: () => sql.end({ timeout: 5 }) };
  const readSql = createPool(read.url, read.max, read.name, READ_ONLY);
  return {
    sql,
    readSql,
    close: async () => {
      await Promise.all([sql.end({ timeout: 5 }), readSql.end({ timeout: 5 })]);
    },
  };
}

/** SQLSTATE classes and socket errors that mean "the database is not there right now". */
const UNAVAILABLE_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EPIPE",
  "ENOTFOUND",
  "EAI_AGAIN",
  "CONNECT_TIMEOUT",
  "CONNECTION_CLOSED",
  "CONNECTION_ENDED",
  "CONNECTION_DESTROYED",
  "57P01", // admin_shutdown
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now
  // idle_session_timeout (a managed provider's setting): the server ended a connection that
  // sat idle; the pool opens another. graphile-worker's LISTEN connection idles for ever and
  // met it each time: an error with its stack every few seconds.
  "57P05",
  "53300", // too_many_connections
  // serialization_failure: tracklane runs no serializable transaction, so this is a read
  // replica (DATABASE_READ_URL) cancelling a query that replay conflicts with: retry.
  "40001",
]);

/**
 * SQLSTATEs (and two errors of the process's own) of a statement the database could not
 * complete right now, with nothing of it kept: its transaction was rolled back, and the same statement may succeed when sent
 * again. A request that meets one is refused like an outage (503 with Retry-After), not
 * answered 500: a callback's sender retries, and nothing of it was stored. Left out, as
 * 500s: what fails the same way on every retry (53400, a configured limit; 54000, a
 * statement over one of PostgreSQL's own limits).
 *
 * 25006 is a write on a read-only server: DATABASE_URL reached a standby (a failover whose
 * DNS has not moved yet, an old primary demoted), or the server was made read-only
 * (default_transaction_read_only, as some managed providers set on a full disk). That
 * passes once the writable primary is back, and was a 500 that callback senders do not
 * retry. No write of tracklane's goes to the read pool, so it cannot come from there.
 */
const BUSY_CODES = new Map([
  ["40P01", "a deadlock"],
  ["55P03", "a lock that was not available"],
  ["57014", "a cancelled statement"], // statement_timeout, or pg_cancel_backend
  ["53000", "a lack of resources"],
  ["53100", "a full disk"],
  ["53200", "a lack of memory"],
  ["25006", "a read-only database (a standby, or default_transaction_read_only)"],
  // Not the database's: this process (EMFILE, its `ulimit -n`) or the machine (ENFILE) has
  // no file descriptor left for a new connection, while clients hold many. It passes as
  // they let go, and nothing was sent.
  ["EMFILE", "no file descriptor left in this process"],
  ["ENFILE", "no file descriptor left on this machine"],
]);

/**
 * Of BUSY_CODES, those that say how the database is (slow, locked, short of room), not
 * what a statement held: a batch of callbacks that met one is no better off sent again
 * event by event. A deadlock is left out: two batches whose events touch the same orders
 * can deadlock, and each event alone may not.
 */
const DATABASE_STATE_CODES = new Set(["55P03", "57014", "53000", "53100", "53200", "25006", "EMFILE", "ENFILE"]);

/**
 * The error and its causes (drizzle wraps driver errors), at most 5 deep, each with its
 * string `code`: what the classifications below read.
 */
function* codedCauses(err: unknown): Generator<{ e: object; code: string }> {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") yield { e, code };
    e = (e as { cause?: unknown }).cause;
  }
}

/**
 * The database is away, or failing every statement for a reason of its own (a statement
 * or lock timeout, a cancel, a full disk, a lack of memory): retrying a failed batch's
 * events one by one would meet the same failure once per event (with a statement timeout,
 * one timeout each, while every sender waits).
 */
export function isDatabaseWideFailure(err: unknown): boolean {
  if (isDatabaseUnavailable(err)) return true;
  for (const { code } of codedCauses(err)) if (DATABASE_STATE_CODES.has(code)) return true;
  return false;
}

/** Why the database could not complete the statement, when it may on a retry (BUSY_CODES); null otherwise. */
export function databaseBusyReason(err: unknown): string | null {
  for (const { code } of codedCauses(err)) {
    const reason = BUSY_CODES.get(code);
    if (reason !== undefined) return `${reason} (${/^[0-9A-Z]{5}$/.test(code) ? "SQLSTATE " : ""}${code})`;
  }
  return null;
}

/**
 * A Unix socket that is not there (src/db/url.ts): the server is down (it removes its
 * socket) or the directory or port is wrong. Only a connect's ENOENT: a missing file is
 * no outage.
 */
const isMissingSocket = (e: object, code: string) => code === "ENOENT" && (e as { syscall?: unknown }).syscall === "connect";

/** The server refused a new connection for want of a slot (53300): max_connections or a CONNECTION LIMIT reached. */
export function isOutOfConnections(err: unknown): boolean {
  for (const { code } of codedCauses(err)) if (code === "53300") return true;
  return false;
}

/** True for connection-level failures, also when wrapped (drizzle wraps driver errors). */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (const { e, code } of codedCauses(err)) {
    if (UNAVAILABLE_CODES.has(code) || code.startsWith("08") || isMissingSocket(e, code)) return true;
  }
  return false;
}

/**
 * graphile-worker talks to PostgreSQL through node-postgres, whose lost connections often
 * carry no code, only these messages. The last is graphile-worker 0.18's LISTEN client
 * released twice after its connection was lost (its error handler does not await the
 * release it starts): seen as an unhandled rejection that killed the worker while
 * connections were terminated under it.
 */
const PG_CONNECTION_LOST = /^(Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Release called on client which has already been released to the pool)/;

/** isDatabaseUnavailable, or node-postgres (graphile-worker's driver) saying it lost the server. */
export function isConnectionLost(err: unknown): boolean {
  return isDatabaseUnavailable(err) || (err instanceof Error && PG_CONNECTION_LOST.test(err.message));
}
