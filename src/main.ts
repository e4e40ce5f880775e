/**
 * `npm start`: everything in one process. Embedded PostgreSQL when DATABASE_URL is unset,
 * migrations, the HTTP server and the worker.
 */
import { loadConfigOrExit } from "./config.ts";
import { runMigrations } from "./db/migrate.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { configuredProvider, startBuiltInEmulator } from "./runtime/provider.ts";
import { fatal, stopOnSignal } from "./runtime/lifecycle.ts";
import { startServices } from "./runtime/services.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  await runMigrations(db.url, log);
  const builtIn = config.provider.baseUrl === undefined ? await startBuiltInEmulator(config, log) : undefined;
  const provider = builtIn?.client ?? configuredProvider(config, log);
  const services = await startServices({ config, databaseUrl: db.url, log, web: true, worker: true, provider });
  const url = services.http!.url;
  // The emulator lives in this process: it reaches tracklane on loopback, whatever PUBLIC_URL says.
  builtIn?.register(`${url}/callbacks/${config.callbackSecret}`);
  log.info({ url }, "tracklane running");
  // A generated secret already sits in a plain file under .data/ (a local setup): show the
  // full URL to register. A secret from the environment is never printed.
  const secretShown = config.secretSources.callbackSecret.startsWith("generated") ? config.callbackSecret : "<CALLBACK_SECRET>";
  stopOnSignal(log, async () => {
    await services.stop();
    if (builtIn) {
      await builtIn.emulator.close();
      log.info("emulator stopped");
    }
    // Last: everything above may still have needed it.
    await db.release();
  });
  console.log(
    [
      "",
      `tracklane is running`,
      `  service:       ${url}`,
      `  API docs:      ${url}/docs  (OpenAPI: ${url}/openapi.json)`,
      `  callback URL:  ${config.publicUrl}/callbacks/${secretShown}   (register this with the provider)`,
      `  database:      ${db.description}`,
      builtIn
        ? `  provider:      built-in emulator at ${builtIn.emulator.url} (staging; set PROVIDER_BASE_URL for the real one)`
        : `  provider:      ${config.provider.baseUrl ?? "not configured"} (${config.provider.env})`,
      `  API token:       ${config.secretSources.apiToken}`,
      `  callback secret: ${config.secretSources.callbackSecret}`,
      "",
    ].join("\n"),
  );
}

main().catch(fatal(log));
