/**
 * What worker tasks are given: the process's shared pieces (WorkerDeps) and what a task
 * knows about the job it runs (JobInfo). Types only, so features can name them freely.
 */
import type { Sql } from "postgres";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { ProviderClient } from "../provider/client.ts";
import type { LoadMeter } from "./load.ts";

export interface WorkerDeps {
  config: Config;
  databaseUrl: string;
  sql: Sql;
  log: Logger;
  metrics: Metrics;
  /** The provider's API; absent only in tests that need no provider. */
  provider?: ProviderClient | undefined;
}

/** What the tasks of one runner share (made by taskList). */
export interface RunnerShared {
  /** Events this runner projected lately: the drain notes them, deliveries yield to a burst. */
  load: LoadMeter;
  /** Aborts when the runner begins to stop: work that would go on by itself hands over and ends. */
  stopping: AbortSignal;
}

/** What a task knows about the job it runs. */
export interface JobInfo {
  /** graphile-worker's id of the job (absent where a handler is called outside a job). */
  id?: string;
  /** graphile-worker will not retry if this run throws. */
  lastAttempt: boolean;
  attempts: number;
  key: string | null;
}
