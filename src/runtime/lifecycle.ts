import type { Logger } from "../logger.ts";

/** Above the worker's wait for running jobs (15 s) and the steps around it. */
const STOP_LIMIT_MS = 30_000;

/**
 * Runs until SIGINT or SIGTERM, then calls `stop` once and exits 0. A second signal (a
 * second Ctrl-C), or a stop that takes longer than 30 s, exits at once with 1.
 */
export function stopOnSignal(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting now, without waiting for the rest of the stop");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down (again to force)");
    const timer = setTimeout(() => {
      log.error("shutdown took too long: exiting");
      process.exit(1);
    }, STOP_LIMIT_MS);
    timer.unref();
    stop().then(
      () => {
        log.info("stopped");
        log.flush();
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, "error while shutting down");
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

/** Top-level failure of an entry point: log it and exit 1. */
export function fatal(log: Logger) {
  return (err: unknown) => {
    log.fatal({ err }, "tracklane failed to start");
    log.flush();
    setTimeout(() => process.exit(1), 50);
  };
}
