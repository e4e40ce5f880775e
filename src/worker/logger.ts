import { Logger as GraphileLogger } from "graphile-worker";
import type { LogLevel } from "graphile-worker";
import type { Logger } from "../logger.ts";

const LEVEL: Record<LogLevel, "error" | "warn" | "info" | "debug"> = {
  error: "error",
  warning: "warn",
  info: "info",
  debug: "debug",
};

/**
 * graphile-worker's logger, routed into pino so every line has one format. A job that
 * succeeded is logged at debug: graphile-worker says so at info for every job, a line
 * (with the whole job) per projection batch, which buried everything else.
 */
export function graphileLogger(log: Logger): GraphileLogger {
  const worker = log.child({ component: "graphile-worker" });
  return new GraphileLogger((scope) => (level, message, meta) => {
    const routine = level === "info" && meta?.["success"] === true;
    worker[routine ? "debug" : LEVEL[level]]({ ...scope, ...meta }, message);
  });
}
