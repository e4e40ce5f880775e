/**
 * The only reader of process.env. Each entry point calls `loadConfig()` once; everything
 * else receives the parsed `Config`. A `.env` file in the working directory is read too
 * (variables already set in the environment win).
 */
import { randomBytes } from "node:crypto";
import { existsSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseEnv as parseEnvText } from "node:util";
import { z } from "zod";
import { connectTarget, parseUrl } from "./db/url.ts";
import { parseBlocks } from "./domain/addresses.ts";
import { headOf } from "./domain/text.ts";
import type { AddressBlock } from "./domain/addresses.ts";
import { isTimeZone } from "./domain/time-zones.ts";
import { parsePathOverrides } from "./provider/paths.ts";
import type { Paths } from "./provider/paths.ts";
import { PRODUCTS, PRODUCT_AUTH, chooseAuthMethod } from "./provider/products.ts";
import type { ProviderAuthConfig } from "./provider/client.ts";
import type { AuthMethod, Product } from "./provider/products.ts";

type Env = Record<string, string | undefined>;

const emptyToUndefined = (v: unknown) => (typeof v === "string" && v.trim() === "" ? undefined : v);
/**
 * PUBLIC_URL: the callback URL is it followed by `/callbacks/<secret>`, which a query or a
 * fragment would swallow; and it is printed at start, so no password in it.
 */
