import type { Task } from "graphile-worker";
import type { Drainer } from "../projection/queue.ts";

/**
 * Projects the orders of queued events (src/projection/queue.ts). Every ingest flush
 * adds one such job; a worker process runs a few drain loops and folds the other jobs
 * into them.
 */
export function projectionDrain(drainer: Drainer): Task {
  return async () => {
    await drainer.drain();
  };
}
