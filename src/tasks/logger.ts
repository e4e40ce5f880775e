import { Logger as GraphileLogger } from "graphile-worker";
import type { LogLevel } from "graphile-worker";
import type { Logger } from "../logger.ts";

const LEVEL: Record<LogLevel, "error" | "warn" | "info" | "debug"> = {
  error: "error",
  warning: "warn",
  info: "info",
  debug: "debug",
};

/** graphile-worker's logger, routed into pino so every line is JSON with one format. */
export function graphileLogger(log: Logger): GraphileLogger {
  const worker = log.child({ component: "graphile-worker" });
  return new GraphileLogger((scope) => (level, message, meta) => {
    worker[LEVEL[level]]({ ...scope, ...meta }, message);
  });
}