const publicUrl = z.preprocess(
  emptyToUndefined,
  z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .refine((u) => !/[?#]/.test(u), { error: "must have no ?query or #fragment: the callback URL is it followed by /callbacks/<secret>" })
    .refine((u) => !hasUserInfo(u), { error: "must not hold a user name or password (the callback URL is printed at start)" })
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
);
/**
 * The provider's addresses: fetch refuses a URL with a user name or password in it, so
 * every call would fail; credentials have variables of their own. Each call's path is
 * added at the end (src/provider/http.ts), so a query or fragment would swallow it.
 */
const providerUrl = z.preprocess(
  emptyToUndefined,
  z
    .url({ protocol: /^https?$/, error: "must be an http(s) URL" })
    .refine((u) => !hasUserInfo(u), {
      error: "must not hold a user name or password (no request can be sent to such a URL): put the provider's credentials in PROVIDER_TOKEN, or PROVIDER_CLIENT_ID and PROVIDER_CLIENT_SECRET",
    })
    .refine((u) => !/[?#]/.test(u), { error: "must have no ?query or #fragment: each call's path is added after it" })
    .transform((u) => u.replace(/\/+$/, ""))
    .optional(),
);
/** `scheme://user[:password]@host…`: read without parsing, so that a URL that does not parse is caught too. */
function hasUserInfo(value: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(value);
}
const port = (fallback: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(65535).default(fallback));
const positiveInt = (fallback: number, max: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(1).max(max).default(fallback));
const secret = z.preprocess(
  emptyToUndefined,
  z.string().min(16, "must be at least 16 characters").regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces").optional(),
);
/** It travels in the callback URL's path: URL-safe characters only. */
const urlSafeSecret = z.preprocess(
  emptyToUndefined,
  z
    .string()
    .min(16, "must be at least 16 characters")
    .regex(/^[A-Za-z0-9._~-]+$/, "must use only URL-safe characters (A-Z a-z 0-9 . _ ~ -)")
    .optional(),
);
const flag = (fallback: boolean) =>
  z.preprocess(
    emptyToUndefined,
    z
      .enum(["true", "false"], { error: 'must be "true" or "false"' })
      .default(fallback ? "true" : "false")
      .transform((v) => v === "true"),
  );
/**
 * PROVIDER_CLIENT_ID and PROVIDER_CLIENT_SECRET, sent as Basic credentials: a line break
 * (a `\r` from a file with Windows line endings) or a space at either end (pasted) would
 * be sent too, and every token exchange refused with 401.
 */
const oauthCredential = z.preprocess(
  emptyToUndefined,
  z
    .string()
    .regex(/^[^\s\p{Cc}](?:[^\p{Cc}]*[^\s\p{Cc}])?$/u, "must not hold a line break or other control character, nor spaces at either end")
    .optional(),
);
/**
 * HOST, DATA_DIR: a `\r` left by an env file with Windows line endings (`docker --env-file`
 * keeps it) made DATA_DIR another directory, silently: new secrets, a new embedded database.
 */
const oneLine = z.string().regex(/^\P{Cc}*$/u, "must not hold a line break or other control character");
const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
const LOG_FORMATS = ["pretty", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];
const httpTimeout = (fallback: number) =>
  z.preprocess(emptyToUndefined, z.coerce.number().int().min(100).max(3_600_000).default(fallback));

/** PROVIDER_PATHS and EMULATOR_PATHS: `name=/path,…` (src/provider/paths.ts), every problem in one line. */
const pathOverrides = z.preprocess(
  emptyToUndefined,
  z
    .string()
    .default("")
    .transform((raw, ctx) => {
      const { paths, problems } = parsePathOverrides(raw);
      if (problems.length === 0) return paths;
      ctx.addIssue({ code: "custom", message: problems.join("; "), input: raw }); // one line per variable
      return z.NEVER;
    }),
);

/** The most attempts, and the longest delay, NOTIFY_RETRY_SCHEDULE may give. */
const RETRY_SCHEDULE_MAX_ENTRIES = 50;
const RETRY_DELAY_MAX_S = 7 * 86_400;

/** "0,5,300" into [0, 5, 300]: whole seconds, 0 to a week each, 1 to 50 of them. */
function retrySchedule(raw: string, ctx: z.core.$RefinementCtx<string>): number[] {
  const parts = raw.split(",").map((p) => p.trim());
  const fail = (message: string) => {
    ctx.addIssue({ code: "custom", message, input: raw });
    return z.NEVER;
  };
  if (!parts.every((p) => /^\d+$/.test(p))) return fail("must be whole seconds separated by commas");
  const delays = parts.map(Number);
  if (delays.length > RETRY_SCHEDULE_MAX_ENTRIES) return fail(`must have at most ${RETRY_SCHEDULE_MAX_ENTRIES} delays`);
  if (delays.some((d) => d > RETRY_DELAY_MAX_S)) return fail(`each delay must be at most ${RETRY_DELAY_MAX_S} seconds`);
  return delays;
}

/**
 * A postgres:// URL as the pools read it (src/db/url.ts): a TCP host, or a Unix socket
 * directory as libpq spells it. The message never repeats the URL (it may hold a password).
 */
const postgresUrl = z.string().superRefine((value, ctx) => {
  const fail = (message: string) => ctx.addIssue({ code: "custom", message });
  try {
    connectTarget(value);
  } catch (err) {
    const { message } = err as Error;
    return fail(message === "is not a valid URL" ? `${message} (${PERCENT_ENCODE})` : message);
  }
  const url = parseUrl(value);
  if (url === null) return;
  // The drivers decode them (decodeURIComponent): a lone % stopped every start with "URI malformed".
  if (![url.username, url.password].every(decodes)) fail(`its user name or password holds a % that is not percent-encoding (${PERCENT_ENCODE})`);
  // postgres.js reads a mode it does not know (a typo: "required", "disabled") as verify-full.
  const sslmode = url.searchParams.get("sslmode");
  if (sslmode && !SSL_MODES.includes(sslmode)) fail(`its sslmode must be one of ${SSL_MODES.join(", ")}`);
});
const PERCENT_ENCODE = "in a user name or password write % as %25, # as %23, / as %2F, ? as %3F, @ as %40, : as %3A";
/** libpq's sslmode values, which both drivers read (src/db/tls.ts). */
const SSL_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"];
function decodes(part: string): boolean {
  try {
    decodeURIComponent(part);
    return true;
  } catch {
    return false;
  }
}

const envSchema = z.object({
  DATABASE_URL: z.preprocess(emptyToUndefined, postgresUrl.optional()),
  /**
   * Where the API's GETs and the console's pages read (a streaming replica of DATABASE_URL);
   * unset: they read DATABASE_URL like everything else (src/runtime/services.ts).
   */
  DATABASE_READ_URL: z.preprocess(emptyToUndefined, postgresUrl.optional()),
  PORT: port(3000),
  HOST: z.preprocess(emptyToUndefined, oneLine.default("0.0.0.0")),
  PUBLIC_URL: publicUrl,
  API_TOKEN: secret,
  /** The token API_TOKEN replaces, still accepted on /v1 while clients move (docs/operations.md). */
  API_TOKEN_PREVIOUS: secret,
  CALLBACK_SECRET: urlSafeSecret,
  /** The secret CALLBACK_SECRET replaces, still accepted on callbacks until the provider sends to the new URL. */
  CALLBACK_SECRET_PREVIOUS: urlSafeSecret,
  LOG_LEVEL: z.preprocess(emptyToUndefined, z.enum(LOG_LEVELS).default("info")),
  // No default here: unset means "decide by whether stdout is a terminal" (resolveLogFormat).
  LOG_FORMAT: z.preprocess(emptyToUndefined, z.enum(LOG_FORMATS).optional()),
  METRICS_TOKEN: secret,
  /** `npm run worker` only: serves /metrics, /healthz and /readyz here (0: any free port); unset: no HTTP. */
  METRICS_PORT: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(65535).optional()),
  PROVIDER_ENV: z.preprocess(emptyToUndefined, z.enum(["staging", "production"]).default("staging")),
  PROVIDER_PRODUCT: z.preprocess(emptyToUndefined, z.enum(PRODUCTS).default("hyperlocal_dedicated_store")),
  PROVIDER_BASE_URL: providerUrl,
  PROVIDER_GATEWAY_URL: providerUrl,
  /** Sent as `Authorization: Token <token>`: a space, line break or character beyond ASCII (pasted from an e-mail) could not be. */
  PROVIDER_TOKEN: z.preprocess(emptyToUndefined, z.string().regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces (it is sent in a header)").optional()),
  PROVIDER_CLIENT_ID: oauthCredential.refine((v) => v === undefined || !v.includes(":"), {
    error: "must not hold a colon (it is sent as the user name of Basic credentials, which ends at the first colon)",
  }),
  PROVIDER_CLIENT_SECRET: oauthCredential,
  /** 12 s: see DEFAULT_TIMEOUT_MS in src/provider/client.ts (above fetch's 10 s connect timeout). */
  PROVIDER_TIMEOUT_MS: positiveInt(12_000, 120_000),
  AWB_POOL_LOW_WATERMARK: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(100_000).default(100)),
  AWB_POOL_TARGET: positiveInt(500, 1_000_000),
  AWB_MODE: z.preprocess(emptyToUndefined, z.enum(["pool", "fresh"]).default("pool")),
  DATA_DIR: z.preprocess(emptyToUndefined, oneLine.default(".data")),
  /** The built-in emulator's port (`npm start` without PROVIDER_BASE_URL); taken as given, never moved. */
  EMULATOR_PORT: port(4010),
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
  /** The read pool's connections (a web process, with DATABASE_READ_URL only). */
  DB_READ_POOL_MAX: positiveInt(10, 200),
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
      .refine(isTimeZone, { error: "must be an IANA time zone name" })
      .default("UTC"),
  ),
  /** Provider paths other than the defaults (src/provider/paths.ts): `name=/path,…`. */
  PROVIDER_PATHS: pathOverrides,
  /** Poll the provider for active orders silent this long (minutes, fractions allowed); 0 turns it off. */
  RECONCILE_AFTER_MIN: z.preprocess(emptyToUndefined, z.coerce.number().min(0).max(10_080).default(15)),
  /** Delays before each notification attempt, in seconds: one entry per attempt, the first usually 0. */
  NOTIFY_RETRY_SCHEDULE: z.preprocess(emptyToUndefined, z.string().default("0,5,300,1800,7200,18000,36000,36000").transform(retrySchedule)),
  NOTIFY_TIMEOUT_MS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(100).max(120_000).default(10_000)),
  /** Endpoints on loopback, private, link-local or metadata addresses are refused unless this is true. */
  NOTIFY_ALLOW_PRIVATE_URLS: flag(false),
  /** At most one order.rider_location per order per this many seconds; 0: none sent. */
  NOTIFY_LOCATION_INTERVAL_S: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(86_400).default(30)),
  /** While the worker projects more events a second than this, deliveries wait (ingestion first); 0: they never wait. */
  NOTIFY_BURST_EVENTS_S: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(1_000_000).default(1000)),
  /** The longest a due delivery waits for a burst to pass, in seconds. */
  NOTIFY_BURST_MAX_WAIT_S: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(3600).default(60)),
  /** How long a console sign-in lasts, in hours. */
  CONSOLE_SESSION_HOURS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(1).max(720).default(12)),
  /**
   * The reverse proxies in front of tracklane (addresses and CIDR blocks, comma-separated):
   * from them alone X-Forwarded-For names the client (src/domain/addresses.ts). Unset: no one.
   */
  TRUSTED_PROXIES: z.preprocess(
    emptyToUndefined,
    z
      .string()
      .default("")
      .transform((raw, ctx) => {
        const { blocks, problems } = parseBlocks(raw);
        if (problems.length === 0) return blocks;
        ctx.addIssue({ code: "custom", message: problems.join("; "), input: raw }); // one line for the variable
        return z.NEVER;
      }),
  ),
  /** The console lists an active order as stuck after this many minutes without an event. */
  STUCK_AFTER_MIN: z.preprocess(emptyToUndefined, z.coerce.number().int().min(1).max(10_080).default(45)),
  /** Days rejected callbacks are kept; 0: forever. */
  REJECTED_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(30)),
  /** Days finished commands (other than places) are kept after they finished; 0: forever. */
  COMMAND_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(90)),
  /** Days notification attempts are kept; 0: forever. */
  NOTIFY_ATTEMPT_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(90)),
  /** Days notification messages (with their deliveries) are kept; 0: forever. */
  NOTIFY_MESSAGE_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(90)),
  /** Days after an order finished that its personal data is kept; 0: forever. */
  PII_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(90)),
  /** How many days one partition of the event log spans: a day, a week or a month. */
  EVENTS_PARTITION: z.preprocess(emptyToUndefined, z.enum(["day", "week", "month"]).default("month")),
  /** Days rider-location events are kept (counted from the order's first event); 0: forever. */
  LOCATION_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(30)),
  /** Days status events are kept (counted from the order's first event); 0: forever. */
  EVENT_RETENTION_DAYS: z.preprocess(emptyToUndefined, z.coerce.number().int().min(0).max(36_500).default(0)),
});

