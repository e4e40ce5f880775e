/**
 * `npm run web` and `npm run worker`: one role of the service in a process of its own, on
 * DATABASE_URL or the embedded server. Run any number of each (README, "Running many
 * processes").
 */
import { createPool } from "../db/client.ts";
import { migrationsApplied } from "../db/ready.ts";
import { createLogger } from "../logger.ts";
import { resolveDatabase } from "./database.ts";
import { configuredProvider } from "./provider.ts";
import { fatal, stopOnSignal } from "./lifecycle.ts";
import { startServices } from "./services.ts";
import type { Services } from "./services.ts";
import { MigrationsMissingError, loadConfigOrExit } from "./startup-errors.ts";

/**
 * These roles never migrate (`npm run migrate` does, once per release). Without the schema
 * a web process would answer 503 and a worker fail every job, for as long as they run:
 * refuse to start instead, saying what to run. Also the first contact with the database,
 * so a wrong DATABASE_URL stops the start here rather than failing every request.
 */
async function requireMigrations(url: string): Promise<void> {
  const sql = createPool(url, 1, "tracklane-startup-check");
  try {
    if (!(await migrationsApplied(sql))) throw new MigrationsMissingError();
  } finally {
    await sql.end({ timeout: 1 });
  }
}

export function runRole(role: "web" | "worker"): void {
  const config = loadConfigOrExit();
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  const main = async () => {
    const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log, avoidPorts: role === "web" ? [config.port] : [] });
    let services: Services;
    try {
      await requireMigrations(db.url);
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
