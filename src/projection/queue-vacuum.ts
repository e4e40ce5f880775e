/**
 * Keeps the queue tables small: projection_queue (a row inserted and deleted per order
 * per flush) and graphile-worker's job table (a drain job per flush: inserted, updated
 * when locked, deleted when done). At thousands of callbacks a second they gather dead
 * rows hundreds of times a second; autovacuum
 * visits a database at most once per autovacuum_naptime (60 s by default) and not at all
 * when it is off. Between visits every fetch and completion walks the dead rows: in the
 * benchmark (a server with autovacuum off) graphile-worker's own queries went from ~400
 * to ~2,000 µs of PostgreSQL CPU per event over a 100,000-event run as the table
 * reached 240,000 dead rows (with a job per order, before the projection queue). So the
 * worker vacuums them itself after every `everyRows` drained rows, at most every
 * `minIntervalMs`: a plain VACUUM (no lock that blocks inserts, updates or deletes),
 * skipped when another process is already vacuuming a table.
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
