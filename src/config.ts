/**
 * The only reader of process.env. Each entry point calls `loadConfig()` once; everything
 * else receives the parsed `Config`. A `.env` file in the working directory is read too
 * (variables already set in the environment win).
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { PRODUCTS, chooseAuthMethod } from "./provider/products.ts";
import type { ProviderAuthConfig } from "./provider/client.ts";
import type { AuthMethod, Product } from "./provider/products.ts";

type Env = Record<string, string | undefined>;

const emptyToUndefined = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);
const optionalString = z.preprocess(emptyToUndefined, z.string().optional());
const url = z.preprocess(
  emptyToUndefined,
  z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
);
const port = (fallback: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(65535).default(fallback));
const positiveInt = (fallback: number, max: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(1).max(max).default(fallback));
const secret = z.preprocess(
  emptyToUndefined,
  z.string().min(16, "must be at least 16 characters").regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces").optional(),
);
const flag = (fallback: boolean) =>
  z.preprocess(
    emptyToUndefined,
    z
      .enum(["true", "false"], { error: 'must be "true" or "false"' })
      .default(fallback ? "true" : "false")
      .transform((v) => v === "true"),
  );
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
const httpTimeout = (fallback: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(100).max(3_600_000).default(fallback));

const envSchema = z.object({
  DATABASE_URL: z.preprocess(
    emptyToUndefined,
    z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL").optional(),
  ),
  PORT: port(3000),
  HOST: z.preprocess(emptyToUndefined, z.string().default("0.0.0.0")),
  PUBLIC_URL: url,
  API_TOKEN: secret,
  CALLBACK_SECRET: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .min(16, "must be at least 16 characters")
      .regex(/^[A-Za-z0-9._~-]+$/, "must use only URL-safe characters (A-Z a-z 0-9 . _ ~ -)")
      .optional(),
  ),
  LOG_LEVEL: z.preprocess(emptyToUndefined, z.enum(LOG_LEVELS).default("info")),
  PROVIDER_ENV: z.preprocess(emptyToUndefined, z.enum(["staging", "production"]).default("staging")),
  PROVIDER_PRODUCT: z.preprocess(emptyToUndefined, z.enum(PRODUCTS).default("hyperlocal_dedicated_store")),
  PROVIDER_BASE_URL: url,
  PROVIDER_GATEWAY_URL: url,
  PROVIDER_TOKEN: optionalString,
  PROVIDER_CLIENT_ID: optionalString,
  PROVIDER_CLIENT_SECRET: optionalString,
  PROVIDER_TIMEOUT_MS: positiveInt(10_000, 120_000),
  AWB_POOL_LOW_WATERMARK: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(100_000).default(100)),
  AWB_POOL_TARGET: positiveInt(500, 1_000_000),
  AWB_MODE: z.preprocess(emptyToUndefined, z.enum(["pool", "fresh"]).default("pool")),
  DATA_DIR: z.preprocess(emptyToUndefined, z.string().default(".data")),
  // Jobs at once per worker process (provider commands, AWB top-ups). Projection needs
  // one: each process runs one drain loop and folds further drain jobs into it
  // (src/projection/queue.ts).
  WORKER_CONCURRENCY: positiveInt(8, 64),
  /**
   * While the projection keeps up, it lets events gather this long between its batches
   * instead of paying a transaction for every handful (src/projection/queue.ts): the
   * most it adds to projection lag. 0: project as soon as events arrive.
   */
  PROJECTION_INTERVAL_MS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(10_000).default(50)),
  INGEST_BATCH_MAX: positiveInt(256, 5000),
  INGEST_BATCH_WAIT_MS: z.preprocess(emptyToUndefined, z.coerce.number().min(0).max(1000).default(2)),
  DB_POOL_MAX: positiveInt(10, 200),
  COMMAND_MAX_ATTEMPTS: positiveInt(20, 100),
  COMMAND_RETRY_BASE_MS: positiveInt(2000, 600_000),
  /** Slow clients: the whole request (headers and body) must arrive within this; else 408 and close. */
  HTTP_REQUEST_TIMEOUT_MS: httpTimeout(30_000),
  /** ...and its headers within this (at most HTTP_REQUEST_TIMEOUT_MS). */
  HTTP_HEADERS_TIMEOUT_MS: httpTimeout(10_000),
  /** The provider refuses a repeated client_order_id, so a place whose outcome is unknown may be sent again. */
  PROVIDER_DEDUPES_ORDERS: flag(false),
  /** Zone of provider times that carry no offset ("2026-11-23 14:05:00"). */
  PROVIDER_TIMEZONE: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .refine(isTimeZone, { error: "must be an IANA time zone name, e.g. Asia/Kolkata or UTC" })
      .default("UTC"),
  ),
  /** Poll the provider for active orders silent this long (minutes, fractions allowed); 0 turns it off. */
  RECONCILE_AFTER_MIN: z.preprocess(emptyToUndefined, z.coerce.number().min(0).max(10_080).default(15)),
});

