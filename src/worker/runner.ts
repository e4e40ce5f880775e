/**
 * The graphile-worker runner: every task of src/worker/tasks.ts, wired to tracklane's
 * pool, logger and metrics.
 */
import { run } from "graphile-worker";
import type { Runner, TaskList } from "graphile-worker";
import { enqueueStartReplenish } from "../awb/jobs.ts";
import { workerConnectionString } from "../db/tls.ts";
import type { RunnerShared, WorkerDeps } from "./deps.ts";
import { createLoadMeter } from "./load.ts";
import { fixLocalQueueRelease } from "./local-queue.ts";
import { graphileLogger } from "./logger.ts";
import { CRONTAB, TASKS } from "./tasks.ts";

export function taskList(deps: WorkerDeps, stopping: AbortSignal = new AbortController().signal): TaskList {
  const shared: RunnerShared = { load: createLoadMeter(), stopping };
  const list: TaskList = {};
  for (const task of TASKS) {
    if (list[task.name]) throw new Error(`two tasks are named ${task.name}`);
    list[task.name] = task.build(deps, shared);
  }
  return list;
}

export async function startWorker(deps: WorkerDeps): Promise<Runner> {
  if (!(await fixLocalQueueRelease())) deps.log.warn("graphile-worker's local queue is not the one tracklane fixes (local-queue.ts): a stop under load may log errors");
  const stop = new AbortController();
  const runner = await run({
    connectionString: await workerConnectionString(deps.databaseUrl),
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
    taskList: taskList(deps, stop.signal),
    crontab: CRONTAB.join("\n"),
  });
  // A drain loop runs for as long as events keep coming: a stopping runner tells it to end.
  runner.events.on("pool:gracefulShutdown", () => stop.abort());
  runner.events.on("pool:forcefulShutdown", () => stop.abort());
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
