/** Procfile `worker`: graphile-worker jobs only. Run any number of them. */
import { loadConfigOrExit } from "./config.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal, stopOnSignal } from "./runtime/lifecycle.ts";
import { startServices } from "./runtime/services.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  const services = await startServices({ config, databaseUrl: db.url, log, web: false, worker: true });
  log.info({ concurrency: config.worker.concurrency }, "worker running");
  stopOnSignal(log, async () => {
    await services.stop();
    await db.release();
  });
}

main().catch(fatal(log));
