/**
 * graphile-worker's named queues, pruned. graphile-worker keeps a row in
 * `_private_job_queues` for every queue name a job was ever added with, and never removes
 * one by itself; tracklane names a queue per order (`order:<id>`, commands/store.ts) and
 * per notification endpoint. Every job fetch scans and locks the free queue rows, so its
 * cost grew with every order ever commanded: measured here, a fetch took 2 ms with a few
 * hundred rows, 10 ms with 5,000, 120 ms with 100,000 and 290 ms with 1,000,000, for each
 * job the worker runs. The rows of queues that hold no job are deleted every few minutes.
 *
 * Race-free with add_job: add_job makes sure its queue's row exists in one statement and
 * then inserts the job, pointing at that row, in the next, and a job whose row is gone is
 * never run. Each batch here first locks the table in SHARE ROW EXCLUSIVE mode, which
 * waits for every transaction that has run an add_job naming a queue (that statement holds
 * ROW EXCLUSIVE on the table until the transaction ends) and holds off new ones until the
 * batch commits: the jobs the delete looks for are all committed, and an add_job that
 * waited finds its queue's row gone and makes a new one.
 */
import type { Sql } from "postgres";
import { z } from "zod";
import { defineTask } from "./define-task.ts";
import type { TaskDefinition } from "./define-task.ts";

/**
 * Rows deleted per transaction. A batch holds the table's lock (which stops add_job and
 * job fetches) for the time its delete takes, which the scan of the jobs table sets more
 * than the batch does: measured here with 100,000 empty queue rows, 15-20 ms with 5,000
 * jobs waiting and 35-40 ms with 100,000, for 5,000 rows as for 500.
 */
export const PRUNE_BATCH = 5000;
/**
 * How long a batch tries to get the table's lock. A transaction that added a job and is
 * still open (or a worker mid-fetch) holds it up, and while the lock is asked for, every
 * add_job (an API request's, a callback's) and job fetch queues behind the request: so
 * each try waits PRUNE_LOCK_TRY_MS at most, and lets them through before the next.
 * Past this, the rest waits for the next run.
 */
export const PRUNE_LOCK_TIMEOUT_MS = 1000;
/** How long one try waits for the lock (PostgreSQL's lock_timeout), stalling add_job meanwhile. */
export const PRUNE_LOCK_TRY_MS = 50;
/** The pause between two tries, in which what queued behind the last one runs. */
const PRUNE_LOCK_PAUSE_MS = 100;

export interface PruneOptions {
  batch?: number;
  lockTimeoutMs?: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** lock_not_available: the lock was not granted within lock_timeout. */
const isLockNotAvailable = (err: unknown) => (err as { code?: unknown } | null)?.code === "55P03";

/**
 * Deletes the rows of queues that hold no job and that no worker holds, a batch per
 * transaction, until a batch comes back short. How many went, and whether a batch gave up
 * waiting for the lock (the rest then waits for the next run).
 */
export async function pruneEmptyQueues(sql: Sql, options: PruneOptions = {}): Promise<{ pruned: number; lockNotGranted: boolean }> {
  const batch = options.batch ?? PRUNE_BATCH;
  const lockTimeoutMs = options.lockTimeoutMs ?? PRUNE_LOCK_TIMEOUT_MS;
  let pruned = 0;
  for (;;) {
    const deadline = Date.now() + lockTimeoutMs;
    let n: number | undefined;
    while (n === undefined) {
      try {
        n = await sql.begin(async (tx) => {
          await tx`select set_config('lock_timeout', ${`${Math.min(PRUNE_LOCK_TRY_MS, lockTimeoutMs)}ms`}, true)`;
          await tx`lock table graphile_worker._private_job_queues in share row exclusive mode`;
          const rows = await tx`
            delete from graphile_worker._private_job_queues
            where id in (
              select q.id from graphile_worker._private_job_queues q
              where q.locked_at is null
                and not exists (select 1 from graphile_worker._private_jobs j where j.job_queue_id = q.id)
              limit ${batch})`;
          return rows.count;
        });
      } catch (err) {
        if (!isLockNotAvailable(err)) throw err;
        if (Date.now() + PRUNE_LOCK_PAUSE_MS >= deadline) return { pruned, lockNotGranted: true };
        await sleep(PRUNE_LOCK_PAUSE_MS);
      }
    }
    pruned += n;
    if (n < batch) return { pruned, lockNotGranted: false };
  }
}

const PRUNE_TASK = "worker__prune_queues";

/** Every five minutes, one run across all workers, at most one attempt (the next tick is the retry). */
export const QUEUES_CRONTAB = `*/5 * * * * ${PRUNE_TASK} ?id=prune_queues&jobKey=prune_queues&queue=prune-queues&max=1`;

const pruneQueues = defineTask(PRUNE_TASK, z.unknown(), async (_payload, { deps, log }) => {
  const { pruned, lockNotGranted } = await pruneEmptyQueues(deps.sql);
  if (pruned > 0) log.debug({ pruned }, "empty job queues removed");
  if (lockNotGranted) log.info({ pruned, lockTimeoutMs: PRUNE_LOCK_TIMEOUT_MS }, "empty job queues: the queue table's lock was not granted in time; the rest go at the next run");
});

export const queueTasks: readonly TaskDefinition[] = [pruneQueues];
