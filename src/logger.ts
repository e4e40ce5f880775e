import pino from "pino";
import type { Logger } from "pino";
import pretty from "pino-pretty";
import { CENSOR, jsonLengthOf, scrubSecrets } from "./domain/secrets.ts";
import { headOf } from "./domain/text.ts";

export type { Logger };

/**
 * Paths whose values never reach a log line. Callback paths carry the callback secret in
 * the URL, so request logging writes `redactPath(path)` instead of the raw path.
 */
const REDACT = [
  "apiToken",
  "apiTokenPrevious",
  "callbackSecret",
  "callbackSecretPrevious",
  "secret",
  "token",
  "password",
  "clientSecret",
  "access_token",
  "authorization",
  "*.authorization",
  "headers.authorization",
  "headers.cookie",
  'headers["x-callback-secret"]',
  "*.apiToken",
  "*.apiTokenPrevious",
  "*.callbackSecret",
  "*.callbackSecretPrevious",
  "*.token",
  "*.password",
  "*.clientSecret",
  "*.access_token",
  "refresh_token",
  "client_secret",
  "*.refresh_token",
  "*.client_secret",
];

/**
 * `err` and `error` (graphile-worker's key) carry errors: serialised as pino does (type,
 * message, stack, causes, own fields), then scrubbed, so an error from anywhere (a
 * driver's, graphile-worker's, a cause's response) cannot bring a token into the log at
 * any depth. A provider's answer on a ProviderError was scrubbed when the error was made
 * (provider/errors.ts) and is passed over here, not scrubbed again.
 */
function errorSerializer(value: unknown): unknown {
  return bounded(scrubSecrets(value instanceof Error ? pino.stdSerializers.err(value) : value), 0);
}

/**
 * The most characters a field of a logged error takes (as JSON, when it is not text). A
 * ProviderError carries the provider's whole answer (an HTML error page of 200 KB, a
 * refusal listing 100,000 AWB numbers): logged whole, each failed top-up wrote it again, in
 * its own line and in graphile-worker's. Its start, and how long it was, are kept.
 */
export const ERROR_FIELD_MAX_CHARS = 8192;

/** `value`'s fields cut to ERROR_FIELD_MAX_CHARS, its causes' too (a new object: scrubbed copies are shared). */
function bounded(value: unknown, depth: number): unknown {
  if (typeof value === "string") return cut(value);
  if (value === null || typeof value !== "object" || Array.isArray(value) || depth > 4) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, v]) => {
      if (key === "cause" || key === "aggregateErrors") return [key, Array.isArray(v) ? v.map((e) => bounded(e, depth + 1)) : bounded(v, depth + 1)];
      if (typeof v === "string") return [key, cut(v)];
      if (v === null || typeof v !== "object" || jsonLengthOf(v) <= ERROR_FIELD_MAX_CHARS) return [key, v];
      return [key, cut(JSON.stringify(v))];
    }),
  );
}

function cut(text: string): string {
  return text.length <= ERROR_FIELD_MAX_CHARS ? text : `${headOf(text, ERROR_FIELD_MAX_CHARS)}… (${text.length} characters in all)`;
}

export interface LoggerOptions {
  level?: string;
  /** json (default): one object a line; pretty: a readable line each (LOG_FORMAT). */
  format?: "json" | "pretty";
  /** Where lines go; defaults to stdout. Tests pass a stream to capture output. */
  destination?: pino.DestinationStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  // Redaction happens in pino, before a line is serialised: it holds for both formats.
  const settings = {
    level: options.level ?? "info",
    base: { service: "tracklane" },
    redact: { paths: REDACT, censor: CENSOR },
    serializers: { err: errorSerializer, error: errorSerializer },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.format === "pretty") {
    // In this thread rather than as a pino transport: a worker thread costs memory and
    // start time, and can lose the last lines of a process that exits at once. Written
    // synchronously: pretty is for a person watching, not for throughput.
    return pino(
      settings,
      pretty({
        destination: options.destination ?? 1,
        // Colours only where a person looks at a terminal, never into a captured stream.
        colorize: options.destination === undefined && process.stdout.isTTY === true,
        sync: true,
        translateTime: "SYS:HH:MM:ss.l",
        ignore: "pid,hostname,service",
      }),
    );
  }
  return pino(settings, options.destination ?? pino.destination({ sync: false }));
}

/** `/callbacks/<secret>/location` -> `/callbacks/[redacted]/location`. */
export function redactPath(path: string): string {
  return path.replace(/^\/callbacks\/(?!location(?:\/|$))[^/]+/, "/callbacks/[redacted]");
}
