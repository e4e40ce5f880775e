/** Procfile `release` / `npm run migrate`: applies all migrations, then exits. */
import { runMigrations } from "./db/migrate.ts";
import { ensureEventPartitions } from "./events/partitions.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";
import { commandLine } from "./runtime/cli.ts";
import { loadConfigOrExit } from "./runtime/startup-errors.ts";

commandLine(`usage: npm run migrate
  Applies the pending migrations to DATABASE_URL (or the embedded PostgreSQL), then exits:
  Procfile \`release\`, once per deploy. Safe to run again, and from two places at once.
  It takes no arguments.`);
const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel, format: config.logFormat });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  try {
    await runMigrations(db.url, log);
    await ensureEventPartitions(db.url, config.events.partition, log);
  } finally {
    await db.release();
  }
  log.flush();
}

main().catch(fatal(log, config));
