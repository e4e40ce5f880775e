/**
 * Why a process could not start, said in one line a person can act on, and its exit code:
 * 78 (EX_CONFIG of sysexits.h) for configuration, 1 for anything else. The one place that
 * decides: entry points load their config with `loadConfigOrExit` and end a failed start
 * with lifecycle.ts `fatal`, which both come here. A stack trace helps whoever debugs
 * tracklane, not whoever runs it, so it is logged only at LOG_LEVEL=debug.
 */
import { ConfigError, loadConfig } from "../config.ts";
import type { Config } from "../config.ts";
import { POOL_NAMES, READ_ONLY, createPool, isDatabaseUnavailable } from "../db/client.ts";
import { DateStyleError, MigrationFailedError, MigrationsSkippedError, NEWEST_MIGRATION, requireIsoDateStyle, schemaState } from "../db/ready.ts";
import { TransactionPoolingError, requireOwnSessions } from "../db/pooler.ts";
import { acceptsTls } from "../db/tls.ts";
import { connectTarget, describeTarget, parseUrl } from "../db/url.ts";
import type { Logger } from "../logger.ts";

/** sysexits.h EX_CONFIG: the configuration is wrong; restarting the same way cannot help. */
export const EX_CONFIG = 78;
const EX_FAILURE = 1;

/** The database has no tracklane schema: nobody ran `npm run migrate` against it. */
export class MigrationsMissingError extends Error {
  constructor() {
    super("the database has no tracklane tables");
    this.name = "MigrationsMissingError";
  }
}

/** The database has an older release's schema: `npm run migrate` has not run for this release. */
export class MigrationsBehindError extends Error {
  constructor() {
    super(`the database lacks this release's migrations (newest: ${NEWEST_MIGRATION})`);
    this.name = "MigrationsBehindError";
  }
}

/**
 * The session's search_path does not find tracklane's tables (in the public schema, where
 * `npm run migrate` puts them): every query, which names its tables unqualified, would
 * fail, or read another schema's table of the same name.
 */
export class SearchPathError extends Error {
  readonly searchPath: string;
  /** What `order_events` resolves to on that path (null: nothing). */
  readonly found: string | null;
  constructor(searchPath: string, found: string | null) {
    super(`the database's search_path "${searchPath}" does not find tracklane's tables in the public schema`);
    this.name = "SearchPathError";
    this.searchPath = searchPath;
    this.found = found;
  }
}

/**
 * The login is not the owner of tracklane's tables (the role `npm run migrate` ran as) nor
 * a member of it: graphile-worker's tables admit their owner alone (row-level security
 * with no policy), so every enqueue and every job failed ("new row violates row-level
 * security policy"), and the event log's partitions are made and dropped by their owner.
 */
export class NotOwnerError extends Error {
  readonly login: string;
  readonly owner: string;
  constructor(login: string, owner: string) {
    super(`the login ${login} is not the owner of tracklane's tables (${owner}) nor a member of it`);
    this.name = "NotOwnerError";
    this.login = login;
    this.owner = owner;
  }
}

/**
 * DATABASE_READ_URL goes through a pooler that refuses the read pool's
 * default_transaction_read_only (PgBouncer refuses every startup parameter it does not
 * know): the web started, and every GET answered 503 for as long as it ran.
 */
export class ReadPoolParameterError extends Error {
  constructor(cause: unknown) {
    super("DATABASE_READ_URL refuses the read pool's default_transaction_read_only", { cause });
    this.name = "ReadPoolParameterError";
  }
}

/**
 * A web process's read pool connects once at start. Only a refused startup parameter ends
 * the start: a replica that is down answers the GETs 503 until it is back, as before.
 */