/** What a variable means and a value that works: for startup errors and `.env.example`. */
export interface EnvVarDoc {
  /** One line: what it does, and what unset means when that is not a plain default. */
  description: string;
  /** A good value, shown as `NAME=example` after a problem with the variable. */
  example: string;
  /** Holds a secret (or a password inside a URL): a bad value is never echoed back. */
  sensitive?: boolean;
}

/**
 * One entry per envSchema variable (a unit test keeps the two in step; `npm run
 * env:example` writes `.env.example` from both).
 */
export const ENV_DOCS: Readonly<Record<string, EnvVarDoc>> = {
  DATABASE_URL: {
    description:
      "PostgreSQL to use, over TCP or through a Unix socket directory as libpq spells it (postgres://user@/tracklane?host=/var/run/postgresql); unset: an embedded PostgreSQL under DATA_DIR/pg",
    example: "postgres://tracklane:change-me@db.internal:5432/tracklane",
    sensitive: true,
  },
  DATABASE_READ_URL: {
    description:
      "PostgreSQL the API's GET endpoints and the console's pages read from, e.g. a streaming replica of DATABASE_URL (needs DATABASE_URL); unset: DATABASE_URL",
    example: "postgres://tracklane_ro:change-me@db-replica.internal:5432/tracklane",
    sensitive: true,
  },
  PORT: { description: "HTTP port to listen on (0: any free port)", example: "8080" },
  HOST: {
    description: "address to listen on: 0.0.0.0 every IPv4 interface, :: every interface, 127.0.0.1 this machine only",
    example: "127.0.0.1",
  },
  PUBLIC_URL: {
    description: "how the provider reaches tracklane (the callback URL printed at start); unset: http://127.0.0.1:PORT",
    example: "https://tracking.example.com",
  },
  API_TOKEN: {
    description: "bearer token for /v1 (16+ printable characters, e.g. from `openssl rand -hex 24`); unset: generated once into DATA_DIR/api-token",
    example: "change-me-to-a-long-random-token",
    sensitive: true,
  },
  CALLBACK_SECRET: {
    description: "secret every provider callback must carry (16+ URL-safe characters); unset: generated once into DATA_DIR/callback-secret",
    example: "change-me-to-a-long-random-secret",
    sensitive: true,
  },
  API_TOKEN_PREVIOUS: {
    description:
      "the API token API_TOKEN replaces, still accepted on /v1 (not for console sign-in) while your systems move to the new one; unset it once they have",
    example: "the-token-being-replaced",
    sensitive: true,
  },
  CALLBACK_SECRET_PREVIOUS: {
    description:
      "the callback secret CALLBACK_SECRET replaces, still accepted until the provider sends to the new callback URL (tracklane_previous_secret_used_total stops growing); unset it then",
    example: "the-secret-being-replaced",
    sensitive: true,
  },
  LOG_LEVEL: { description: `least severe log level written: ${LOG_LEVELS.join(", ")}`, example: "debug" },
  LOG_FORMAT: {
    description: "pretty (readable lines) or json (one object a line, for log collectors); unset: pretty when stdout is a terminal, else json",
    example: "json",
  },
  METRICS_TOKEN: {
    description: "when set, GET /metrics needs Authorization: Bearer <METRICS_TOKEN> (16+ printable characters); unset: /metrics is open",
    example: "change-me-to-a-long-random-metrics-token",
    sensitive: true,
  },
  METRICS_PORT: {
    description:
      "npm run worker only: the port its own /metrics (its job, projection and notification counters), /healthz and /readyz listen on, at HOST (0: any free port); unset: a worker serves no HTTP",
    example: "9464",
  },
  PROVIDER_ENV: { description: "staging or production; sandbox calls are refused in production", example: "production" },
  PROVIDER_PRODUCT: { description: `the provider product this account uses: ${PRODUCTS.join(", ")}`, example: "hyperlocal_dedicated_store" },
  PROVIDER_BASE_URL: {
    description: "the provider's order and sandbox endpoints; unset: the built-in emulator (npm start only)",
    example: "https://api.provider.example",
  },
  PROVIDER_GATEWAY_URL: { description: "the provider's OAuth token and AWB endpoints; unset: PROVIDER_BASE_URL", example: "https://gateway.provider.example" },
  PROVIDER_TOKEN: { description: "static provider token (token auth, sent as Authorization: Token <token>): printable ASCII without spaces", example: "your-provider-token", sensitive: true },
  PROVIDER_CLIENT_ID: { description: "OAuth2 client id (set with PROVIDER_CLIENT_SECRET)", example: "your-client-id" },
  PROVIDER_CLIENT_SECRET: { description: "OAuth2 client secret (set with PROVIDER_CLIENT_ID)", example: "your-client-secret", sensitive: true },
  PROVIDER_TIMEOUT_MS: {
    description: "timeout of one provider call, in ms (1 to 120000); from 11000 up a connection never made is retried; below that a place that meets one becomes unconfirmed",
    example: "15000",
  },
  AWB_POOL_LOW_WATERMARK: { description: "top the AWB pool up when fewer than this many are available (at most AWB_POOL_TARGET)", example: "200" },
  AWB_POOL_TARGET: { description: "top the AWB pool up to this many", example: "1000" },
  AWB_MODE: { description: "pool (replenishment endpoint) or fresh (async request and poll)", example: "fresh" },
  DATA_DIR: { description: "where generated secrets and the embedded PostgreSQL live", example: "/var/lib/tracklane" },
  EMULATOR_PORT: {
    description: "port of the built-in emulator (npm start without PROVIDER_BASE_URL); never moved when taken",
    example: "4011",
  },
  WORKER_CONCURRENCY: { description: "jobs one worker process runs at once (1 to 64); notification delivery runs take at most this - 2 of them (at least 1)", example: "16" },
  PROJECTION_INTERVAL_MS: {
    description: "while the projection keeps up, how long events gather between its batches, in ms (0: project at once)",
    example: "0",
  },
  INGEST_BATCH_MAX: { description: "most callbacks committed in one transaction (1: no group commit)", example: "512" },
  INGEST_BATCH_WAIT_MS: { description: "how long a lone callback may wait for company before its commit, in ms (0 to 1000)", example: "5" },
  DB_POOL_MAX: { description: "connections of a process's pool (graphile-worker's own pool is sized by WORKER_CONCURRENCY)", example: "20" },
  DB_READ_POOL_MAX: { description: "connections of a web process's read pool on DATABASE_READ_URL (unused without it)", example: "20" },
  COMMAND_MAX_ATTEMPTS: { description: "provider attempts of an order command before it is failed", example: "10" },
  COMMAND_RETRY_BASE_MS: { description: "first retry delay of a command, in ms (doubling, capped at 10 min)", example: "5000" },
  HTTP_REQUEST_TIMEOUT_MS: { description: "time a client has to send a whole request, in ms; slower ones get 408", example: "60000" },
  HTTP_HEADERS_TIMEOUT_MS: { description: "time a client has to send its headers, in ms (at most HTTP_REQUEST_TIMEOUT_MS)", example: "5000" },
  PROVIDER_DEDUPES_ORDERS: {
    description: "true only if the provider refuses a repeated client_order_id: then a place whose outcome is unknown is sent again",
    example: "true",
  },
  PROVIDER_TIMEZONE: { description: "IANA time zone of provider times that carry no offset", example: "Asia/Kolkata" },
  PROVIDER_PATHS: {
    description: "provider paths other than the defaults, name=/path separated by commas (names: docs/provider.md); the built-in emulator serves them too",
    example: "oauthToken=/auth/token/,awbPool=/v2/clients/awb/generate/",
  },
  RECONCILE_AFTER_MIN: { description: "poll the provider for active orders silent this long, in minutes (0: never)", example: "30" },
  NOTIFY_RETRY_SCHEDULE: {
    description: "delays before each notification attempt, in seconds, comma-separated (one per attempt; then the delivery fails)",
    example: "0,10,60,600,3600",
  },
  NOTIFY_TIMEOUT_MS: { description: "timeout of one notification attempt, in ms (100 to 120000)", example: "5000" },
  NOTIFY_ALLOW_PRIVATE_URLS: { description: "true: allow notification endpoints on loopback, private, link-local and metadata addresses", example: "true" },
  NOTIFY_LOCATION_INTERVAL_S: { description: "at most one order.rider_location per order per this many seconds (0: none sent)", example: "60" },
  NOTIFY_BURST_EVENTS_S: {
    description: "while the worker projects more events a second than this, notification deliveries wait (0: never)",
    example: "5000",
  },
  NOTIFY_BURST_MAX_WAIT_S: { description: "the longest a due notification waits for a burst of callbacks to pass, in seconds", example: "30" },
  CONSOLE_SESSION_HOURS: { description: "how long a console sign-in lasts, in hours (1 to 720)", example: "8" },
  TRUSTED_PROXIES: {
    description:
      "reverse proxies in front of tracklane, addresses or CIDR blocks separated by commas: a request from one of them is from the client its X-Forwarded-For names (the console's sign-in limit and logs); unset: the socket's peer, X-Forwarded-For never read",
    example: "10.0.0.0/8,127.0.0.1",
  },
  STUCK_AFTER_MIN: { description: "the console lists an active order as stuck after this many minutes without an event", example: "60" },
  REJECTED_RETENTION_DAYS: { description: "days rejected callbacks are kept (0: forever)", example: "14" },
  COMMAND_RETENTION_DAYS: { description: "days finished commands other than places are kept (0: forever)", example: "30" },
  NOTIFY_ATTEMPT_RETENTION_DAYS: { description: "days notification attempts are kept (0: forever)", example: "30" },
  NOTIFY_MESSAGE_RETENTION_DAYS: { description: "days notification messages and their deliveries are kept (0: forever); a message still being delivered stays", example: "30" },
  PII_RETENTION_DAYS: {
    description: "days after an order finished that the customer's and rider's personal data is kept, then redacted (0: forever)",
    example: "30",
  },
  EVENTS_PARTITION: { description: "the stretch of days one partition of the event log spans: day, week or month", example: "week" },
  LOCATION_RETENTION_DAYS: {
    description: "days rider-location events are kept, counted from the order's first event (0: forever); they go a partition at a time",
    example: "14",
  },
  EVENT_RETENTION_DAYS: {
    description: "days status events are kept, counted from the order's first event (0: forever); they go a partition at a time",
    example: "730",
  },
};

