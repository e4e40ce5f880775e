/**
 * The drain: takes the oldest queued events, merges them into their orders and deletes
 * their queue rows in one transaction, so no event is merged twice and a crash leaves the
 * rows for the next try. Drain jobs coalesce into at most `loops` loops per process. While
 * a loop runs, appends add no jobs (the gate, src/projection/backlog.ts); it ends only after
 * an empty batch taken once the gate closed, and after the last job's arrival.
 */
import type { Sql, TransactionSql } from "postgres";
import { isDatabaseUnavailable } from "../db/client.ts";
import { isJsonObject } from "../domain/normalise.ts";
import type { StoredEvent } from "../domain/projection.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { LoadMeter } from "../worker/load.ts";
import { groupByOrder, isConflict, projectQueued, reportPlacements, toStored } from "./project.ts";
import type { ProjectResult } from "./project.ts";
import { DRAIN_TASK, addDrainJobIfQueued, openDrainHold, takeEvents, takeOldest } from "./backlog.ts";
import type { TakenRow } from "./backlog.ts";
import { createQueueVacuum } from "../db/vacuum.ts";
import { PROJECT_TASK, projectionJob } from "./jobs.ts";


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
 * connection's pipelining already, and more worker processes add loops (one starts when a
 * loop falls behind: its full batch adds a job). Measured on the
 * benchmark, a 100,000-event backlog drains in about 5 s with one loop.
 */
export const DRAIN_DEFAULTS: DrainOptions = { batchMax: 500, loops: 1, intervalMs: 0 };

export interface DrainDeps {
  sql: Sql;
  /** For the drain gate's connection of its own (backlog.ts openDrainHold). */
  databaseUrl: string;
  log: Logger;
  metrics: Metrics;
  /** Told how many events each batch projected (deliveries yield to a burst). */
  load?: LoadMeter | undefined;
  /** Aborts when the worker stops: a running loop closes the gate and leaves a job for what is left. */
  stopping?: AbortSignal | undefined;
}

const stored = (r: TakenRow): StoredEvent => toStored(r, isJsonObject(r.payload) ? r.payload : {});

/** Deadlocks in a row before the job gives up (and is retried later). */
const MAX_CONFLICTS = 10;

export interface Drainer {
  /** Runs (or joins) a drain; resolves once the rows queued before the call are covered. */
  drain(): Promise<void>;
}

export function createDrainer(deps: DrainDeps, overrides: Partial<DrainOptions> = {}): Drainer {
  const options: DrainOptions = { ...DRAIN_DEFAULTS, ...overrides };
  const { sql, log, metrics, load } = deps;
  let running = 0;
  let arrivals = 0;
  const vacuum = createQueueVacuum(sql, { tables: ["projection_queue", "graphile_worker._private_jobs"], everyRows: 2000, minIntervalMs: 2000 });

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
        const rows = await takeOldest(tx, options.batchMax);
        taken = rows.map(stored);
        if (taken.length === 0) return;
        results = await projectQueued(tx, taken);
      });
      observe(results);
      load?.note(taken.length);
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
        const taken = await takeEvents(tx, group.map((e) => e.id));
        const own = group.filter((e) => taken.has(e.id));
        if (own.length === 0) return; // another drain has them
        try {
          results = await tx.savepoint((sp: TransactionSql) => projectQueued(sp, own));
        } catch (err) {
          if (isDatabaseUnavailable(err)) throw err;
          const order = { svcOrderId: own[0]!.svcOrderId, clientOrderId: own[0]!.clientOrderId };
          log.error({ err, cause, order }, "projection failed; the order is retried as its own job");
          const job = projectionJob(order.svcOrderId, order.clientOrderId);
          await tx`select graphile_worker.add_job(${PROJECT_TASK}, ${JSON.stringify(job.payload)}::text::json, job_key := ${job.key})`;
        }
      });
      observe(results);
    }
  };

  /**
   * Takes batches while they find events, holding the gate's `running` lock meanwhile (so
   * appends add no jobs); on an empty batch it closes the gate and takes a last batch,
   * which sees every event an append left to it. It ends when that batch is empty too
   * and no job arrived while it closed.
   */
  const loop = async () => {
    const gate = openDrainHold(deps.databaseUrl);
    try {
      await gate.hold();
      for (let conflicts = 0, closing = false, seen = arrivals; ; ) {
        if (deps.stopping?.aborted) {
          // Appends that found this loop running added no job: once the gate is closed
          // behind them, a job takes over whatever is still queued.
          if (!closing) await gate.close();
          await addDrainJobIfQueued(sql);
          return;
        }
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
        if (taken.length === 0) {
          if (closing && seen === arrivals) return;
          // A job that arrived while the gate closed was added after events this batch
          // may have missed: one more batch, after that arrival, takes them.
          if (!closing) await gate.close();
          closing = true;
          seen = arrivals;
          continue;
        }
        if (closing) {
          await gate.hold();
          closing = false;
        }
        const full = taken.length >= options.batchMax;
        // Behind (a full batch): a job, so that a worker process without a loop starts one
        // and takes batches beside this one. While a loop keeps up, appends add no jobs and
        // other processes' loops stay idle.
        if (full) await addDrainJobIfQueued(sql);
        const wait = full ? 0 : options.intervalMs - (Date.now() - started);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    } finally {
      gate.release();
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
