import { fileURLToPath } from "node:url";
import { migrate } from "./drizzle.ts";
import { runMigrations as runWorkerMigrations } from "graphile-worker";
import { createDatabase } from "./client.ts";
import type { Logger } from "../logger.ts";
import { graphileLogger } from "../tasks/logger.ts";

/** Arbitrary constant key of the advisory lock that serialises migrations. */
const MIGRATION_LOCK = 7_305_201_144;

export const MIGRATIONS_FOLDER = fileURLToPath(new URL("../../migrations", import.meta.url));

/**
 * Applies tracklane's migrations and graphile-worker's schema. Safe to run from many
 * processes at once: both take an advisory lock.
 */
export async function runMigrations(url: string, log: Logger): Promise<void> {
  // drizzle's migrator takes no lock of its own: hold one (on the raw pool's single
  // connection) while it runs, so several processes starting together apply each
  // migration once.
  const { sql, db, close } = createDatabase(url, { max: 1, name: "tracklane-migrate" });
  try {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK})`;
    await migrate(db, { migrationsFolder: MIGRATIONS_FOLDER });
    await runWorkerMigrations({ connectionString: url, logger: graphileLogger(log) });
    await sql`select pg_advisory_unlock(${MIGRATION_LOCK})`;
  } finally {
    await close();
  }
  log.info("migrations applied");
}