export async function requireReadPool(url: string): Promise<void> {
  const sql = createPool(url, 1, POOL_NAMES.read, READ_ONLY);
  try {
    await sql`select 1`;
  } catch (err) {
    if (err instanceof Error && (err as { code?: unknown }).code === "08P01" && /startup parameter/i.test(err.message)) throw new ReadPoolParameterError(err);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * `npm run web`, `npm run worker` and `npm run rebuild` never migrate (`npm run migrate`
 * does, once per release). Without the schema a web process would answer 503, a worker
 * fail every job for as long as it runs, and a rebuild fail on its first query: refuse to
 * start instead, saying what to run. Also the first contact with the database, so a wrong
 * DATABASE_URL stops the start here rather than failing every request.
 */
export async function requireMigrations(url: string): Promise<void> {
  // Two connections: the pooler check needs both (db/pooler.ts).
  const sql = createPool(url, 2, "tracklane-startup-check");
  try {
    const schema = await schemaState(sql);
    await requireOwnSessions(sql);
    if (schema.state === "missing") throw new MigrationsMissingError();
    // Queries of this release may need what the missing migrations add (a column, a key
    // form): a start now would answer with errors, or store what the old schema misreads.
    if (schema.state === "behind") throw new MigrationsBehindError();
    // The same, below newer ones: `npm run migrate` refuses such a database, naming them.
    if (schema.state === "skipped") throw new MigrationsSkippedError(schema.tags);
    await requireIsoDateStyle(sql);
    // The path the server gives the session (ALTER ROLE or DATABASE ... SET search_path, a
    // provider's default): unqualified, order_events must be public's.
    const [path] = await sql<{ search_path: string; found: string | null; ours: boolean }[]>`
      select current_setting('search_path') as search_path,
             (select n.nspname || '.' || c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
              where c.oid = to_regclass('order_events')) as found,
             to_regclass('order_events') is not distinct from to_regclass('public.order_events') as ours`;
    if (path !== undefined && !path.ours) throw new SearchPathError(path.search_path, path.found);
    const [owner] = await sql<{ login: string; owner: string; member: boolean }[]>`
      select current_user as login, c.relowner::regrole::text as owner, pg_has_role(c.relowner, 'USAGE') as member
      from pg_class c where c.oid = 'graphile_worker._private_jobs'::regclass`;
    if (owner !== undefined && !owner.member) throw new NotOwnerError(owner.login, owner.owner);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

/**
 * `npm run rebuild` failed after it began: not a failed start, and the pages it committed
 * before stay. `done`: how far it got.
 */
export class RebuildFailedError extends Error {
  readonly done: { orders: number; changed: number };
  constructor(done: { orders: number; changed: number }, cause: unknown) {
    super(`rebuild failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "RebuildFailedError";
    this.done = done;
  }
}

/**
 * A listener could not listen: the web's on PORT, or a worker's on METRICS_PORT. Carries
 * the listen error as its cause and says nothing of its own about it, so the line below
 * words every listen failure in one place (naming the variable to change) and a log of
 * this error (pino adds the cause's message) says it once.
 */
export class ListenFailedError extends Error {
  readonly variable: "PORT" | "METRICS_PORT";
  readonly port: number;
  constructor(variable: "PORT" | "METRICS_PORT", port: number, cause: unknown) {
    super(`the listener on ${variable} could not start`, { cause });
    this.name = "ListenFailedError";
    this.variable = variable;
    this.port = port;
  }
}

/** What the failing process was configured with, to name the setting to change. */
export type StartupContext = Partial<Pick<Config, "port" | "host" | "databaseUrl" | "databaseReadUrl" | "dataDir">> & {
  /** What DATABASE_URL's server answered TLS's request, asked again after the start failed (withTlsAnswer): false when it said yes. */
  tlsRefused?: boolean;
};

export interface StartupFailure {
  exitCode: number;
  /** Each a complete sentence, prefixed `tracklane: `. */
  lines: string[];
}

/** The first error in the cause chain (drizzle and graphile-worker wrap driver errors) with one of these codes. */
function findCode(err: unknown, codes: readonly string[]): (Error & { code: string; address?: string; port?: number }) | undefined {
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && codes.includes(code)) return e as Error & { code: string };
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * A server that answered TLS's request with no (postgres.js drops the connection before the
 * handshake; node-postgres, graphile-worker's driver, says so), or, for postgres.js's words
 * only (`ambiguous`), one that answered yes and closed the connection during the handshake.
 */
function refusedTls(err: unknown, ambiguous: "ambiguous" | "either" = "either"): boolean {
  const words = ambiguous === "ambiguous" ? /before secure TLS connection was established/ : /before secure TLS connection was established|does not support SSL connections/;
  for (let e = err, depth = 0; typeof e === "object" && e !== null && depth < 5; depth++) {
    if (e instanceof Error && words.test(e.message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * `context` with what DATABASE_URL's server answers TLS's request now, when the start failed
 * with postgres.js's "disconnected before secure TLS connection was established": it says
 * so both of a server that refuses TLS (a configuration to fix: exit 78) and of a handshake
 * cut short (a server or proxy restarting: a start again may work). Never rejects.
 */
export async function withTlsAnswer(err: unknown, context: StartupContext): Promise<StartupContext> {
  if (context.databaseUrl === undefined || !refusedTls(err, "ambiguous")) return context;
  try {
    const target = connectTarget(context.databaseUrl);
    const host = target.host ?? (target.url.includes("//") ? new URL(target.url).hostname : "");
    if (host === "" || host.includes("/")) return context;
    const port = target.port ?? (Number(new URL(target.url).port) || 5432);
    return { ...context, tlsRefused: !(await acceptsTls(host, port)) };
  } catch {
    return context;
  }
}

/** `host:port/database` (or the socket's path) of a postgres URL: enough to tell which database, never the password. */
function databaseName(context: StartupContext): string {
  if (context.databaseUrl === undefined) {
    return `the embedded PostgreSQL${context.dataDir ? ` in ${context.dataDir}` : ""}`;
  }
  const where = describeTarget(context.databaseUrl);
  return where === null ? "DATABASE_URL" : `${where} (DATABASE_URL)`;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}

const CONNECT_REASONS: Record<string, string> = {
  ECONNREFUSED: "connection refused, nothing listens there",
  ENOENT: "no socket there: PostgreSQL is not running, or the socket directory or port is wrong",
  ETIMEDOUT: "the connection timed out",
  CONNECT_TIMEOUT: "the connection timed out",
  ENOTFOUND: "the host name does not resolve",
  EAI_AGAIN: "the host name could not be resolved (DNS)",
  ECONNRESET: "the server closed the connection",
  CONNECTION_CLOSED: "the server closed the connection",
  "57P03": "the server is starting up or shutting down",
  "53300": "the server has no connection slots left",
};

/** What to print and which code to exit with, for an error that ended a start. */
export function describeStartupError(err: unknown, context: StartupContext = {}, stackLogged = false): StartupFailure {
  if (err instanceof ConfigError) {
    return { exitCode: EX_CONFIG, lines: err.lines.map((line) => `tracklane: ${line}`) };
  }

  // Errors written for people already (`EMULATOR_PORT: port 4010 ... is already in use; ...`).
  if (err instanceof Error && /^[A-Z][A-Z0-9_]+: /.test(err.message)) {
    return { exitCode: EX_FAILURE, lines: [`tracklane: ${oneLine(err.message)}`] };
  }

  const listen = findCode(err, ["EADDRINUSE", "EACCES", "EADDRNOTAVAIL"]);
  if (listen && (listen as { syscall?: unknown }).syscall === "listen") {
    // PORT's listener (the web's), unless another one says which variable chose its port.
    const [variable, configured] = err instanceof ListenFailedError ? [err.variable, err.port] : (["PORT", context.port] as const);
    const port = listen.port ?? configured;
    const host = listen.address ?? context.host;
    const where = `${host ?? "?"}:${port ?? "?"} (HOST=${context.host ?? host ?? "?"}, ${variable}=${configured ?? port ?? "?"})`;
    const other = typeof port === "number" && port > 0 && port < 65535 ? port + 1 : 8080;
    const line =
      listen.code === "EADDRINUSE"
        ? `cannot listen on ${where}: another process already uses that port; stop it or choose another port, e.g. ${variable}=${other}`
        : listen.code === "EACCES"
          ? `cannot listen on ${where}: permission denied (ports below 1024 need privileges); choose another port, e.g. ${variable}=${variable === "PORT" ? 8080 : 9464}`
          : `cannot listen on ${where}: no network interface of this machine has that address; e.g. HOST=0.0.0.0 (every interface) or HOST=127.0.0.1`;
    return { exitCode: EX_FAILURE, lines: [`tracklane: ${line}`] };
  }

  if (err instanceof ListenFailedError) {
    // HOST names no address (a typo): the listen's lookup failed, which is not the
    // database's, whatever its code says.
    const where = `${context.host ?? "?"}:${err.port} (HOST=${context.host ?? "?"}, ${err.variable}=${err.port})`;
    const lookup = findCode(err.cause, ["ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL"]);
    const why = lookup
      ? `HOST does not resolve to an address (${lookup.code})`
      : oneLine(err.cause instanceof Error ? err.cause.message : String(err.cause));
    return { exitCode: EX_FAILURE, lines: [`tracklane: cannot listen on ${where}: ${why}; e.g. HOST=0.0.0.0 (every interface) or HOST=127.0.0.1`] };
  }

  if (err instanceof MigrationsBehindError) {
    return {
      exitCode: EX_FAILURE,
      lines: [`tracklane: ${databaseName(context)} has the schema of an older release (this one needs migration ${NEWEST_MIGRATION}): run \`npm run migrate\` against it first (Procfile: release), then start again`],
    };
  }

  if (err instanceof RebuildFailedError) {
    // Why, as a failed start would say it (the database gone, say), without its prefix.
    const why = describeStartupError(err.cause, context, stackLogged).lines.map((l) => l.replace(/^tracklane: (failed to start: )?/, "")).join(" ");
    return {
      exitCode: EX_FAILURE,
      lines: [
        `tracklane: rebuild failed after ${err.done.orders} orders (${err.done.changed} changed): ${why}. Each order is re-derived whole or not at all, and those done are kept: run it again once that is fixed`,
      ],
    };
  }

  if (err instanceof MigrationFailedError) {
    return {
      exitCode: EX_FAILURE,
      lines: [
        `tracklane: migration ${err.tag ?? "(unknown)"} failed on ${databaseName(context)}: ${oneLine(err.reason)}; none of this run's migrations is applied (they run in one transaction): remove the cause, then run \`npm run migrate\` again`,
      ],
    };
  }

  if (err instanceof MigrationsSkippedError) {
    const files = err.tags.map((t) => `migrations/${t}.sql`).join(", ");
    return {
      exitCode: EX_FAILURE,
      lines: [
        `tracklane: ${databaseName(context)} lacks migration${err.tags.length > 1 ? "s" : ""} ${err.tags.join(", ")} of this release but has newer ones applied, so drizzle would never apply ${err.tags.length > 1 ? "them" : "it"}; nothing was migrated: apply ${files} by hand, record ${err.tags.length > 1 ? "each" : "it"} in drizzle.__drizzle_migrations (created_at: its "when" in migrations/meta/_journal.json), then run \`npm run migrate\` again`,
      ],
    };
  }

  if (err instanceof DateStyleError) {
    const order = /\bDMY\b/i.test(err.dateStyle) ? "DMY" : "MDY";
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: ${databaseName(context)} writes dates in the style "${err.dateStyle}" (its DateStyle); tracklane reads ISO dates only: run \`ALTER DATABASE <name> SET DateStyle = 'ISO, ${order}'\` (or set datestyle in postgresql.conf), then start again`,
      ],
    };
  }

  if (err instanceof TransactionPoolingError) {
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: ${databaseName(context)} is a connection pooler in transaction mode: one connection's statements ran in different server sessions, and tracklane needs each connection to stay one session (graphile-worker's prepared statements and LISTEN, advisory locks); use the pooler's session mode (PgBouncer: pool_mode = session) or connect to PostgreSQL directly, then start again`,
      ],
    };
  }

  if (err instanceof ReadPoolParameterError) {
    const where = context.databaseReadUrl === undefined ? null : describeTarget(context.databaseReadUrl);
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: ${where === null ? "DATABASE_READ_URL" : `${where} (DATABASE_READ_URL)`} refuses the startup parameter default_transaction_read_only, which the read pool sets (a pooler: PgBouncer refuses those it does not know); add it to the pooler's ignore_startup_parameters, or point DATABASE_READ_URL at the replica itself, then start again`,
      ],
    };
  }

  if (err instanceof NotOwnerError) {
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: ${databaseName(context)} is reached as ${err.login}, which neither owns tracklane's tables nor is a member of their owner, ${err.owner} (graphile-worker's tables admit their owner only, and the event log's partitions are made and dropped by it): log in as ${err.owner}, or run \`GRANT ${err.owner} TO ${err.login}\`, then start again`,
      ],
    };
  }

  if (err instanceof SearchPathError) {
    const finds = err.found === null ? "finds no order_events table" : `finds ${err.found}, not public.order_events`;
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: ${databaseName(context)} gives this login the search_path "${err.searchPath}", which ${finds}; tracklane's tables are in the public schema: run \`ALTER ROLE <user> IN DATABASE <name> SET search_path = public\` (or put public first), then start again`,
      ],
    };
  }

  if (err instanceof MigrationsMissingError) {
    return {
      exitCode: EX_FAILURE,
      lines: [`tracklane: ${databaseName(context)} has no tracklane tables yet: run \`npm run migrate\` against it first (Procfile: release), then start again`],
    };
  }

  const login = findCode(err, ["28P01", "28000", "3D000"]);
  if (login) {
    const what = login.code === "3D000" ? "that database does not exist; create it or fix the name" : "the server refused the login; check the user and password";
    return { exitCode: EX_FAILURE, lines: [`tracklane: could not connect to ${databaseName(context)}: ${what}`] };
  }

  if (refusedTls(err) && context.tlsRefused === false) {
    return {
      exitCode: EX_FAILURE,
      lines: [
        `tracklane: could not connect to the database at ${databaseName(context)}: the server accepts TLS but closed the connection during the handshake (restarting?); check that PostgreSQL runs there, then start again`,
      ],
    };
  }

  if (refusedTls(err)) {
    const mode = context.databaseUrl === undefined ? null : parseUrl(context.databaseUrl)?.searchParams.get("sslmode");
    return {
      exitCode: EX_CONFIG,
      lines: [
        `tracklane: could not connect to ${databaseName(context)}: the server does not accept TLS, and DATABASE_URL asks for it${mode ? ` (sslmode=${mode})` : ""}; turn on ssl in the server, or connect without TLS (sslmode=disable, or prefer to use TLS where the server offers it)`,
      ],
    };
  }

  if (isDatabaseUnavailable(err)) {
    const found = findCode(err, Object.keys(CONNECT_REASONS));
    if (found?.code === "53300") {
      // PostgreSQL is there and answered: the limit it names is what to change, not the URL.
      const limit = /for role/.test(found.message)
        ? "the role's CONNECTION LIMIT"
        : /for database/.test(found.message)
          ? "the database's CONNECTION LIMIT"
          : "max_connections";
      return {
        exitCode: EX_FAILURE,
        lines: [
          `tracklane: could not connect to the database at ${databaseName(context)}: ${CONNECT_REASONS["53300"]} (${oneLine(found.message)}); ${limit} is reached: lower DB_POOL_MAX or WORKER_CONCURRENCY of tracklane's processes (docs/operations.md, the connection budget) or raise that limit, then start again`,
        ],
      };
    }
    const reason = found ? CONNECT_REASONS[found.code]! : oneLine(err instanceof Error ? err.message : String(err));
    const hint = context.databaseUrl === undefined ? "see the log above for the embedded server" : "check that PostgreSQL runs there and that DATABASE_URL is right";
    return { exitCode: EX_FAILURE, lines: [`tracklane: could not connect to the database at ${databaseName(context)}: ${reason}; ${hint}`] };
  }

  const message = oneLine(err instanceof Error ? err.message : String(err)) || "unknown error";
  const more = stackLogged ? "" : " (LOG_LEVEL=debug logs the stack trace)";
  return { exitCode: EX_FAILURE, lines: [`tracklane: failed to start: ${message}${more}`] };
}

/**
 * Prints why the start failed (stderr, one line a problem) and returns the exit code. With
 * a logger at debug level the error itself, stack and all, is logged as well.
 */
export function reportStartupError(err: unknown, context: StartupContext = {}, log?: Logger): number {
  const debug = log !== undefined && log.isLevelEnabled("debug");
  if (debug) log.fatal({ err }, "tracklane failed to start");
  const failure = describeStartupError(err, context, debug);
  for (const line of failure.lines) console.error(line);
  return failure.exitCode;
}

/**
 * For entry points: the config, or why it cannot be loaded printed and the process ended.
 * tracklane's own processes take the defaults (reportStartupError: its problems one a
 * line, exit 78); the emulator passes its loader and its own report, which returns the
 * exit code (or throws what is not for it to report).
 */
export function loadConfigOrExit(): Config;
export function loadConfigOrExit<T>(load: () => T, report: (err: unknown) => number): T;
export function loadConfigOrExit<T>(load?: () => T, report: (err: unknown) => number = reportStartupError): T | Config {
  try {
    return load ? load() : loadConfig();
  } catch (err) {
    process.exit(report(err));
  }
}
