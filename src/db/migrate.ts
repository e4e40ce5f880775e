import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { drizzle, migrate } from "./drizzle.ts";
import { runMigrations as runWorkerMigrations } from "graphile-worker";
import { createPool } from "./client.ts";
import type { Logger } from "../logger.ts";
import { graphileLogger } from "../worker/logger.ts";
import { MIGRATIONS, MigrationFailedError, MigrationsSkippedError, appliedMigrations, migrationPlan } from "./ready.ts";

/** Arbitrary constant key of the advisory lock that serialises migrations. */
const MIGRATION_LOCK = 7_305_201_144;

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
function failedMigration(err: unknown): unknown {
  if (!(err instanceof Error) || typeof (err as { query?: unknown }).query !== "string") return err;
  const query = (err as unknown as { query: string }).query;
  const tag = MIGRATIONS.find((m) => readFileSync(`${MIGRATIONS_FOLDER}/${m.tag}.sql`, "utf8").includes(query))?.tag ?? null;
  const cause = err.cause instanceof Error ? err.cause.message : String(err.cause ?? err.message);
  return new MigrationFailedError(tag, cause, err);
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
  const sql = createPool(url, 1, "tracklane-migrate");
  try {
    const [free] = await sql<{ locked: boolean }[]>`select pg_try_advisory_lock(${MIGRATION_LOCK}) as locked`;
    if (free?.locked !== true) {
      log.info("another npm run migrate (or npm start) is migrating this database: waiting for it to finish");
      await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    }
    const plan = migrationPlan(MIGRATIONS, await recordedMigrations(sql));
    if (plan.skipped.length > 0) throw new MigrationsSkippedError(plan.skipped);
    if (plan.unknown > 0) {
      log.warn(
        { unknown: plan.unknown, newest: MIGRATIONS.at(-1)?.tag },
        `the database has ${plan.unknown} migration(s) newer than this release (a later release applied them): none applied or undone; this release runs on that schema only as far as the later one kept it compatible`,
      );
    }
    await migrate(drizzle(sql, { casing: "snake_case" }), { migrationsFolder: MIGRATIONS_FOLDER }).catch((err: unknown) => {
      throw failedMigration(err);
    });
    await runWorkerMigrations({ connectionString: url, logger: graphileLogger(log) });
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  log.info("migrations applied");
}
