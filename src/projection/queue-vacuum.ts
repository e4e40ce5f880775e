/**
 * Vacuums projection_queue and graphile-worker's job table every `everyRows` drained rows
 * (at most every `minIntervalMs`): at thousands of callbacks a second they gather dead
 * rows faster than autovacuum visits, and every fetch walks them. A plain VACUUM that
 * skips a table another process is vacuuming.
 */
import type { Sql } from "postgres";

export interface QueueVacuumOptions {
  everyRows: number;
  minIntervalMs: number;
}

export function createQueueVacuum(sql: Sql, options: QueueVacuumOptions): { rowsDone(n: number): void } {
  let since = 0;
  let last = 0;
  let running = false;
  return {
    rowsDone(n) {
      since += n;
      const now = Date.now();
      if (running || since < options.everyRows || now - last < options.minIntervalMs) return;
      running = true;
      since = 0;
      last = now;
      sql`vacuum (skip_locked) projection_queue, graphile_worker._private_jobs`
        // Best effort: a vacuum that fails (not the table's owner, server going away) only
        // leaves the table as autovacuum would; the next one tries again.
        .catch(() => undefined)
        .finally(() => (running = false));
    },
  };
}