/** Whether Intl knows this IANA zone name (the only zones tracklane accepts). */
function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export interface ProviderConfig {
  env: "staging" | "production";
  product: Product;
  /** Unset: tracklane starts the built-in emulator (all-in-one `npm start` only). */
  baseUrl: string | undefined;
  gatewayUrl: string | undefined;
  auth: ProviderAuthConfig | undefined;
  timeoutMs: number;
  /** The provider refuses a repeated client_order_id (PROVIDER_DEDUPES_ORDERS). */
  dedupesOrders: boolean;
  /** IANA zone of provider times without an offset. */
  timezone: string;
  /** Minutes of silence before an active order's status is polled; 0: never. */
  reconcileAfterMin: number;
}

export interface Config {
  databaseUrl: string | undefined;
  port: number;
  host: string;
  publicUrl: string;
  apiToken: string;
  callbackSecret: string;
  /** Where each secret came from, printed at start (never the secret itself). */
  secretSources: { apiToken: string; callbackSecret: string };
  logLevel: (typeof LOG_LEVELS)[number];
  dataDir: string;
  provider: ProviderConfig;
  awb: { lowWatermark: number; target: number; mode: "pool" | "fresh" };
  worker: { concurrency: number };
  projection: { intervalMs: number };
  ingest: { batchMax: number; batchWaitMs: number };
  db: { poolMax: number };
  /** Provider calls for order commands: attempts, and the first retry delay (doubling, capped at 10 min). */
  commands: { maxAttempts: number; retryBaseMs: number };
  /** Node server timeouts for slow clients (src/http/server.ts). */
  http: { requestTimeoutMs: number; headersTimeoutMs: number };
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

/** Reads `.env` into process.env without overriding what is set. */
function loadDotEnv(): void {
  if (existsSync(".env")) process.loadEnvFile(".env");
}

function parseEnv(env: Env): z.infer<typeof envSchema> {
  const parsed = envSchema.safeParse(env);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((issue) => `${issue.path.join(".") || "environment"}: ${issue.message}`),
  );
}

function providerConfig(e: z.infer<typeof envSchema>): ProviderConfig {
  const hasToken = e.PROVIDER_TOKEN !== undefined;
  const hasOAuth = e.PROVIDER_CLIENT_ID !== undefined || e.PROVIDER_CLIENT_SECRET !== undefined;
  const problems: string[] = [];
  if (hasOAuth && (e.PROVIDER_CLIENT_ID === undefined || e.PROVIDER_CLIENT_SECRET === undefined)) {
    problems.push("PROVIDER_CLIENT_ID / PROVIDER_CLIENT_SECRET: set both or neither");
  }
  if (e.PROVIDER_GATEWAY_URL !== undefined && e.PROVIDER_BASE_URL === undefined) {
    problems.push("PROVIDER_GATEWAY_URL: needs PROVIDER_BASE_URL as well");
  }
  let auth: ProviderAuthConfig | undefined;
  if (e.PROVIDER_BASE_URL !== undefined) {
    const choice = chooseAuthMethod(e.PROVIDER_PRODUCT, { token: hasToken, oauth: hasOAuth });
    if (!choice.ok) problems.push(`PROVIDER_PRODUCT: ${choice.message}`);
    else auth = authFor(choice.method, e);
  } else if (hasToken || hasOAuth) {
    problems.push("PROVIDER_BASE_URL: provider credentials are set but the provider URL is not");
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    env: e.PROVIDER_ENV,
    product: e.PROVIDER_PRODUCT,
    baseUrl: e.PROVIDER_BASE_URL,
    gatewayUrl: e.PROVIDER_GATEWAY_URL ?? e.PROVIDER_BASE_URL,
    auth,
    timeoutMs: e.PROVIDER_TIMEOUT_MS,
    dedupesOrders: e.PROVIDER_DEDUPES_ORDERS,
    timezone: e.PROVIDER_TIMEZONE,
    reconcileAfterMin: e.RECONCILE_AFTER_MIN,
  };
}

function authFor(method: AuthMethod, e: z.infer<typeof envSchema>): ProviderAuthConfig {
  if (method === "token") return { method, token: e.PROVIDER_TOKEN ?? "" };
  return {
    method,
    clientId: e.PROVIDER_CLIENT_ID ?? "",
    clientSecret: e.PROVIDER_CLIENT_SECRET ?? "",
    product: e.PROVIDER_PRODUCT,
  };
}

/**
 * A secret from the environment, or the one generated on an earlier start and kept in
 * `<dataDir>/<file>` (mode 0600), or a new one written there.
 */
function resolveSecret(value: string | undefined, dataDir: string, file: string, envName: string) {
  if (value !== undefined) return { value, source: `environment (${envName})` };
  const path = join(dataDir, file);
  if (existsSync(path)) {
    const stored = readFileSync(path, "utf8").trim();
    if (stored.length >= 16) return { value: stored, source: `generated, stored in ${path}` };
  }
  mkdirSync(dataDir, { recursive: true });
  const generated = randomBytes(24).toString("base64url");
  writeFileSync(path, `${generated}\n`, { mode: 0o600 });
  return { value: generated, source: `generated, stored in ${path}` };
}

