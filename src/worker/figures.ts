/**
 * Figures of graphile-worker's job table for /metrics and the console's system page, and
 * the database connections of tracklane's roles: read with tracklane's pool, so a web
 * process reports them without loading graphile-worker.
 */
import { POOL_NAMES } from "../db/client.ts";
import type { Tx } from "../db/client.ts";

/**
 * Jobs that used up their attempts and that no worker is running, by task. A running job
 * counts as running whatever its attempts: one on its last attempt has not failed yet, and
 * graphile-worker gives a running job all its attempts when an add_job replaces it by its
 * key (the new job waits; the running one ends with its run), which every notification
 * delivery run and every command retry does: counted as failed, a busy worker showed
 * failed jobs that never were. graphile-worker's own clean-up takes the same view.
 */
export async function failedJobCounts(sql: Tx): Promise<{ task: string; n: number }[]> {
  return await sql<{ task: string; n: number }[]>`
    select task_identifier as task, count(*)::int as n from graphile_worker.jobs
    where attempts >= max_attempts and locked_at is null group by 1`;
}

export interface JobQueueDepth {
  /** Due now, nobody on them yet. */
  waiting: number;
  /** Due later: scheduled, or waiting for a retry. */
  scheduled: number;
  /** Locked by a worker (on its last attempt or not). */
  running: number;
  /** Used up their attempts, and not running (failedJobCounts). */
  failed: number;
  /**
   * How long (seconds) the oldest waiting job has been due: about 0 while workers keep up,
   * growing while none runs (or all are busy, or a job waits behind its queue's running one).
   */
  oldestWaitingSeconds: number;
}

/** graphile-worker's jobs by where they are (its job table holds only unfinished jobs: done ones are deleted). */
export async function jobQueueDepth(sql: Tx): Promise<JobQueueDepth> {
  const [row] = await sql<JobQueueDepth[]>`
    select count(*) filter (where attempts < max_attempts and locked_at is null and run_at <= now())::int as waiting,
           count(*) filter (where attempts < max_attempts and locked_at is null and run_at > now())::int as scheduled,
           count(*) filter (where locked_at is not null)::int as running,
           count(*) filter (where attempts >= max_attempts and locked_at is null)::int as failed,
           coalesce(extract(epoch from now() - min(run_at) filter (where attempts < max_attempts and locked_at is null and run_at <= now())), 0)::float8
             as "oldestWaitingSeconds"
    from graphile_worker.jobs`;
  return row ?? { waiting: 0, scheduled: 0, running: 0, failed: 0, oldestWaitingSeconds: 0 };
}

/**
 * Worker processes connected to this database: each holds one liveness connection for its
 * life (worker/supervisor.ts), whichever role started it (npm run worker, npm start). 0
 * while none runs: no job runs and nothing is projected.
 */
export async function workerProcesses(sql: Tx): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity
    where datname = current_database() and application_name = ${POOL_NAMES.workerLiveness}`;
  return row?.n ?? 0;
}

/**
 * Connections to this database by application_name (tracklane names each role's pool:
 * tracklane-web, tracklane-worker; graphile-worker's own pool and other clients show as
 * they name themselves), with how many are running a statement now.
 */
export async function connectionsByApplication(sql: Tx): Promise<{ application: string; connections: number; active: number }[]> {
  return await sql<{ application: string; connections: number; active: number }[]>`
    select application_name as application, count(*)::int as connections,
           count(*) filter (where state = 'active')::int as active
    from pg_stat_activity
    where datname = current_database() and backend_type = 'client backend'
    group by 1
    order by 1`;
}
