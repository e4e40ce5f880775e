/** Procfile `worker`: graphile-worker jobs only. Run any number of them. */
import { loadConfigOrExit } from "./config.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { configuredProvider } from "./runtime/provider.ts";
import { fatal, stopOnSignal } from "./runtime/lifecycle.ts";
import { startServices } from "./runtime/services.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  const provider = configuredProvider(config, log);
  if (!provider) log.warn("PROVIDER_BASE_URL is not set: order commands and sandbox calls are unavailable");
  const services = await startServices({ config, databaseUrl: db.url, log, web: false, worker: true, provider });
  log.info({ concurrency: config.worker.concurrency }, "worker running");
  stopOnSignal(log, async () => {
    await services.stop();
    await db.release();
  });
}

main().catch(fatal(log));
