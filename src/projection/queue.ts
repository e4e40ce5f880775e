/**
 * Draining the projection queue. Every ingest flush writes one `projection_queue` row per
 * order it touched and one `projection__drain` job, in the flush's transaction. A drain
 * takes the oldest rows (`FOR UPDATE SKIP LOCKED`), projects their orders set-based
 * (src/projection/project.ts) and deletes the rows, all in one transaction: a crash
 * mid-projection leaves the rows, and the job, for the next try.
 *
 * Jobs coalesce in each worker process: at most `loops` drain loops run at once; a job
 * arriving while they all run completes at once, and the running loops take one more
 * batch that starts after its arrival. A loop (and its job) ends only after a short
 * batch that started after the last arrival, so at every moment each queued row is
 * covered by a job that is not yet complete: if the process dies, graphile-worker runs
 * that job again.
 */
import type { Sql, TransactionSql } from "postgres";
import { isDatabaseUnavailable } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { projectionJob } from "../tasks/jobs.ts";
import { projectOrdersIn } from "./project.ts";
import type { OrderIds } from "./project.ts";
import { createQueueVacuum } from "./queue-vacuum.ts";

export const DRAIN_TASK = "projection__drain";

/** A safety net: drains once a minute even if every drain job was lost or gave up. */
export const DRAIN_CRONTAB = `* * * * * ${DRAIN_TASK} ?id=projection_drain&max=1`;

export interface DrainOptions {
  /** Most queue rows (about as many orders) in one projection transaction. */
  batchMax: number;
  /** Drain loops running at once per process. */
  loops: number;
}

export const DRAIN_DEFAULTS: DrainOptions = { batchMax: 500, loops: 2 };

export interface DrainDeps {
  sql: Sql;
  log: Logger;
  metrics: Metrics;
}

interface QueueRow {
  id: string;
  svc_order_id: string | null;
  client_order_id: string | null;
}

/** Deadlock and serialisation failures: PostgreSQL rolled the batch back; try it again. */
const RETRY_CODES = new Set(["40P01", "40001"]);
/** Deadlocks in a row before the job gives up (and is retried later). */
const MAX_CONFLICTS = 10;
const isRetryable = (err: unknown) => typeof err === "object" && err !== null && RETRY_CODES.has(String((err as { code?: unknown }).code));

const orderKey = (r: OrderIds) => JSON.stringify([r.svcOrderId, r.clientOrderId]);

function groupByOrder(rows: readonly QueueRow[]): Map<string, { start: OrderIds; ids: string[] }> {
  const orders = new Map<string, { start: OrderIds; ids: string[] }>();
  for (const r of rows) {
    const start = { svcOrderId: r.svc_order_id, clientOrderId: r.client_order_id };
    const key = orderKey(start);
    const entry = orders.get(key);
    if (entry) entry.ids.push(r.id);
    else orders.set(key, { start, ids: [r.id] });
  }
  return orders;
}

export interface Drainer {
  /** Runs (or joins) a drain; resolves once the rows queued before the call are covered. */
  drain(): Promise<void>;
}

export function createDrainer(deps: DrainDeps, options: DrainOptions = DRAIN_DEFAULTS): Drainer {
  const { sql, log, metrics } = deps;
  let running = 0;
  let arrivals = 0;
  const vacuum = createQueueVacuum(sql, { everyRows: 2000, minIntervalMs: 2000 });

  const observeLag = (results: readonly ({ changed: boolean; newestReceivedAt: Date | null } | null)[]) => {
    const now = Date.now();
    for (const r of results) {
      if (r?.changed && r.newestReceivedAt) metrics.projectionLag.observe(Math.max(0, now - r.newestReceivedAt.getTime()) / 1000);
    }
  };

  /** One batch in one transaction; the rows it took, also when the projection failed. */
  const batch = async (): Promise<{ taken: QueueRow[]; error?: unknown }> => {
    let taken: QueueRow[] = [];
    try {
      await sql.begin(async (tx) => {
        // The rows are chosen once, in a materialised CTE: as `id in (select … limit …
        // skip locked)` PostgreSQL may rescan the subquery once per row it deletes, and
        // each rescan skips the rows already locked and returns new ones, so a "batch of
        // 500" grew to thousands of rows in the benchmark, and the transactions to seconds.
        taken = await tx<QueueRow[]>`
          with chosen as materialized (
            select id from projection_queue order by id limit ${options.batchMax} for update skip locked
          )
          delete from projection_queue q using chosen where q.id = chosen.id
          returning q.id::text, q.svc_order_id, q.client_order_id`;
        if (taken.length === 0) return;
        observeLag(await projectOrdersIn(tx, [...groupByOrder(taken).values()].map((o) => o.start)));
      });
      vacuum.rowsDone(taken.length);
      return { taken };
    } catch (error) {
      if (isDatabaseUnavailable(error)) throw error;
      return { taken, error };
    }
  };

  /**
   * A batch failed for a reason other than the database: project its orders one at a
   * time, so that one order that cannot be projected (a bug, bad data) holds up no other.
   * Such an order's rows become an `order__project` job, retried with backoff and
   * counted as failed in /metrics while it fails.
   */
  const isolate = async (rows: readonly QueueRow[], cause: unknown) => {
    for (const { start, ids } of groupByOrder(rows).values()) {
      await sql.begin(async (tx) => {
        const mine = await tx`
          with chosen as materialized (
            select id from projection_queue where id = any(${ids}::bigint[]) for update skip locked
          )
          delete from projection_queue q using chosen where q.id = chosen.id
          returning q.id`;
        if (mine.length === 0) return; // another drain has them
        try {
          observeLag(await tx.savepoint((sp: TransactionSql) => projectOrdersIn(sp, [start])));
        } catch (err) {
          if (isDatabaseUnavailable(err)) throw err;
          log.error({ err, cause, order: start }, "projection failed; the order is retried as its own job");
          const job = projectionJob(start.svcOrderId, start.clientOrderId);
          await tx`select graphile_worker.add_job('order__project', ${JSON.stringify(job.payload)}::text::json, job_key := ${job.key})`;
        }
      });
    }
  };

  const loop = async () => {
    for (let conflicts = 0; ; ) {
      const seen = arrivals;
      const { taken, error } = await batch();
      if (error !== undefined) {
        // Taking the rows failed (nothing to isolate), or deadlocks keep recurring: the
        // job fails and graphile-worker retries it with backoff.
        if (taken.length === 0 || (isRetryable(error) && ++conflicts > MAX_CONFLICTS)) throw error;
        if (!isRetryable(error)) await isolate(taken, error);
        continue;
      }
      conflicts = 0;
      if (taken.length < options.batchMax && seen === arrivals) return;
    }
  };

  return {
    async drain() {
      arrivals++;
      // The running loops take another batch after this arrival; their jobs stay open
      // until they have.
      if (running >= options.loops) return;
      running++;
      try {
        await loop();
      } finally {
        running--;
      }
    },
  };
}