/** A variable as the console's system page shows it: secrets never, passwords in URLs masked. */
export interface ShownSetting {
  name: string;
  /** The value set, "(hidden)" for a secret, or null when unset (the default applies). */
  value: string | null;
  default: string | undefined;
  description: string;
}

/** Every configuration variable, what this process was given for it, and its default. */
export function settingsShown(env: Env = readProcessEnv()): ShownSetting[] {
  return envVariables().map((v) => {
    const raw = env[v.name];
    const set = raw !== undefined && raw.trim() !== "";
    const value = !set ? null : v.sensitive === true ? (databaseUrlShown(raw) ?? "(hidden)") : raw;
    return { name: v.name, value, default: v.default, description: v.description };
  });
}

/** `postgres://user:secret@host/db?sslkey=…` → `postgres://user:***@host/db`; null for anything else. */
function databaseUrlShown(value: string): string | null {
  const url = parseUrl(value);
  if (url === null || (url.protocol !== "postgres:" && url.protocol !== "postgresql:")) return null;
  if (url.password !== "") url.password = "***";
  // Where it connects stays (a socket directory, a port, src/db/url.ts); every other
  // setting goes, a password or a key file's among them.
  const kept = [...url.searchParams].filter(([key]) => ["host", "port", "dbname", "user"].includes(key));
  url.search = new URLSearchParams(kept).toString();
  return url.toString();
}

