/**
 * Draining the projection queue. Every ingest flush writes one `projection_queue` row per
 * new event and one `projection__drain` job, in the flush's transaction. A drain takes
 * the oldest rows (`FOR UPDATE SKIP LOCKED`) with their events, merges them into their
 * orders (src/projection/project.ts) and deletes the rows, all in one transaction: a
 * crash mid-projection leaves the rows, and the job, for the next try, and no event is
 * ever merged twice.
 *
 * Jobs coalesce in each worker process: at most `loops` drain loops run at once; a job
 * arriving while they all run completes at once, and the running loops take one more
 * batch that starts after its arrival. A loop (and its job) ends only after a short
 * batch that started after the last arrival, so at every moment each queued row is
 * covered by a job that is not yet complete: if the process dies, graphile-worker runs
 * that job again.
 *
 * While the projection keeps up, a loop spaces its batches `intervalMs` apart, so one
 * transaction carries many flushes' events: measured on the benchmark, a batch of 500
 * costs half the CPU per event of a batch of 40.
 */
import type { Sql, TransactionSql } from "postgres";
import { isDatabaseUnavailable } from "../db/client.ts";
import { isJsonObject } from "../domain/normalise.ts";
import type { StoredEvent } from "../domain/projection.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { projectionJob } from "../tasks/jobs.ts";
import { groupByOrder, isConflict, projectQueued, reportPlacements, toStored } from "./project.ts";
import type { EventColumns, ProjectResult } from "./project.ts";
import { createQueueVacuum } from "./queue-vacuum.ts";

export const DRAIN_TASK = "projection__drain";

/** A safety net: drains once a minute even if every drain job was lost or gave up. */
export const DRAIN_CRONTAB = `* * * * * ${DRAIN_TASK} ?id=projection_drain&max=1`;

export interface DrainOptions {
  /** Most queued events in one projection transaction. */
  batchMax: number;
  /** Drain loops running at once per process. */
  loops: number;
  /**
   * After a batch that did not fill up (the projection is keeping up), the next batch
   * starts this long after the last one did, so that it carries the events of that
   * interval in one transaction. A full batch (a backlog) is followed at once.
   */
  intervalMs: number;
}

/**
 * One loop per process: a batch's PostgreSQL work and its JavaScript overlap through the
 * connection's pipelining already, and more worker processes add loops. Measured on the
 * benchmark, a 100,000-event backlog drains in about 5 s with one loop.
 */
export const DRAIN_DEFAULTS: DrainOptions = { batchMax: 500, loops: 1, intervalMs: 0 };

export interface DrainDeps {
  sql: Sql;
  log: Logger;
  metrics: Metrics;
}

type TakenRow = EventColumns & { payload: unknown };

const stored = (r: TakenRow): StoredEvent => toStored(r, isJsonObject(r.payload) ? r.payload : {});

/** Deadlocks in a row before the job gives up (and is retried later). */
const MAX_CONFLICTS = 10;

export interface Drainer {
  /** Runs (or joins) a drain; resolves once the rows queued before the call are covered. */
  drain(): Promise<void>;
}

export function createDrainer(deps: DrainDeps, overrides: Partial<DrainOptions> = {}): Drainer {
  const options: DrainOptions = { ...DRAIN_DEFAULTS, ...overrides };
  const { sql, log, metrics } = deps;
  let running = 0;
  let arrivals = 0;
  const vacuum = createQueueVacuum(sql, { everyRows: 2000, minIntervalMs: 2000 });

  /** After the batch's commit: the lag metric, and what people must hear about. */
  const observe = (results: readonly ProjectResult[]) => {
    const now = Date.now();
    for (const r of results) {
      if (r.changed && r.newestReceivedAt) metrics.projectionLag.observe(Math.max(0, now - r.newestReceivedAt.getTime()) / 1000);
    }
    reportPlacements(log, results);
  };

  /** One batch in one transaction; the events it took, also when the projection failed. */
  const batch = async (): Promise<{ taken: StoredEvent[]; error?: unknown }> => {
    let taken: StoredEvent[] = [];
    let results: ProjectResult[] = [];
    try {
      await sql.begin(async (tx) => {
        // The rows are chosen once, in a materialised CTE: as `id in (select … limit …
        // skip locked)` PostgreSQL may rescan the subquery once per row it deletes, and
        // each rescan skips the rows already locked and returns new ones, so a "batch of
        // 500" grew to thousands of rows in the benchmark, and the transactions to seconds.
        const rows = await tx<TakenRow[]>`
          with chosen as materialized (
            select event_id from projection_queue order by event_id limit ${options.batchMax} for update skip locked
          ),
          taken as (
            delete from projection_queue q using chosen where q.event_id = chosen.event_id returning q.event_id
          )
          select e.id::text, e.dedupe_key, e.kind, e.svc_order_id, e.client_order_id, e.provider_status,
                 e.occurred_at, e.received_at, e.payload
          from order_events e join taken t on t.event_id = e.id`;
        taken = rows.map(stored);
        if (taken.length === 0) return;
        results = await projectQueued(tx, taken);
      });
      observe(results);
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
   * Such an order becomes an `order__project` job, retried with backoff and counted as
   * failed in /metrics while it fails; its events' queue rows go, as that job derives
   * the order from the log in full.
   */
  const isolate = async (events: readonly StoredEvent[], cause: unknown) => {
    for (const group of groupByOrder(events)) {
      let results: ProjectResult[] = [];
      await sql.begin(async (tx) => {
        const mine = await tx<{ event_id: string }[]>`
          with chosen as materialized (
            select event_id from projection_queue where event_id = any(${group.map((e) => e.id)}::bigint[]) for update skip locked
          )
          delete from projection_queue q using chosen where q.event_id = chosen.event_id
          returning q.event_id::text`;
        const taken = new Set(mine.map((r) => Number(r.event_id)));
        const own = group.filter((e) => taken.has(e.id));
        if (own.length === 0) return; // another drain has them
        try {
          results = await tx.savepoint((sp: TransactionSql) => projectQueued(sp, own));
        } catch (err) {
          if (isDatabaseUnavailable(err)) throw err;
          const order = { svcOrderId: own[0]!.svcOrderId, clientOrderId: own[0]!.clientOrderId };
          log.error({ err, cause, order }, "projection failed; the order is retried as its own job");
          const job = projectionJob(order.svcOrderId, order.clientOrderId);
          await tx`select graphile_worker.add_job('order__project', ${JSON.stringify(job.payload)}::text::json, job_key := ${job.key})`;
        }
      });
      observe(results);
    }
  };

  const loop = async () => {
    for (let conflicts = 0; ; ) {
      const seen = arrivals;
      const started = Date.now();
      const { taken, error } = await batch();
      if (error !== undefined) {
        // Taking the rows failed (nothing to isolate), or deadlocks keep recurring: the
        // job fails and graphile-worker retries it with backoff.
        if (taken.length === 0 || (isConflict(error) && ++conflicts > MAX_CONFLICTS)) throw error;
        if (!isConflict(error)) await isolate(taken, error);
        continue;
      }
      conflicts = 0;
      const full = taken.length >= options.batchMax;
      if (!full && seen === arrivals) return;
      const wait = full ? 0 : options.intervalMs - (Date.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
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
