/** `npm run rebuild`: re-derives every order from the event log, then exits. */
import { createDatabase } from "./db/client.ts";
import { createLogger } from "./logger.ts";
import { rebuildAll } from "./projection/rebuild.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";
import { loadConfigOrExit } from "./runtime/startup-errors.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel, format: config.logFormat });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  const database = createDatabase(db.url, { max: 4, name: "tracklane-rebuild" });
  try {
    const result = await rebuildAll(database.sql, (done) => log.info({ done }, "rebuild progress"));
    log.info(result, "rebuild finished");
  } finally {
    await database.close();
    await db.release();
  }
  log.flush();
}

main().catch(fatal(log, config));
