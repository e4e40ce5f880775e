/**
 * `npm run emulator`: the provider emulator alone (PRODUCT.md §9), for development against
 * a local tracklane or any other client. Settings come from config.ts (EMULATOR_*).
 */
import { ConfigError, loadEmulatorConfig } from "../config.ts";
import { createLogger } from "../logger.ts";
import { PRODUCT_AUTH } from "../provider/products.ts";
import { startEmulator } from "./server.ts";

function loadConfigOrExit(): ReturnType<typeof loadEmulatorConfig> {
  try {
    return loadEmulatorConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    process.exit(1);
  }
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel });
  const support = PRODUCT_AUTH[config.product];
  const running = await startEmulator({
    port: config.port,
    host: config.host,
    tokens: [config.token],
    clients: [{ clientId: config.clientId, clientSecret: config.clientSecret }],
    product: config.product,
    env: config.env,
    behaviour: { realistic: config.realistic },
    logger,
  });

  // The credentials are the emulator's own test values, printed so a developer can use them.
  const mode = config.realistic ? "realistic" : "strict";
  console.log(`provider emulator listening on ${running.url} (${config.product}, ${config.env}, ${mode})`);
  console.log(`  base_url = gateway_url = ${running.url}`);
  if (support.token) console.log(`  token auth: Authorization: Token ${config.token}`);
  if (support.oauth) console.log(`  OAuth2: POST ${running.url}/oauth/token/ as ${config.clientId}:${config.clientSecret}`);
  console.log(`  control: ${running.url}/__emulator/ (behaviour, callback-urls, orders, clock, faults, requests, reset)`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "emulator stopping");
    void running.close().then(() => {
      logger.flush();
      process.exit(0);
    });
  };
  process.once("SIGINT", () => stop("SIGINT"));
  process.once("SIGTERM", () => stop("SIGTERM"));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
