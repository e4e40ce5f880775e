import type { Logger } from "../logger.ts";

/**
 * Runs until SIGINT or SIGTERM, then calls `stop` once and exits. A second signal, or a
 * stop that takes longer than 20 s, exits at once.
 */
export function stopOnSignal(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    stopping = true;
    log.info({ signal }, "shutting down");
    const timer = setTimeout(() => {
      log.error("shutdown took too long: exiting");
      process.exit(1);
    }, 20_000);
    timer.unref();
    stop().then(
      () => {
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
