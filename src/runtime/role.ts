/**
 * `npm run web` and `npm run worker`: one role of the service in a process of its own, on
 * DATABASE_URL or the embedded server. Run any number of each (README, "Running many
 * processes").
 */
import { loadConfigOrExit } from "../config.ts";
import { createLogger } from "../logger.ts";
import { resolveDatabase } from "./database.ts";
import { configuredProvider } from "./provider.ts";
import { fatal, stopOnSignal } from "./lifecycle.ts";
import { startServices } from "./services.ts";

export function runRole(role: "web" | "worker"): void {
  const config = loadConfigOrExit();
  const log = createLogger({ level: config.logLevel });
  const main = async () => {
    const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
    const provider = configuredProvider(config, log);
    if (!provider) log.warn("PROVIDER_BASE_URL is not set: order commands and sandbox calls are unavailable");
    const services = await startServices({ config, databaseUrl: db.url, log, web: role === "web", worker: role === "worker", provider });
    if (role === "web") log.info({ url: services.http?.url }, "web listening");
    else log.info({ concurrency: config.worker.concurrency }, "worker running");
    stopOnSignal(log, async () => {
      await services.stop();
      await db.release();
    });
  };
  main().catch(fatal(log));
}
