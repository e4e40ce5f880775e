import pino from "pino";
import type { Logger } from "pino";

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
];

export interface LoggerOptions {
  level?: string;
  /** Where lines go; defaults to stdout. Tests pass a stream to capture output. */
  destination?: pino.DestinationStream;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  return pino(
    {
      level: options.level ?? "info",
      base: { service: "tracklane" },
      redact: { paths: REDACT, censor: "[redacted]" },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    options.destination ?? pino.destination({ sync: false }),
  );
}

/** `/callbacks/<secret>/location` -> `/callbacks/[redacted]/location`. */
export function redactPath(path: string): string {
  return path.replace(/^\/callbacks\/(?!location(?:\/|$))[^/]+/, "/callbacks/[redacted]");
}
