/**
 * `npm run emulator`: the provider emulator alone (PRODUCT.md §9), for development against
 * a local tracklane or any other client. Settings come from config.ts (EMULATOR_*, DATA_DIR).
 * Its state is kept in DATA_DIR/emulator/state.json; `npm run emulator -- --reset` starts
 * from nothing (the saved state is deleted first).
 */
import { ConfigError, loadEmulatorConfig } from "../config.ts";
import { createLogger } from "../logger.ts";
import { resolvePaths } from "../provider/paths.ts";
import { PRODUCT_AUTH } from "../provider/products.ts";
import { commandLine } from "../runtime/cli.ts";
import { EX_CONFIG, loadConfigOrExit } from "../runtime/startup-errors.ts";
import { EmulatorPortInUseError, startEmulator } from "./server.ts";

const USAGE = `usage: npm run emulator [-- --reset]
  The provider emulator alone, on EMULATOR_HOST:EMULATOR_PORT (127.0.0.1:4010), its state in
  DATA_DIR/emulator/; --reset starts it empty. Settings: EMULATOR_* (docs/provider.md).`;

function parseFlags(): { reset: boolean } {
  return { reset: commandLine(USAGE, { reset: { type: "boolean" } }).reset === true };
}

/** A configuration problem: the problems as ConfigError lists them, exit 78 as tracklane's own programs; anything else is main's. */
function reportConfigError(err: unknown): number {
  if (!(err instanceof ConfigError)) throw err;
  console.error(err.message);
  return EX_CONFIG;
}

async function main(): Promise<void> {
  const flags = parseFlags();
  const config = loadConfigOrExit(loadEmulatorConfig, reportConfigError);
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
    dataDir: config.dataDir,
    resetSavedState: flags.reset,
    paths: config.paths,
    logger,
  });

  // Signals are handled before it says it is listening: a stop sent on that word must find
  // the handler, not the default action (an exit by the signal, not 0).
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

  // The credentials are the emulator's own test values, printed so a developer can use them.
  const mode = config.realistic ? "realistic" : "strict";
  console.log(`provider emulator listening on ${running.url} (${config.product}, ${config.env}, ${mode})`);
  console.log(`  base_url = gateway_url = ${running.url}`);
  if (support.token) console.log(`  token auth: Authorization: Token ${config.token}`);
  if (support.oauth) console.log(`  OAuth2: POST ${running.url}${resolvePaths(config.paths).oauthToken} as ${config.clientId}:${config.clientSecret}`);
  console.log(`  control: ${running.url}/__emulator/ (behaviour, callback-urls, orders, clock, faults, requests, reset)`);
  const orders = running.emulator.state.orders.size;
  console.log(`  state:   ${running.emulator.stateFile ?? "in memory"} (${flags.reset ? "reset" : `${orders} order${orders === 1 ? "" : "s"} restored`})`);
}

main().catch((err: unknown) => {
  // A busy port is the operator's to fix: the message says how, a stack would only bury it.
  console.error(err instanceof EmulatorPortInUseError ? err.message : err);
  process.exit(1);
});
