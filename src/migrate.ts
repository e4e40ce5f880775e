/** Procfile `release` / `npm run migrate`: applies all migrations, then exits. */
import { loadConfigOrExit } from "./config.ts";
import { runMigrations } from "./db/migrate.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  try {
    await runMigrations(db.url, log);
  } finally {
    await db.release();
  }
  log.flush();
}

main().catch(fatal(log));