/** A variable of the configuration, as `.env.example` lists it. */
export interface EnvVariable extends EnvVarDoc {
  name: string;
  /** As written in the environment; undefined when unset means something else (see description). */
  default: string | undefined;
}

/** Every envSchema variable in schema order, with its default (what the schema makes of "unset"). */
export function envVariables(): EnvVariable[] {
  return Object.entries(envSchema.shape).map(([name, schema]) => {
    const parsed = schema.safeParse(undefined);
    const value: unknown = parsed.success ? parsed.data : undefined;
    const doc = ENV_DOCS[name] ?? { description: "", example: "" };
    // A list (NOTIFY_RETRY_SCHEDULE) reads as written; a parsed object (PROVIDER_PATHS's
    // overrides) has no written form: unset, as its description says what that means.
    const written = value === undefined || (typeof value === "object" && !Array.isArray(value)) ? undefined : String(value);
    return { name, default: written, ...doc };
  });
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
  /** Paths that differ from the defaults (PROVIDER_PATHS); client and built-in emulator use them. */
  paths: Partial<Paths>;
}

export interface Config {
  databaseUrl: string | undefined;
  /** Where the API's GETs and the console's pages read; undefined: databaseUrl. */
  databaseReadUrl: string | undefined;
  port: number;
  host: string;
  publicUrl: string;
  apiToken: string;
  /** API_TOKEN_PREVIOUS: accepted on /v1 beside apiToken while a rotation lasts. */
  apiTokenPrevious: string | undefined;
  callbackSecret: string;
  /** CALLBACK_SECRET_PREVIOUS: accepted on callbacks beside callbackSecret while a rotation lasts. */
  callbackSecretPrevious: string | undefined;
  /** Where each secret came from, printed at start (never the secret itself). */
  secretSources: { apiToken: string; callbackSecret: string };
  logLevel: (typeof LOG_LEVELS)[number];
  logFormat: LogFormat;
  /** Bearer token GET /metrics requires; undefined: /metrics is open. */
  metricsToken: string | undefined;
  /** Where `npm run worker` serves its /metrics, /healthz and /readyz (METRICS_PORT); undefined: nowhere. */
  metricsPort: number | undefined;
  dataDir: string;
  /** Port of the built-in emulator (EMULATOR_PORT). */
  emulatorPort: number;
  provider: ProviderConfig;
  awb: { lowWatermark: number; target: number; mode: "pool" | "fresh" };
  worker: { concurrency: number };
  projection: { intervalMs: number };
  ingest: { batchMax: number; batchWaitMs: number };
  /** Connections of a process's pool, and of a web process's read pool (DATABASE_READ_URL). */
  db: { poolMax: number; readPoolMax: number };
  /**
   * The console (PRODUCT.md §12): how long a sign-in lasts, when a silent active order
   * needs attention, and the proxies whose X-Forwarded-For names the client (TRUSTED_PROXIES).
   */
  console: { sessionHours: number; stuckAfterMin: number; trustedProxies: AddressBlock[] };
  /** Days each kind of housekeeping row is kept; 0: forever. */
  retention: { rejectedDays: number; commandDays: number; attemptDays: number; messageDays: number; piiDays: number };
  /** The event log's partitions (src/events/partitions.ts): their span, and days each kind of event is kept (0: forever). */
  events: { partition: "day" | "week" | "month"; locationDays: number; statusDays: number };
  /** Provider calls for order commands: attempts, and the first retry delay (doubling, capped at 10 min). */
  commands: { maxAttempts: number; retryBaseMs: number };
  /** Node server timeouts for slow clients (src/http/server.ts). */
  http: { requestTimeoutMs: number; headersTimeoutMs: number };
  /** Outbound notifications: delays before each attempt (s), one attempt's timeout, private URLs, location throttle (s; 0: none). */
  notify: {
    retryScheduleS: number[];
    timeoutMs: number;
    allowPrivateUrls: boolean;
    locationIntervalS: number;
    /** Deliveries wait while more events than this are projected a second (0: never), for at most burstMaxWaitS. */
    burstEventsS: number;
    burstMaxWaitS: number;
  };
}

/** What is wrong with a variable (or a pair); `example`: settings that would do instead of the variable's usual example. */
export interface ConfigProblem {
  variable: string;
  message: string;
  example?: string;
}

/** `NAME: message` (the form problems are given in as strings) back into its parts. */
function asProblem(problem: string | ConfigProblem): ConfigProblem {
  if (typeof problem !== "string") return problem;
  const match = /^([A-Z0-9_]+(?: \/ [A-Z0-9_]+)*): (.*)$/s.exec(problem);
  return match ? { variable: match[1]!, message: match[2]! } : { variable: "environment", message: problem };
}

export class ConfigError extends Error {
  /** `VARIABLE: what is wrong`, one per problem. */
  readonly problems: string[];
  /** The same, each with a good value to set (`; e.g. NAME=value`): what a person reads at start. */
  readonly lines: string[];
  readonly details: ConfigProblem[];
  constructor(problems: (string | ConfigProblem)[]) {
    const parsed = problems.map(asProblem);
    const lines = parsed.map((p) => {
      const example = p.example ?? (ENV_DOCS[p.variable] ? `${p.variable}=${ENV_DOCS[p.variable]!.example}` : undefined);
      return example === undefined ? `${p.variable}: ${p.message}` : `${p.variable}: ${p.message}; e.g. ${example}`;
    });
    super(`invalid configuration:\n${lines.map((l) => `  - ${l}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = parsed.map((p) => `${p.variable}: ${p.message}`);
    this.lines = lines;
    this.details = parsed;
  }
}

/**
 * Reads `.env` into process.env without overriding what is set, with Node's own parser
 * (util.parseEnv, as `node --env-file` reads). One that cannot be read (a directory, no
 * permission) stops the start naming it, as a bad variable does; so does a value the
 * parser would read other than as written (dotEnvProblems). A byte-order mark, as Windows
 * editors write, is skipped (Node's parser made it part of the first name, which was lost).
 */
function loadDotEnv(): void {
  if (!existsSync(".env")) return;
  let bytes: Buffer;
  try {
    bytes = readFileSync(".env");
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    const why = code === "EISDIR" ? "is not a file" : `could not be read (${typeof code === "string" ? code : (err as Error).message})`;
    throw new ConfigError([{ variable: ".env", message: `${resolve(".env")} ${why}; remove it, or make it a file of NAME=value lines` }]);
  }
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    throw new ConfigError([{ variable: ".env", message: `${resolve(".env")} is saved as UTF-16; save it as UTF-8` }]);
  }
  const text = bytes.toString("utf8").replace(/^\uFEFF/, "");
  const taken = Object.entries(parseEnvText(text)).filter((entry): entry is [string, string] => entry[1] !== undefined && process.env[entry[0]] === undefined);
  const problems = dotEnvProblems(text, new Map(taken));
  if (problems.length > 0) throw new ConfigError(problems);
  for (const [name, value] of taken) process.env[name] = value;
}

