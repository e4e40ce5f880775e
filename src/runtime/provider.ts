/**
 * The provider tracklane talks to: the configured one, or (all-in-one `npm start` with no
 * PROVIDER_BASE_URL) the built-in emulator, started in-process in staging with fresh
 * credentials and tracklane's callback URL registered, on EMULATOR_PORT, keeping its
 * state under DATA_DIR/emulator/ so orders and their track_urls outlive a restart.
 */
import { randomBytes } from "node:crypto";
import type { Config } from "../config.ts";
import { startEmulator } from "../emulator/server.ts";
import type { RunningEmulator } from "../emulator/server.ts";
import type { Logger } from "../logger.ts";
import { createProviderClient } from "../provider/client.ts";
import type { ProviderClient } from "../provider/client.ts";

/** The configured provider's client, or undefined when PROVIDER_BASE_URL is unset. */
export function configuredProvider(config: Config, log: Logger): ProviderClient | undefined {
  const { baseUrl, gatewayUrl, auth, timeoutMs, paths } = config.provider;
  if (baseUrl === undefined || auth === undefined) return undefined;
  // The client names itself in its lines (component: "provider"); a child here wrote the key twice.
  return createProviderClient({ baseUrl, gatewayUrl: gatewayUrl ?? baseUrl, auth, timeoutMs, paths, logger: log });
}

/** The product the built-in emulator plays (token auth). */
export const BUILT_IN_PRODUCT = "hyperlocal_dedicated_store" as const;

export interface BuiltInProvider {
  client: ProviderClient;
  emulator: RunningEmulator;
  /** Registers tracklane's callback URL with the emulator. */
  register(callbackUrl: string): void;
}

export async function startBuiltInEmulator(config: Config, log: Logger): Promise<BuiltInProvider> {
  const token = randomBytes(18).toString("base64url");
  const emulator = await startEmulator({
    // A fixed port: saved track_urls name it, and so does the database's view of the provider.
    port: config.emulatorPort,
    dataDir: config.dataDir,
    tokens: [token],
    product: BUILT_IN_PRODUCT,
    env: "staging",
    paths: config.provider.paths,
    // The emulator names itself in its lines (component: "emulator"); a child here wrote the key twice.
    logger: log,
  });
  const client = createProviderClient({
    baseUrl: emulator.url,
    gatewayUrl: emulator.url,
    auth: { method: "token", token },
    timeoutMs: config.provider.timeoutMs,
    paths: config.provider.paths,
    logger: log,
  });
  return {
    client,
    emulator,
    register(callbackUrl) {
      emulator.emulator.state.callbackUrls = [callbackUrl];
      emulator.emulator.stateChanged();
    },
  };
}
