/**
 * The graphile-worker runner: every task, wired to tracklane's pool, logger and metrics.
 */
import { run } from "graphile-worker";
import type { Runner, TaskList } from "graphile-worker";
import type { Sql } from "postgres";
import type { Config } from "../config.ts";
import type { Db } from "../db/client.ts";
import type { ProviderClient } from "../provider/client.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { graphileLogger } from "./logger.ts";
import { AWB_CRONTAB, enqueueStartReplenish } from "../awb/jobs.ts";
import { awbPoll } from "./awb__poll.ts";
import { awbReplenish } from "./awb__replenish.ts";
import { commandExecute } from "./command__execute.ts";
import { orderProject } from "./order__project.ts";
import { orderReconcile, RECONCILE_CRONTAB, RECONCILE_TASK } from "./order__reconcile.ts";
import { projectionDrain } from "./projection__drain.ts";
import { createDrainer, DRAIN_CRONTAB, DRAIN_TASK } from "../projection/queue.ts";

export interface WorkerDeps {
  config: Config;
  databaseUrl: string;
  sql: Sql;
  db: Db;
  log: Logger;
  metrics: Metrics;
  /** The provider's API; absent only in tests that need no provider. */
  provider?: ProviderClient | undefined;
}

export function taskList(deps: WorkerDeps): TaskList {
  return {
    [DRAIN_TASK]: projectionDrain(createDrainer(deps, { intervalMs: deps.config.projection.intervalMs })),
    order__project: orderProject(deps),
    command__execute: commandExecute(deps),
    awb__replenish: awbReplenish(deps),
    awb__poll: awbPoll(deps),
    [RECONCILE_TASK]: orderReconcile(deps),
  };
}

export async function startWorker(deps: WorkerDeps): Promise<Runner> {
  const runner = await run({
    connectionString: deps.databaseUrl,
    concurrency: deps.config.worker.concurrency,
    maxPoolSize: deps.config.worker.concurrency + 2,
    // Jobs are enqueued with NOTIFY; polling is only the fallback.
    pollInterval: 1000,
    preset: {
      worker: {
        // The pool fetches (and locks) up to this many jobs in one query and hands them
        // out, instead of every idle worker asking the database for its own job (one drain
        // job arrives per ingest flush, and most complete at once).
        localQueue: { size: deps.config.worker.concurrency + 1 },
        // Completions stay one statement per job (-1, the default). Batched completion
        // (0 or more) deadlocked against add_job on keyed jobs when projection used a job
        // per order, and graphile-worker 0.18 does not retry a failed batch (the worker
        // stops taking jobs); keyed jobs remain (commands, AWB top-ups).
        completeJobBatchDelay: -1,
        failJobBatchDelay: -1,
      },
    },
    noHandleSignals: true,
    logger: graphileLogger(deps.log),
    taskList: taskList(deps),
    crontab: [AWB_CRONTAB, DRAIN_CRONTAB, RECONCILE_CRONTAB].join("\n"),
  });
  runner.events.on("job:success", ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: "success" }));
  runner.events.on("job:error", ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: "failure" }));
  await topUpAtStart(deps);
  return runner;
}

/**
 * A pool below the low watermark is topped up when a worker starts, not at the cron's
 * next minute. Best effort: should this fail, the cron still comes.
 */
async function topUpAtStart(deps: WorkerDeps): Promise<void> {
  try {
    if (await enqueueStartReplenish(deps.sql, deps.config.awb.lowWatermark)) {
      deps.log.info({ lowWatermark: deps.config.awb.lowWatermark }, "awb pool below the low watermark at start: top-up queued");
    }
  } catch (err) {
    deps.log.warn({ err }, "could not check the awb pool at start; the cron tops it up");
  }
}
