/**
 * Vacuums queue-like tables (rows inserted, updated and deleted at high rates) every
 * `everyRows` processed rows, at most every `minIntervalMs`: they gather dead rows faster
 * than autovacuum visits, and every fetch walks them. A plain VACUUM that skips a table
 * another process is vacuuming, and never truncates: a drained queue ends in empty pages,
 * and cutting them off needs an ACCESS EXCLUSIVE lock, which VACUUM tries for again every
 * 50 ms while the appends hold theirs, then holds while new rows wait behind it. The empty
 * pages are filled again within seconds anyway. A queue vacuumed nearly empty then counts
 * a few rows in many pages, which a backlog filling those pages does not change: the
 * queue's statements probe it by key whatever the statistics say (src/projection/backlog.ts).
 */
import type { Sql } from "postgres";

export interface QueueVacuumOptions {
  /** Tables to vacuum: constants of the code, never input. */
  tables: readonly string[];
  everyRows: number;
  minIntervalMs: number;
}

export function createQueueVacuum(sql: Sql, options: QueueVacuumOptions): { rowsDone(n: number): void } {
  const statement = `vacuum (skip_locked, truncate false) ${options.tables.join(", ")}`;
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
      sql
        .unsafe(statement)
        // Best effort: a vacuum that fails (not the table's owner, server going away) only
        // leaves the table as autovacuum would; the next one tries again.
        .catch(() => undefined)
        .finally(() => (running = false));
    },
  };
}
