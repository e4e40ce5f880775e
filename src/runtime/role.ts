/**
 * `npm run web` and `npm run worker`: one role of the service in a process of its own, on
 * DATABASE_URL or the embedded server. Run any number of each (README, "Running many
 * processes").
 */
import type { Config } from "../config.ts";
import { createLogger } from "../logger.ts";
import { resolveDatabase } from "./database.ts";
import { configuredProvider } from "./provider.ts";
import { fatal, stopOnSignal } from "./lifecycle.ts";
import { startServices } from "./services.ts";
import type { Services } from "./services.ts";
import { loadConfigOrExit, requireMigrations, requireReadPool } from "./startup-errors.ts";

/**
 * The ports this role will listen on, which an embedded PostgreSQL it starts must not take:
 * PORT for a web process, METRICS_PORT for a worker (0 picks a free one: nothing to avoid).
 */
export function listenPorts(role: "web" | "worker", config: Pick<Config, "port" | "metricsPort">): number[] {
  if (role === "web") return [config.port];
  return config.metricsPort ? [config.metricsPort] : [];
}

export function runRole(role: "web" | "worker"): void {
  const config = loadConfigOrExit();
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  const main = async () => {
    const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log, avoidPorts: listenPorts(role, config) });
    let services: Services;
    try {
      await requireMigrations(db.url);
      if (role === "web" && config.databaseReadUrl !== undefined) await requireReadPool(config.databaseReadUrl);
      const provider = configuredProvider(config, log);
      if (!provider) log.warn("PROVIDER_BASE_URL is not set: order commands and sandbox calls are unavailable");
      services = await startServices({ config, databaseUrl: db.url, log, web: role === "web", worker: role === "worker", provider });
    } catch (err) {
      // An embedded PostgreSQL this process started would otherwise outlive it.
      await db.release().catch(() => {});
      throw err;
    }
    // Signals are handled before the process says it is ready: a stop sent on that word
    // must find the handler, not the default action (an exit without the clean stop).
    stopOnSignal(log, async () => {
      await services.stop();
      await db.release();
    });
    if (role === "web") log.info({ url: services.http?.url }, "web listening");
    else log.info({ concurrency: config.worker.concurrency }, "worker running");
  };
  main().catch(fatal(log, config));
}
