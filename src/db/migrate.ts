import { fileURLToPath } from "node:url";
import { drizzle, migrate } from "./drizzle.ts";
import { runMigrations as runWorkerMigrations } from "graphile-worker";
import { createPool } from "./client.ts";
import type { Logger } from "../logger.ts";
import { graphileLogger } from "../worker/logger.ts";

/** Arbitrary constant key of the advisory lock that serialises migrations. */
const MIGRATION_LOCK = 7_305_201_144;

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/**
 * Applies tracklane's migrations and graphile-worker's schema. Safe to run from many
 * processes at once: both take an advisory lock.
 */
export async function runMigrations(url: string, log: Logger): Promise<void> {
  // drizzle's migrator takes no lock of its own: hold one on the same single connection
  // while it runs, so several processes starting together apply each migration once.
  // A pool of its own, closed at the end: drizzle reconfigures the type parsers of the
  // pool it is given.
  const sql = createPool(url, 1, "tracklane-migrate");
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(drizzle(sql, { casing: "snake_case" }), { migrationsFolder: MIGRATIONS_FOLDER });
    await runWorkerMigrations({ connectionString: url, logger: graphileLogger(log) });
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  log.info("migrations applied");
}
