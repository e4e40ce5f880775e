import { isConnectionLost } from "../db/client.ts";
import { DATABASE_OUTAGE_MS, failureBursts } from "../db/failure-bursts.ts";
import type { Logger } from "../logger.ts";
import { reportStartupError, withTlsAnswer } from "./startup-errors.ts";
import type { StartupContext } from "./startup-errors.ts";

/** Signals this close to the first are the same Ctrl-C delivered twice (see below). */
const SAME_KEYPRESS_MS = 500;
/** Above the worker's wait for running jobs (15 s) and the steps around it. */
const STOP_LIMIT_MS = 30_000;

/**
 * Runs until SIGINT, SIGTERM or SIGHUP, then calls `stop` once and exits 0. A second signal (a
 * second Ctrl-C), or a stop that takes longer than 30 s, exits at once with 1.
 */
export function stopOnSignal(log: Logger, stop: () => Promise<void>): void {
  let stoppingSince: number | null = null;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stoppingSince !== null) {
      // `npm start` forwards the terminal's Ctrl-C to this process, which the terminal
      // already signalled: one keypress arrives twice, within milliseconds.
      if (Date.now() - stoppingSince < SAME_KEYPRESS_MS) return;
      log.warn({ signal }, "second signal: exiting now, without waiting for the rest of the stop");
      process.exit(1);
    }
    stoppingSince = Date.now();
    log.info({ signal }, "shutting down (the same signal again forces the exit)");
    const timer = setTimeout(() => {
      log.error("shutdown took too long: exiting");
      process.exit(1);
    }, STOP_LIMIT_MS);
    timer.unref();
    stop().then(
      () => {
        log.info("stopped");
        // Exit once the asynchronous destination has written everything: exiting with a
        // write in flight let the exit's synchronous flush put later lines before it.
        log.flush(() => process.exit(0));
      },
      (err: unknown) => {
        log.error({ err }, "error while shutting down");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  // The terminal closed: the embedded PostgreSQL, in a session of its own, would not get
  // it, so stop as for Ctrl-C rather than die and leave the server behind.
  process.on("SIGHUP", onSignal);
}

/**
 * Top-level failure of an entry point: one line saying why and what to do, exit 78 for bad
 * configuration, else 1 (startup-errors.ts). `context`: the settings to name in that line.
 */
export function fatal(log: Logger, context: StartupContext = {}) {
  return (err: unknown) => {
    void withTlsAnswer(err, context).then((known) => {
      const code = reportStartupError(err, known, log);
      log.flush();
      // The flush of an asynchronous destination completes on a later tick.
      setTimeout(() => process.exit(code), 50);
    });
  };
}

/**
 * For a process with no job runner to supervise (a web process): a lost database
 * connection that surfaces as an unhandled rejection is logged, not fatal. postgres.js
 * 3.4.9 reads a new connection's array types in a promise nobody awaits (connection.js,
 * fetchArrayTypes): a connection closed during that first query (the server restarting, a
 * backend terminated, a failover) killed the web process. The pool reconnects by itself;
 * every other unhandled rejection stays fatal, as in Node. A worker's supervisor handles
 * the same (worker/supervisor.ts). Returns what removes the handler.
 */
export function surviveLostConnections(log: Logger): () => void {
  const bursts = failureBursts(log, "lost connections", { escalateAfterMs: DATABASE_OUTAGE_MS });
  const onUnhandled = (reason: unknown) => {
    if (isConnectionLost(reason)) {
      bursts.failed("database connection lost", { err: reason }, "a database connection was lost outside any request; the pool reconnects");
      return;
    }
    log.fatal({ err: reason }, "unhandled promise rejection");
    log.flush();
    process.exit(1);
  };
  process.on("unhandledRejection", onUnhandled);
  return () => process.off("unhandledRejection", onUnhandled);
}