/** `NAME=` at the start of a line (after `export `), as the parser reads a name. */
const DOTENV_ASSIGNMENT = /^\s*(?:export\s+)?([\w.-]+)\s*=(\s*)(.*)$/;

/**
 * Values of `.env` (those the environment does not override) that the parser reads other
 * than a person means, each a silent misreading otherwise (a secret cut short: every call
 * refused with 401): a `#` inside an unquoted value, which starts a comment there
 * (`CALLBACK_SECRET=abc#def` is `abc`), and a value over several lines, which no setting
 * takes: a quote opened and never closed swallows the lines after it. Never the value.
 * Only tracklane's own settings: a shared file's other lines are read as Node reads them.
 */
function dotEnvProblems(text: string, values: ReadonlyMap<string, string>): ConfigProblem[] {
  const problems = new Map<string, ConfigProblem>();
  for (const line of text.split(/\r?\n/)) {
    const match = DOTENV_ASSIGNMENT.exec(line);
    if (!match || /^["'`]/.test(match[3]!)) continue;
    const [, name = "", space, raw = ""] = match;
    if (!(name in ENV_DOCS)) continue; // another program's setting is its business
    // Where the comment starts: right after `=` (`NAME=#x` is empty), or after a character (`ab#x` is `ab`).
    const cut = space === "" && raw.startsWith("#") ? 0 : raw.search(/\S#/) + 1 || -1;
    if (cut < 0 || values.get(name) !== raw.slice(0, cut).trim()) continue; // a line inside a quoted value, or overridden
    problems.set(name, {
      variable: name,
      message:
        "in .env, a # inside the value starts a comment there, so only what comes before it is read: if the # belongs to the value, put the value in single quotes ('...') (in a URL write # as %23); if not, delete the # and what follows it",
    });
  }
  for (const [name, value] of values) {
    if (problems.has(name) || !/[\r\n]/.test(value)) continue;
    // Another program's multi-line value (a PEM key) is its business, unless it swallowed a setting of ours.
    const swallowed = value.split(/\r?\n/).slice(1).some((l) => (DOTENV_ASSIGNMENT.exec(l)?.[1] ?? "") in ENV_DOCS);
    if (!(name in ENV_DOCS) && !swallowed) continue;
    problems.set(name, {
      variable: name,
      message: swallowed
        ? "in .env, its value opens a quote that is not closed on its line, so the lines after it were read into it: close the quote"
        : "in .env, its value runs over several lines; every setting is one line",
    });
  }
  return [...problems.values()];
}

/**
 * zod's own messages speak of types ("expected number, received NaN"); these say what to
 * write. Messages given in the schema win over these.
 */
function plainMessage(issue: z.core.$ZodRawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_value":
      return `must be one of ${issue.values.map(String).join(", ")}`;
    case "invalid_type":
      if (issue.expected === "int") return "must be a whole number";
      if (issue.expected === "number") return "must be a number";
      return undefined;
    case "too_small":
      if (issue.origin === "string") return `must be at least ${issue.minimum} characters`;
      return issue.inclusive === false ? `must be greater than ${issue.minimum}` : `must be at least ${issue.minimum}`;
    case "too_big":
      if (issue.origin === "string") return `must be at most ${issue.maximum} characters`;
      return issue.inclusive === false ? `must be less than ${issue.maximum}` : `must be at most ${issue.maximum}`;
    default:
      return undefined;
  }
}

/**
 * The environment parsed, and a problem per bad variable. The checks across variables
 * still run when some are bad, so that every problem shows at once: they read the others
 * as parsed and the bad ones as their defaults (`bad` names them, and a check that
 * involves one is left out, as its message could be wrong).
 */
function parseEnv(env: Env): { e: z.infer<typeof envSchema>; problems: ConfigProblem[]; bad: ReadonlySet<string> } {
  const parsed = envSchema.safeParse(env, { error: plainMessage });
  if (parsed.success) return { e: parsed.data, problems: [], bad: new Set() };
  const problems = parsed.error.issues.map((issue) => {
    const variable = issue.path.join(".") || "environment";
    const raw = env[variable];
    // Echo what was found, so a typo shows; never a secret (nor a URL that holds a
    // password), and not a whole essay.
    const hidden = raw === undefined || ENV_DOCS[variable]?.sensitive === true || hasUserInfo(raw);
    const shown = hidden ? "" : ` (found ${JSON.stringify(raw.length > 60 ? `${headOf(raw, 57)}...` : raw)})`;
    return { variable, message: `${issue.message}${shown}` };
  });
  const bad = new Set(problems.map((p) => p.variable));
  const rest = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([k]) => !bad.has(k))), { error: plainMessage });
  if (!rest.success) throw new ConfigError(problems);
  return { e: rest.data, problems, bad };
}

/** What providerConfig's checks across variables read. */
const PROVIDER_CHECKED = ["PROVIDER_PRODUCT", "PROVIDER_BASE_URL", "PROVIDER_GATEWAY_URL", "PROVIDER_TOKEN", "PROVIDER_CLIENT_ID", "PROVIDER_CLIENT_SECRET"];

