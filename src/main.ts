/**
 * `npm start`: everything in one process. Embedded PostgreSQL when DATABASE_URL is unset,
 * migrations, the HTTP server and the worker.
 */
import { networkInterfaces } from "node:os";
import { runMigrations } from "./db/migrate.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { BUILT_IN_PRODUCT, configuredProvider, startBuiltInEmulator } from "./runtime/provider.ts";
import { fatal, stopOnSignal } from "./runtime/lifecycle.ts";
import { startServices } from "./runtime/services.ts";
import { commandLine } from "./runtime/cli.ts";
import { loadConfigOrExit, requireMigrations, requireReadPool } from "./runtime/startup-errors.ts";

commandLine(`usage: npm start
  Everything in one process: migrations, the HTTP server (callbacks, API, console) and the
  worker; an embedded PostgreSQL under DATA_DIR when DATABASE_URL is unset, and the provider
  emulator when PROVIDER_BASE_URL is. It takes no arguments: settings come from the
  environment and .env (.env.example lists them; docs/operations.md).`);
const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel, format: config.logFormat });

/**
 * Where this process answers. HOST 0.0.0.0 or :: listens on every interface: list the
 * machine's IPv4 addresses (loopback first), since "0.0.0.0" is no address to browse to.
 */
function listenLines(host: string, port: number): string[] {
  if (host === "0.0.0.0" || host === "::") {
    const addresses = Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .filter((a) => a.family === "IPv4")
      .sort((a, b) => Number(b.internal) - Number(a.internal))
      .map((a) => `                   http://${a.address}:${port}`);
    return [`  listening on:  every interface (HOST=${host}), port ${port}:`, ...addresses];
  }
  const shown = host.includes(":") ? `[${host}]` : host;
  return [`  listening on:  ${shown} port ${port} only (HOST=${host}): http://${shown}:${port}`];
}

/**
 * The configuration the services run with beside the built-in emulator: a staging
 * provider of its own product with token auth (runtime/provider.ts), its sandbox open,
 * whatever PROVIDER_ENV and PROVIDER_PRODUCT say; those are for the real provider, and a
 * warning says they are not used.
 */
function builtInProviderConfig(): typeof config {
  const ignored = [
    ...(config.provider.env !== "staging" ? [`PROVIDER_ENV=${config.provider.env}`] : []),
    ...(config.provider.product !== BUILT_IN_PRODUCT ? [`PROVIDER_PRODUCT=${config.provider.product}`] : []),
  ];
  if (ignored.length > 0) {
    log.warn({ ignored }, `the built-in emulator is a staging ${BUILT_IN_PRODUCT} provider: ${ignored.join(" and ")} apply to the real provider only (set PROVIDER_BASE_URL)`);
  }
  return { ...config, provider: { ...config.provider, env: "staging", product: BUILT_IN_PRODUCT } };
}

/**
 * Undone, last first, when the start fails: an embedded PostgreSQL this process started
 * would otherwise outlive it.
 */
const undoOnFailure: (() => Promise<void>)[] = [];

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log, avoidPorts: [config.port, config.emulatorPort] });
  undoOnFailure.push(() => db.release());
  await runMigrations(db.url, log);
  // What `npm run web` and `npm run worker` check at their start (migrate checked the
  // DateStyle; the search_path and the tables' owner, here).
  await requireMigrations(db.url);
  if (config.databaseReadUrl !== undefined) await requireReadPool(config.databaseReadUrl);
  // The log's partitions: made once, by startServices for the worker in this process.
  const builtIn = config.provider.baseUrl === undefined ? await startBuiltInEmulator(config, log) : undefined;
  if (builtIn) undoOnFailure.push(() => builtIn.emulator.close());
  const provider = builtIn?.client ?? configuredProvider(config, log);
  const services = await startServices({ config: builtIn ? builtInProviderConfig() : config, databaseUrl: db.url, log, web: true, worker: true, provider });
  const url = services.http!.url;
  // The emulator lives in this process: it reaches tracklane on loopback, whatever PUBLIC_URL says.
  builtIn?.register(`${url}/callbacks/${config.callbackSecret}`);
  // Signals are handled before the process says it is running (role.ts).
  stopOnSignal(log, async () => {
    await services.stop();
    if (builtIn) {
      await builtIn.emulator.close();
      log.info("emulator stopped");
    }
    // Last: everything above may still have needed it.
    await db.release();
  });
  log.info({ url }, "tracklane running");
  // A generated secret already sits in a plain file under .data/ (a local setup): show the
  // full URL to register. A secret from the environment is never printed.
  const secretShown = config.secretSources.callbackSecret.startsWith("generated") ? config.callbackSecret : "<CALLBACK_SECRET>";
  const port = Number(new URL(url).port || 80); // URL drops a default port
  // PORT=0 without PUBLIC_URL: the default public URL names port 0, not the one chosen.
  const publicUrl = config.publicUrl.endsWith(":0") ? url : config.publicUrl;
  console.log(
    [
      "",
      `tracklane is running`,
      ...listenLines(config.host, port),
      `  service:       ${url}`,
      `  API docs:      ${url}/docs  (OpenAPI: ${url}/openapi.json)`,
      `  metrics:       ${url}/metrics  (${config.metricsToken === undefined ? "open: set METRICS_TOKEN to require a bearer token" : "needs Authorization: Bearer <METRICS_TOKEN>"})`,
      `  callback URL:  ${publicUrl}/callbacks/${secretShown}   (register this with the provider)`,
      `  database:      ${db.description}`,
      builtIn
        ? `  provider:      built-in emulator at ${builtIn.emulator.url} (staging; set PROVIDER_BASE_URL for the real one)`
        : `  provider:      ${config.provider.baseUrl ?? "not configured"} (${config.provider.env})`,
      `  API token:       ${config.secretSources.apiToken}${config.apiTokenPrevious === undefined ? "" : "; API_TOKEN_PREVIOUS accepted too"}`,
      `  callback secret: ${config.secretSources.callbackSecret}${config.callbackSecretPrevious === undefined ? "" : "; CALLBACK_SECRET_PREVIOUS accepted too"}`,
      "",
    ].join("\n"),
  );
}

main().catch(async (err: unknown) => {
  for (const undo of undoOnFailure.reverse()) await undo().catch(() => {});
  fatal(log, config)(err);
});
