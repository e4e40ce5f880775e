/**
 * `npm start`: everything in one process. Embedded PostgreSQL when DATABASE_URL is unset,
 * migrations, the HTTP server and the worker.
 */
import { loadConfigOrExit } from "./config.ts";
import { runMigrations } from "./db/migrate.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal, stopOnSignal } from "./runtime/lifecycle.ts";
import { startServices } from "./runtime/services.ts";

const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel });

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  await runMigrations(db.url, log);
  const services = await startServices({ config, databaseUrl: db.url, log, web: true, worker: true });
  const url = services.http!.url;
  // A generated secret already sits in a plain file under .data/ (a local setup): show the
  // full URL to register. A secret from the environment is never printed.
  const secretShown = config.secretSources.callbackSecret.startsWith("generated") ? config.callbackSecret : "<CALLBACK_SECRET>";
  stopOnSignal(log, async () => {
    await services.stop();
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
      `  API token:       ${config.secretSources.apiToken}`,
      `  callback secret: ${config.secretSources.callbackSecret}`,
      "",
    ].join("\n"),
  );
}

main().catch(fatal(log));
