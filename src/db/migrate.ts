import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { drizzle, migrate } from "./drizzle.ts";
import { runMigrations as runWorkerMigrations } from "graphile-worker";
import { createPool } from "./client.ts";
import type { Logger } from "../logger.ts";
import { graphileLogger } from "../worker/logger.ts";
import { requireOwnSessions } from "./pooler.ts";
import { workerConnectionString } from "./tls.ts";
import { MIGRATIONS, MigrationFailedError, MigrationsSkippedError, appliedMigrations, migrationPlan, requireIsoDateStyle } from "./ready.ts";

/** Arbitrary constant key of the advisory lock that serialises migrations. */
const MIGRATION_LOCK = 7_305_201_144;

/**
 * How long a migration waits for a table's lock (PostgreSQL's lock_timeout) before the run
 * gives up. A migration's ALTER waits for every transaction using the table, and every
 * statement on that table that comes after it waits behind it: without a bound, one session
 * left open (idle in a transaction, a long report, a backup's pg_dump) would hold every
 * callback and projection of the running release for as long as it stays open.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 10_000;

/** A session holding a lock on one of tracklane's tables: what a migration that gave up waited for. */
interface LockHolder {
  pid: number;
  application_name: string;
  state: string | null;
  /** When its transaction began (text: drizzle changes the pool's type parsers). */
  since: string;
  query: string;
}

/** Sessions of this database holding a lock on a table of its public schema, oldest transaction first (this one left out). */
async function lockHolders(sql: ReturnType<typeof createPool>): Promise<LockHolder[]> {
  return await sql<LockHolder[]>`
    select a.pid, a.application_name, a.state, to_char(a.xact_start at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') as since, left(a.query, 120) as query
    from pg_stat_activity a
    where a.pid <> pg_backend_pid() and a.datname = current_database() and a.xact_start is not null
      and a.pid in (select l.pid from pg_locks l join pg_class c on c.oid = l.relation
                    where l.locktype = 'relation' and l.granted and c.relnamespace = 'public'::regnamespace)
    order by a.xact_start, a.pid
    limit 3`;
}

/** lock_not_available: a statement waited lock_timeout and was cancelled. */
const isLockTimeout = (err: unknown): boolean => err instanceof Error && (err.cause as { code?: unknown } | undefined)?.code === "55P03";

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/** The `created_at` of every migration drizzle's journal records (none before the first run). */
async function recordedMigrations(sql: ReturnType<typeof createPool>): Promise<number[]> {
  const [table] = await sql<{ exists: boolean }[]>`select to_regclass('drizzle.__drizzle_migrations') is not null as exists`;
  return table?.exists === true ? await appliedMigrations(sql) : [];
}

/**
 * drizzle's error for a failed statement says "Failed query:" and the whole statement, not
 * PostgreSQL's reason (its cause): the migration whose file holds the statement, and why.
 */
function failedMigration(err: unknown, holders: readonly LockHolder[] = []): unknown {
  if (!(err instanceof Error) || typeof (err as { query?: unknown }).query !== "string") return err;
  const query = (err as unknown as { query: string }).query;
  const tag = MIGRATIONS.find((m) => readFileSync(`${MIGRATIONS_FOLDER}/${m.tag}.sql`, "utf8").includes(query))?.tag ?? null;
  let cause = err.cause instanceof Error ? err.cause.message : String(err.cause ?? err.message);
  if (isLockTimeout(err)) {
    const who = holders.map((h) => `pid ${h.pid} (${h.application_name || "no application_name"}, ${h.state ?? "?"}, in a transaction since ${h.since}: ${h.query.replace(/\s+/g, " ")})`);
    cause = `${cause}: it waited ${MIGRATION_LOCK_TIMEOUT_MS / 1000} s for a table that another session holds${who.length > 0 ? `, ${who.join("; ")}` : ""} (callbacks and projections waited behind it meanwhile); end that transaction (or pg_terminate_backend(pid)), or run it again when it has ended`;
  }
  return new MigrationFailedError(tag, cause, err);
}

/**
 * Validates the constraints of tracklane's tables that a migration added NOT VALID, each in
 * a transaction of its own, after the migrations' transaction has committed. A migration
 * adds a constraint to a table that can be large NOT VALID (new rows are checked from its
 * commit; the ALTER's exclusive lock lasts no scan); VALIDATE then reads the existing rows
 * under a SHARE UPDATE EXCLUSIVE lock, which lets reads and writes go on. Rows that break
 * one (older data, or a change by hand) do not stop the upgrade: the constraint stays NOT
 * VALID, still guarding new rows, is named in a warning, and the next run tries again.
 */
