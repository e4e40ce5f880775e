/**
 * The graphile-worker runner: every task, wired to tracklane's pool, logger and metrics.
 */
import { run } from "graphile-worker";
import type { Runner, TaskList } from "graphile-worker";
import type { Sql } from "postgres";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { graphileLogger } from "./logger.ts";
import { orderProject } from "./order__project.ts";

export interface WorkerDeps {
  databaseUrl: string;
  sql: Sql;
  log: Logger;
  metrics: Metrics;
  concurrency: number;
}

export function taskList(deps: WorkerDeps): TaskList {
  return {
    order__project: orderProject(deps),
  };
}

export async function startWorker(deps: WorkerDeps): Promise<Runner> {
  const runner = await run({
    connectionString: deps.databaseUrl,
    concurrency: deps.concurrency,
    maxPoolSize: deps.concurrency + 2,
    // Jobs are enqueued with NOTIFY; polling is only the fallback.
    pollInterval: 1000,
    noHandleSignals: true,
    logger: graphileLogger(deps.log),
    taskList: taskList(deps),
  });
  runner.events.on("job:success", ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: "success" }));
  runner.events.on("job:error", ({ job }) => deps.metrics.jobs.inc({ task: job.task_identifier, outcome: "failure" }));
  return runner;
}
