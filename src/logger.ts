import pino from "pino";
import type { Logger } from "pino";
import pretty from "pino-pretty";
import { CENSOR, scrubSecrets } from "./domain/secrets.ts";

export type { Logger };

/**
 * Paths whose values never reach a log line. Callback paths carry the callback secret in
 * the URL, so request logging writes `redactPath(path)` instead of the raw path.
 */
const REDACT = [
  "apiToken",
  "callbackSecret",
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
  "*.callbackSecret",
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
  return scrubSecrets(value instanceof Error ? pino.stdSerializers.err(value) : value);
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