async function validateConstraints(sql: ReturnType<typeof createPool>, log: Logger): Promise<void> {
  const pending = await sql<{ table: string; constraint: string }[]>`
    select c.relname as table, k.conname as constraint
    from pg_constraint k join pg_class c on c.oid = k.conrelid
    where not k.convalidated and c.relnamespace = 'public'::regnamespace
    order by c.relname, k.conname`;
  if (pending.length === 0) return;
  // A VALIDATE reads the whole table but holds up no read or write, so it needs no bound:
  // cut short by a statement_timeout the role or database sets (as some providers do), it
  // would fail this run and every later one, each deploy stopping after its migrations.
  // The pool is this run's one connection: the setting holds for the statements below.
  await sql`select set_config('statement_timeout', '0', false)`;
  for (const { table, constraint } of pending) {
    try {
      await sql`alter table ${sql(table)} validate constraint ${sql(constraint)}`;
      log.info({ table, constraint }, "constraint validated");
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code !== "23514" && code !== "23503" && code !== "55P03") throw err;
      log.warn(
        { table, constraint, reason: err instanceof Error ? err.message : String(err) },
        code === "55P03"
          ? `constraint ${constraint} of ${table} not validated yet: another session held the table; it guards new rows, and the next npm run migrate validates it`
          : `rows of ${table} break constraint ${constraint}, added by a migration: it guards new rows, but the existing ones are not changed; fix or remove them (docs/operations.md, "Constraints not validated"), and the next npm run migrate validates it`,
      );
    }
  }
}

/**
 * Applies tracklane's migrations and graphile-worker's schema. Safe to run from many
 * processes at once: both take an advisory lock (a second run waits, then finds nothing
 * to do). drizzle applies every pending migration in one transaction, so one that fails
 * leaves none of them applied and the next run starts from the same one. It applies only
 * migrations newer than the newest applied: one missing below that is refused here
 * (MigrationsSkippedError) rather than passed over, and a database a later release
 * migrated is said so.
 */
export async function runMigrations(url: string, log: Logger): Promise<void> {
  // drizzle's migrator takes no lock of its own: hold one on the same single connection
  // while it runs, so several processes starting together apply each migration once.
  // A pool of its own, closed at the end: drizzle reconfigures the type parsers of the
  // pool it is given.
  // Through a pooler in transaction mode the lock below could be taken in one server
  // session and let go in another, left held for the next run to wait on for ever.
  await requireOwnSessions(url);
  const sql = createPool(url, 1, "tracklane-migrate");
  let pending: string[];
  try {
    // Before anything changes: a database that writes non-ISO dates is refused, naming the
    // setting, rather than migrated and then failing on the first date it gives back.
    await requireIsoDateStyle(sql);
    const [free] = await sql<{ locked: boolean }[]>`select pg_try_advisory_lock(${MIGRATION_LOCK}) as locked`;
    if (free?.locked !== true) {
      log.info("another npm run migrate (or npm start) is migrating this database: waiting for it to finish");
      await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    }
    const recorded = await recordedMigrations(sql);
    const plan = migrationPlan(MIGRATIONS, recorded);
    if (plan.skipped.length > 0) throw new MigrationsSkippedError(plan.skipped);
    // What drizzle is about to apply: every migration newer than the newest applied.
    const newest = recorded.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);
    pending = MIGRATIONS.filter((m) => m.when > newest).map((m) => m.tag);
    if (plan.unknown > 0) {
      log.warn(
        { unknown: plan.unknown, newest: MIGRATIONS.at(-1)?.tag },
        `the database has ${plan.unknown} migration(s) newer than this release (a later release applied them): none applied or undone; this release runs on that schema only as far as the later one kept it compatible`,
      );
    }
    // Set once the advisory lock is held (lock_timeout bounds that wait too), for this session.
    await sql`select set_config('lock_timeout', ${`${MIGRATION_LOCK_TIMEOUT_MS}ms`}, false)`;
    // The migrations create their tables unqualified and name some as "public"."orders"
    // (frozen): under a search_path that puts another schema first (a role's own, as
    // `"$user", public` finds when a schema of the role's name exists, or one set with
    // ALTER ROLE ... SET search_path), 0000 failed on "public.orders does not exist", and a
    // later migration would put its tables beside the others where no query finds them.
    await sql`select set_config('search_path', 'public', false)`;
    await migrate(drizzle(sql, { casing: "snake_case" }), { migrationsFolder: MIGRATIONS_FOLDER }).catch(async (err: unknown) => {
      throw failedMigration(err, isLockTimeout(err) ? await lockHolders(sql).catch(() => []) : []);
    });
    await validateConstraints(sql, log);
    await runWorkerMigrations({ connectionString: await workerConnectionString(url), logger: graphileLogger(log) });
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  // Said apart, so that a deploy's log shows whether it changed the schema (a second run at once finds nothing to do).
  if (pending.length > 0) log.info({ applied: pending }, "migrations applied");
  else log.info({ newest: MIGRATIONS.at(-1)?.tag }, "migrations: nothing to apply, the database is up to date");
}