function providerConfig(e: z.infer<typeof envSchema>): ProviderConfig {
  const hasToken = e.PROVIDER_TOKEN !== undefined;
  const hasOAuth = e.PROVIDER_CLIENT_ID !== undefined || e.PROVIDER_CLIENT_SECRET !== undefined;
  const problems: ConfigProblem[] = [];
  const example = (...names: string[]) => names.map((n) => `${n}=${ENV_DOCS[n]?.example ?? ""}`).join(" ");
  if (hasOAuth && (e.PROVIDER_CLIENT_ID === undefined || e.PROVIDER_CLIENT_SECRET === undefined)) {
    problems.push({
      variable: "PROVIDER_CLIENT_ID / PROVIDER_CLIENT_SECRET",
      message: "set both or neither",
      example: example("PROVIDER_CLIENT_ID", "PROVIDER_CLIENT_SECRET"),
    });
  }
  if (e.PROVIDER_GATEWAY_URL !== undefined && e.PROVIDER_BASE_URL === undefined) {
    problems.push({ variable: "PROVIDER_GATEWAY_URL", message: "needs PROVIDER_BASE_URL as well", example: example("PROVIDER_BASE_URL") });
  }
  let auth: ProviderAuthConfig | undefined;
  if (e.PROVIDER_BASE_URL !== undefined) {
    const choice = chooseAuthMethod(e.PROVIDER_PRODUCT, { token: hasToken, oauth: hasOAuth });
    if (!choice.ok) {
      // The example is the credentials this product accepts, the fix more often than another product.
      const creds = PRODUCT_AUTH[e.PROVIDER_PRODUCT].token ? example("PROVIDER_TOKEN") : example("PROVIDER_CLIENT_ID", "PROVIDER_CLIENT_SECRET");
      problems.push({ variable: "PROVIDER_PRODUCT", message: choice.message, example: creds });
    } else auth = authFor(choice.method, e);
  } else if (hasToken || hasOAuth) {
    problems.push({ variable: "PROVIDER_BASE_URL", message: "provider credentials are set but the provider URL is not" });
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
    paths: e.PROVIDER_PATHS,
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

/** The secret stored at `path`: null when there is no file, "" when it is too short to be one. */
function storedSecret(path: string): string | null {
  try {
    const stored = readFileSync(path, "utf8").trim();
    return stored.length >= 16 ? stored : "";
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return null;
    throw err;
  }
}

/** What link() fails with on a file system without hard links (FAT and exFAT, some network and VM shares). */
const NO_HARD_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"]);

/**
 * Puts the file written aside at `path` unless a file is there already (EEXIST). Where the
 * file system has no hard links, the file is created exclusively instead: one process
 * still wins, only a reader at that very instant could find it empty.
 */
function linkOrCreate(aside: string, path: string, content: string): void {
  try {
    linkSync(aside, path);
  } catch (err) {
    if (!NO_HARD_LINKS.has(String((err as { code?: unknown }).code))) throw err;
    writeFileSync(path, content, { mode: 0o600, flag: "wx" });
  }
}

/**
 * A secret from the environment, or the one generated on an earlier start and kept in
 * `<dataDir>/<file>` (mode 0600), or a new one written there.
 */
function resolveSecret(value: string | undefined, dataDir: string, file: string, envName: string) {
  if (value !== undefined) return { value, source: `environment (${envName})` };
  const path = join(dataDir, file);
  const source = `generated, stored in ${path}`;
  const stored = storedSecret(path);
  if (stored) return { value: stored, source };
  mkdirSync(dataDir, { recursive: true });
  const generated = randomBytes(24).toString("base64url");
  // Processes started together on one DATA_DIR (two web processes, a web and a worker) each
  // found no secret: the first to store one wins and the others take it. Overwriting
  // instead left a process with a secret the file no longer held, refusing every callback
  // and API call that carried the stored one. Written aside, then linked: the file never
  // appears half-written.
  const aside = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(aside, `${generated}\n`, { mode: 0o600 });
  try {
    if (stored === null) linkOrCreate(aside, path, `${generated}\n`);
    else renameSync(aside, path); // a file too short to be a secret is replaced
  } catch (err) {
    const theirs = (err as { code?: unknown }).code === "EEXIST" ? storedSecret(path) : null;
    if (!theirs) throw err;
    return { value: theirs, source };
  } finally {
    rmSync(aside, { force: true });
  }
  return { value: generated, source };
}

/**
 * Parses and validates the environment. Throws ConfigError with one line per bad
 * variable. Generates the API token and callback secret under DATA_DIR when unset.
 */
export function loadConfig(env: Env = readProcessEnv(), options: { stdoutIsTTY?: boolean } = {}): Config {
  const { e, problems, bad } = parseEnv(env);
  const involves = (...names: string[]) => names.some((n) => bad.has(n));
  if (e.AWB_POOL_LOW_WATERMARK > e.AWB_POOL_TARGET && !involves("AWB_POOL_LOW_WATERMARK", "AWB_POOL_TARGET")) {
    problems.push({
      variable: "AWB_POOL_LOW_WATERMARK",
      message: "must not be greater than AWB_POOL_TARGET",
      example: `AWB_POOL_LOW_WATERMARK=${Math.floor(e.AWB_POOL_TARGET / 5)}`,
    });
  }
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS && !involves("HTTP_HEADERS_TIMEOUT_MS", "HTTP_REQUEST_TIMEOUT_MS")) {
    problems.push({
      variable: "HTTP_HEADERS_TIMEOUT_MS",
      message: "must not be greater than HTTP_REQUEST_TIMEOUT_MS",
      example: `HTTP_HEADERS_TIMEOUT_MS=${Math.max(100, Math.floor(e.HTTP_REQUEST_TIMEOUT_MS / 3))}`,
    });
  }
  if (e.DATABASE_READ_URL !== undefined && e.DATABASE_URL === undefined && !involves("DATABASE_URL")) {
    // A replica of the embedded server is not something to run: this is a forgotten DATABASE_URL.
    problems.push({
      variable: "DATABASE_READ_URL",
      message: "needs DATABASE_URL as well (the database that is written)",
      example: `DATABASE_URL=${ENV_DOCS.DATABASE_URL!.example}`,
    });
  }
  let provider: ProviderConfig | undefined;
  try {
    provider = providerConfig(e);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // The provider's checks read every PROVIDER_* credential and URL together.
    if (!involves(...PROVIDER_CHECKED)) problems.push(...err.details);
  }
  if (problems.length > 0 || provider === undefined) throw new ConfigError(problems);

  const dataDir = resolve(e.DATA_DIR);
  const secretProblems: ConfigProblem[] = [];
  /** A secret, or a problem naming DATA_DIR when the generated one cannot be read or kept there (not a directory, no permission). */
  const secretOf = (value: string | undefined, file: string, envName: string) => {
    try {
      return resolveSecret(value, dataDir, file, envName);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== "string") throw err;
      secretProblems.push({
        variable: "DATA_DIR",
        message: `cannot keep the generated ${envName} in ${join(dataDir, file)} (${code}): make DATA_DIR a directory this process can write, or set ${envName}`,
      });
      return { value: "", source: "" };
    }
  };
  const apiToken = secretOf(e.API_TOKEN, "api-token", "API_TOKEN");
  const callbackSecret = secretOf(e.CALLBACK_SECRET, "callback-secret", "CALLBACK_SECRET");
  const sameAsCurrent = (previous: string | undefined, current: string, envName: string, currentName: string) => {
    if (previous !== undefined && previous === current) {
      secretProblems.push({
        variable: envName,
        message: `is the same as ${currentName}: set it to the value being replaced, or unset it`,
      });
    }
  };
  sameAsCurrent(e.API_TOKEN_PREVIOUS, apiToken.value, "API_TOKEN_PREVIOUS", "API_TOKEN");
  sameAsCurrent(e.CALLBACK_SECRET_PREVIOUS, callbackSecret.value, "CALLBACK_SECRET_PREVIOUS", "CALLBACK_SECRET");
  if (secretProblems.length > 0) throw new ConfigError(secretProblems);
  return {
    databaseUrl: e.DATABASE_URL,
    databaseReadUrl: e.DATABASE_READ_URL,
    port: e.PORT,
    host: e.HOST,
    publicUrl: e.PUBLIC_URL ?? `http://127.0.0.1:${e.PORT}`,
    apiToken: apiToken.value,
    apiTokenPrevious: e.API_TOKEN_PREVIOUS,
    callbackSecret: callbackSecret.value,
    callbackSecretPrevious: e.CALLBACK_SECRET_PREVIOUS,
    secretSources: { apiToken: apiToken.source, callbackSecret: callbackSecret.source },
    logLevel: e.LOG_LEVEL,
    logFormat: resolveLogFormat(e.LOG_FORMAT, options.stdoutIsTTY ?? process.stdout.isTTY === true),
    metricsToken: e.METRICS_TOKEN,
    metricsPort: e.METRICS_PORT,
    dataDir,
    emulatorPort: e.EMULATOR_PORT,
    provider,
    awb: { lowWatermark: e.AWB_POOL_LOW_WATERMARK, target: e.AWB_POOL_TARGET, mode: e.AWB_MODE },
    worker: { concurrency: e.WORKER_CONCURRENCY },
    projection: { intervalMs: e.PROJECTION_INTERVAL_MS },
    ingest: { batchMax: e.INGEST_BATCH_MAX, batchWaitMs: e.INGEST_BATCH_WAIT_MS },
    db: { poolMax: e.DB_POOL_MAX, readPoolMax: e.DB_READ_POOL_MAX },
    console: { sessionHours: e.CONSOLE_SESSION_HOURS, stuckAfterMin: e.STUCK_AFTER_MIN, trustedProxies: e.TRUSTED_PROXIES },
    retention: {
      rejectedDays: e.REJECTED_RETENTION_DAYS,
      commandDays: e.COMMAND_RETENTION_DAYS,
      attemptDays: e.NOTIFY_ATTEMPT_RETENTION_DAYS,
      messageDays: e.NOTIFY_MESSAGE_RETENTION_DAYS,
      piiDays: e.PII_RETENTION_DAYS,
    },
    events: { partition: e.EVENTS_PARTITION, locationDays: e.LOCATION_RETENTION_DAYS, statusDays: e.EVENT_RETENTION_DAYS },
    commands: { maxAttempts: e.COMMAND_MAX_ATTEMPTS, retryBaseMs: e.COMMAND_RETRY_BASE_MS },
    http: { requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS, headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS },
    notify: {
      retryScheduleS: e.NOTIFY_RETRY_SCHEDULE,
      timeoutMs: e.NOTIFY_TIMEOUT_MS,
      allowPrivateUrls: e.NOTIFY_ALLOW_PRIVATE_URLS,
      locationIntervalS: e.NOTIFY_LOCATION_INTERVAL_S,
      burstEventsS: e.NOTIFY_BURST_EVENTS_S,
      burstMaxWaitS: e.NOTIFY_BURST_MAX_WAIT_S,
    },
  };
}

