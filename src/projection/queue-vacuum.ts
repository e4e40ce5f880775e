/**
 * Keeps graphile-worker's job table small. Every projection job is a row inserted,
 * updated when a worker locks it and deleted when it completes, so at a thousand
 * callbacks a second the table gathers dead rows a thousand times a second; autovacuum
 * visits a database at most once per autovacuum_naptime (60 s by default) and not at all
 * when it is off. Between visits every fetch and completion walks the dead rows: in the
 * benchmark (a server with autovacuum off) graphile-worker's own queries went from ~400
 * to ~2,000 µs of PostgreSQL CPU per event over a 100,000-event run as the table
 * reached 240,000 dead rows. So the worker vacuums it itself after every `everyJobs`
 * jobs, at most every `minIntervalMs`: a plain VACUUM (no lock that blocks inserts,
 * updates or deletes), skipped when another process is already vacuuming it.
 */
import type { Sql } from "postgres";

export interface QueueVacuumOptions {
  everyJobs: number;
  minIntervalMs: number;
}

export function createQueueVacuum(sql: Sql, options: QueueVacuumOptions): { jobsDone(n: number): void } {
  let since = 0;
  let last = 0;
  let running = false;
  return {
    jobsDone(n) {
      since += n;
      const now = Date.now();
      if (running || since < options.everyJobs || now - last < options.minIntervalMs) return;
      running = true;
      since = 0;
      last = now;
      sql`vacuum (skip_locked) graphile_worker._private_jobs`
        // Best effort: a vacuum that fails (not the table's owner, server going away) only
        // leaves the table as autovacuum would; the next one tries again.
        .catch(() => undefined)
        .finally(() => (running = false));
    },
  };
}
