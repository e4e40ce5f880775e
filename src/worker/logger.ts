import { Logger as GraphileLogger } from "graphile-worker";
import type { LogLevel } from "graphile-worker";
import { databaseBusyReason, isConnectionLost } from "../db/client.ts";
import { DATABASE_OUTAGE_MS, failureBursts } from "../db/failure-bursts.ts";
import type { Logger } from "../logger.ts";

const LEVEL: Record<LogLevel, "error" | "warn" | "info" | "debug"> = {
  error: "error",
  warning: "warn",
  info: "info",
  debug: "debug",
};

/** graphile-worker's "Failed task" line of a job it will run again. */
function retried(level: LogLevel, meta: Record<string, unknown> | undefined): boolean {
  if (level !== "error" || meta?.["failure"] !== true) return false;
  const job = meta["job"] as { attempts?: unknown; max_attempts?: unknown } | undefined;
  return typeof job?.attempts === "number" && typeof job.max_attempts === "number" && job.attempts < job.max_attempts;
}

/**
 * graphile-worker's logger, routed into pino so every line has one format. A job that
 * succeeded is logged at debug: graphile-worker says so at info for every job, a line
 * (with the whole job) per projection batch, which buried everything else. While the
 * database is away graphile-worker logs an error with its stack at every poll (each
 * second) and every reconnect of its listener: those are one burst (db/failure-bursts.ts),
 * its first line and a count; so are the errors of a database that refuses every poll
 * (read-only, SQLSTATE 25006, after a failover). A job that failed keeps its own line: a
 * warning while it has attempts left (a provider timeout an AWB top-up retries is no error
 * for whoever is paged on errors), an error once it failed for good.
 */
export function graphileLogger(log: Logger): GraphileLogger {
  const worker = log.child({ component: "graphile-worker" });
  const bursts = failureBursts(worker, "database errors", { escalateAfterMs: DATABASE_OUTAGE_MS });
  return new GraphileLogger((scope) => (level, message, meta) => {
    const routine = level === "info" && meta?.["success"] === true;
    if ((level === "error" || level === "warning") && meta?.["job"] === undefined && isConnectionLost(meta?.["error"])) {
      bursts.failed("database unavailable", { ...scope, ...meta }, message);
      return;
    }
    // The same for a database that refuses every poll for a while (read-only after a
    // failover, statement timeouts): one burst per reason, not an error a second.
    const busy = (level === "error" || level === "warning") && meta?.["job"] === undefined ? databaseBusyReason(meta?.["error"]) : null;
    if (busy !== null) {
      bursts.failed(busy, { ...scope, ...meta }, message);
      return;
    }
    worker[routine ? "debug" : retried(level, meta) ? "warn" : LEVEL[level]]({ ...scope, ...meta }, message);
  });
}