/** LOG_FORMAT, or when unset: pretty for a person at a terminal, json for whatever collects the output. */
export function resolveLogFormat(configured: LogFormat | undefined, stdoutIsTTY: boolean): LogFormat {
  return configured ?? (stdoutIsTTY ? "pretty" : "json");
}

function readProcessEnv(): Env {
  loadDotEnv();
  return process.env;
}

const emulatorSchema = z.object({
  EMULATOR_PORT: port(4010),
  EMULATOR_HOST: z.preprocess(emptyToUndefined, oneLine.default("127.0.0.1")),
  LOG_LEVEL: z.preprocess(emptyToUndefined, z.enum(LOG_LEVELS).default("info")),
  EMULATOR_TOKEN: z.preprocess(emptyToUndefined, z.string().default("emulator-token")),
  EMULATOR_CLIENT_ID: z.preprocess(emptyToUndefined, z.string().default("emulator-client")),
  EMULATOR_CLIENT_SECRET: z.preprocess(emptyToUndefined, z.string().default("emulator-secret")),
  EMULATOR_PRODUCT: z.preprocess(emptyToUndefined, z.enum(PRODUCTS).default("hyperlocal_dedicated_store")),
  EMULATOR_ENV: z.preprocess(emptyToUndefined, z.enum(["staging", "production"]).default("staging")),
  /** true: behave like the real provider is reported to (the emulator's realistic preset), not like its spec. */
  EMULATOR_REALISTIC: flag(false),
  /** Paths the emulator serves instead of the defaults, as PROVIDER_PATHS gives them to tracklane. */
  EMULATOR_PATHS: pathOverrides,
  /** The emulator keeps its state in DATA_DIR/emulator/ (the same DATA_DIR as tracklane's). */
  DATA_DIR: z.preprocess(emptyToUndefined, oneLine.default(".data")),
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
  /** Paths served instead of the defaults (EMULATOR_PATHS). */
  paths: Partial<Paths>;
  /** Absolute; the state lives in `<dataDir>/emulator/`. */
  dataDir: string;
}

/** Settings of the standalone emulator (`npm run emulator`). */
export function loadEmulatorConfig(env: Env = readProcessEnv()): EmulatorConfig {
  // Worded as tracklane's own settings are (plainMessage): "must be a number", not zod's "expected number, received NaN".
  const parsed = emulatorSchema.safeParse(env, { error: plainMessage });
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((i) => {
        const variable = i.path.join(".");
        const raw = env[variable];
        const shown = raw === undefined || /SECRET|TOKEN/.test(variable) ? "" : ` (found ${JSON.stringify(raw.length > 60 ? `${headOf(raw, 57)}...` : raw)})`;
        return { variable, message: `${i.message}${shown}` };
      }),
    );
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
    paths: e.EMULATOR_PATHS,
    dataDir: resolve(e.DATA_DIR),
  };
}