/**
 * Parses and validates the environment. Throws ConfigError with one line per bad
 * variable. Generates the API token and callback secret under DATA_DIR when unset.
 */
export function loadConfig(env: Env = readProcessEnv()): Config {
  const e = parseEnv(env);
  const problems: string[] = [];
  if (e.AWB_POOL_LOW_WATERMARK > e.AWB_POOL_TARGET) {
    problems.push("AWB_POOL_LOW_WATERMARK: must not be greater than AWB_POOL_TARGET");
  }
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    problems.push("HTTP_HEADERS_TIMEOUT_MS: must not be greater than HTTP_REQUEST_TIMEOUT_MS");
  }
  let provider: ProviderConfig | undefined;
  try {
    provider = providerConfig(e);
  } catch (err) {
    if (err instanceof ConfigError) problems.push(...err.problems);
    else throw err;
  }
  if (problems.length > 0 || provider === undefined) throw new ConfigError(problems);

  const dataDir = resolve(e.DATA_DIR);
  const apiToken = resolveSecret(e.API_TOKEN, dataDir, "api-token", "API_TOKEN");
  const callbackSecret = resolveSecret(e.CALLBACK_SECRET, dataDir, "callback-secret", "CALLBACK_SECRET");
  return {
    databaseUrl: e.DATABASE_URL,
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL ?? `http://127.0.0.1:${e.PORT}`,
    apiToken: apiToken.value,
    callbackSecret: callbackSecret.value,
    secretSources: { apiToken: apiToken.source, callbackSecret: callbackSecret.source },
    logLevel: e.LOG_LEVEL,
    dataDir,
    provider,
    awb: { lowWatermark: e.AWB_POOL_LOW_WATERMARK, target: e.AWB_POOL_TARGET, mode: e.AWB_MODE },
    worker: { concurrency: e.WORKER_CONCURRENCY },
    projection: { intervalMs: e.PROJECTION_INTERVAL_MS },
    ingest: { batchMax: e.INGEST_BATCH_MAX, batchWaitMs: e.INGEST_BATCH_WAIT_MS },
    db: { poolMax: e.DB_POOL_MAX },
    commands: { maxAttempts: e.COMMAND_MAX_ATTEMPTS, retryBaseMs: e.COMMAND_RETRY_BASE_MS },
    http: { requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS, headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS },
  };
}

function readProcessEnv(): Env {
  loadDotEnv();
  return process.env;
}

/**
 * For entry points: the config, or the problems printed one per line and exit 1.
 */
export function loadConfigOrExit(env?: Env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`tracklane: ${err.message}`);
      process.exit(1);
    }
    throw err;
  }
}

const emulatorSchema = z.object({
  EMULATOR_PORT: port(4010),
  EMULATOR_HOST: z.preprocess(emptyToUndefined, z.string().default("127.0.0.1")),
  LOG_LEVEL: z.preprocess(emptyToUndefined, z.enum(LOG_LEVELS).default("info")),
  EMULATOR_TOKEN: z.preprocess(emptyToUndefined, z.string().default("emulator-token")),
  EMULATOR_CLIENT_ID: z.preprocess(emptyToUndefined, z.string().default("emulator-client")),
  EMULATOR_CLIENT_SECRET: z.preprocess(emptyToUndefined, z.string().default("emulator-secret")),
  EMULATOR_PRODUCT: z.preprocess(emptyToUndefined, z.enum(PRODUCTS).default("hyperlocal_dedicated_store")),
  EMULATOR_ENV: z.preprocess(emptyToUndefined, z.enum(["staging", "production"]).default("staging")),
  /** true: behave like the real provider is reported to (the emulator's realistic preset), not like its spec. */
  EMULATOR_REALISTIC: flag(false),
});

export interface EmulatorConfig {
  port: number;
  host: string;
  logLevel: (typeof LOG_LEVELS)[number];
  token: string;
  clientId: string;
  clientSecret: string;
  product: Product;
  env: "staging" | "production";
  /** Start with the realistic behaviour preset (EMULATOR_REALISTIC). */
  realistic: boolean;
}

/** Settings of the standalone emulator (`npm run emulator`). */
export function loadEmulatorConfig(env: Env = readProcessEnv()): EmulatorConfig {
  const parsed = emulatorSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`));
  }
  const e = parsed.data;
  return {
    port: e.EMULATOR_PORT,
    host: e.EMULATOR_HOST,
    logLevel: e.LOG_LEVEL,
    token: e.EMULATOR_TOKEN,
    clientId: e.EMULATOR_CLIENT_ID,
    clientSecret: e.EMULATOR_CLIENT_SECRET,
    product: e.EMULATOR_PRODUCT,
    env: e.EMULATOR_ENV,
    realistic: e.EMULATOR_REALISTIC,
  };
}
