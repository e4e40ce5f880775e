/**
 * Keeps graphile-worker running through what its runner does not survive alone: a
 * database lost mid-job replaces the runner once the database is back, and the jobs of a
 * runner that died locked (its session advisory lock gone) are unlocked within seconds
 * instead of after graphile's 4 hours. docs/reliability.md says more.
 */
import type { Runner } from "graphile-worker";
import type { Sql } from "postgres";
import { createPool, isConnectionLost, isDatabaseUnavailable, POOL_NAMES } from "../db/client.ts";
import type { WorkerDeps } from "./deps.ts";
import { startWorker } from "./runner.ts";

/** First key of the runners' liveness advisory locks (the second is hashtext(pool id)). */
const LIVENESS_LOCK_CLASS = 7305;
/** Jobs locked more recently are left alone: their runner may not have taken its lock yet. */
const GRACE_SECONDS = 5;
/** How often locks are re-taken (after a reconnect) and dead runners' jobs unlocked. */
const SWEEP_MS = 3000;
/** How long a failed runner gets to stop before it is abandoned. */
const STOP_TIMEOUT_MS = 5000;
/** How long a stopping worker waits for its running jobs. */
const JOBS_STOP_MS = 15_000;
/** Jobs that succeeded this recently may still lack their completion when a runner stops. */
const COMPLETION_MS = 60_000;

export interface SupervisedWorker {
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A runner that is stopping (replaced, or shut down by graphile-worker itself) failing to
 * write back: its pool is gone, or its prefetched jobs could not be handed back. Those
 * jobs stay locked by it until the sweep frees them.
 */
const STOPPED_RUNNER = /^(Cannot use a pool after calling end on the pool|Error occurred whilst returning jobs from local queue)/;

async function within(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work.catch(() => {}), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** A job removed as its run was cut off (releaseRuns). */
export interface EndedRun {
  id: string;
  task: string;
}

/**
 * A run that succeeded, as graphile-worker fetched its job: the row is still that run's
 * while the same runner holds it under the same revision and attempt count.
 */
export interface SucceededRun {
  id: string;
  lockedBy: string;
  attempts: number;
  revision: number;
}

/**
 * Unlocks the jobs that runners which are gone (killed, stopped, replaced) still hold, so
 * that they run again, and completes those of them that `succeeded`, in one transaction (no
 * other worker takes one in between). Only a row still held by the runner that ran it,
 * under the revision and attempt it ran with, is that run's: one unlocked meanwhile (a
 * sweep, a replaced runner's release) may have been run again, or taken over in place by
 * an add_job with its key (new payload, run_at and attempts, same id), and is another
 * run's work. A job with no attempt left and no error recorded (graphile-worker leaves it
 * at max_attempts without its key when add_job replaces a running job: a newer job with
 * its key does its work; or a job allowed one attempt, the cron's, whose next tick is its
 * retry) would never run again, and stayed behind as failed for good, with nothing to say
 * why: it is removed too, and returned.
 */
export async function releaseRuns(sql: Sql, pools: readonly string[], succeeded: readonly SucceededRun[] = []): Promise<EndedRun[]> {
  const runs = succeeded.filter((r) => pools.includes(r.lockedBy));
  return await sql.begin(async (tx) => {
    const spent = await tx<EndedRun[]>`
      select id::text, task_identifier as task from graphile_worker.jobs
      where locked_by = any(${pools as string[]}::text[]) and key is null and attempts >= max_attempts and last_error is null`;
    // graphile-worker's own table, read and row-locked only (its jobs view cannot be locked);
    // a stripped key (add_job while it ran) sets attempts to max_attempts and is still this run.
    const finished =
      runs.length === 0
        ? []
        : await tx<{ id: string }[]>`
            select j.id::text from graphile_worker._private_jobs j
            join unnest(${runs.map((r) => r.id)}::bigint[], ${runs.map((r) => r.lockedBy)}::text[],
                        ${runs.map((r) => r.attempts)}::int[], ${runs.map((r) => r.revision)}::int[])
              as s(id, locked_by, attempts, revision) on j.id = s.id
            where j.locked_by = s.locked_by and j.revision = s.revision
              and (j.attempts = s.attempts or (j.key is null and j.attempts = j.max_attempts))
            for update of j`;
    await tx`select graphile_worker.force_unlock_workers(${pools as string[]}::text[])`;
    const done = [...new Set([...finished.map((r) => r.id), ...spent.map((r) => r.id)])];
    if (done.length > 0) await tx`select graphile_worker.complete_jobs(${done}::bigint[])`;
    return spent;
  });
}

/** Unlocks the jobs of runners that hold no liveness lock (and are not ours); the runners and what releaseRuns removed. */
async function sweep(sql: Sql, ours: ReadonlySet<string>): Promise<{ dead: string[]; ended: EndedRun[] }> {
  const rows = await sql<{ pool: string }[]>`
    select pool from (
      select distinct locked_by as pool from graphile_worker.jobs
      where locked_by is not null and locked_at < now() - ${GRACE_SECONDS}::int * interval '1 second'
    ) as stale
    where pg_try_advisory_xact_lock(${LIVENESS_LOCK_CLASS}, hashtext(pool))`;
  const dead = rows.map((r) => r.pool).filter((p) => !ours.has(p));
  const ended = dead.length > 0 ? await releaseRuns(sql, dead) : [];
  return { dead, ended };
}

/** `start` makes a runner (startWorker; a test may wrap it). */
export async function superviseWorker(deps: WorkerDeps, start: (deps: WorkerDeps) => Promise<Runner> = startWorker): Promise<SupervisedWorker> {
  const log = deps.log.child({ component: "worker-supervisor" });
  // One connection for the life of the process: it holds the liveness locks.
  const liveness = createPool(deps.databaseUrl, 1, POOL_NAMES.workerLiveness, { idle_timeout: 0, max_lifetime: 0 });
  const ours = new Set<string>(); // pool ids of the runner in use
  let held = new Set<string>(); // ... whose lock this session holds
  let session: number | undefined;
  let current: Runner | undefined;
  let stopping = false;
  let replacing: Promise<void> | undefined;
  /** Runners whose promise rejected: a runner that failed while a replacement ran is replaced after it. */
  const failed = new WeakSet<Runner>();
  /**
   * Jobs that succeeded lately (id, when). graphile-worker 0.18 writes a completion in a
   * promise nobody waits for, and a runner that stops closes its pool without waiting
   * either: a job that ended as the worker stopped kept its row, was unlocked by the stop,
   * and ran again on another worker; one allowed a single attempt (the cron's sweeps,
   * drains and reconciliation) stayed behind as failed for good instead.
   */
  const succeeded = new Map<string, SucceededRun & { at: number }>();

  /** Takes the locks not held yet (all of them again after a reconnect). */
  const holdLocks = async () => {
    const [row] = await liveness<{ pid: number }[]>`select pg_backend_pid() as pid`;
    if (row!.pid !== session) {
      session = row!.pid;
      held = new Set();
    }
    const missing = [...ours].filter((id) => !held.has(id));
    if (missing.length === 0) return;
    // Not waiting: a sweep may hold one for an instant; the next tick tries again.
    const taken = await liveness<{ id: string }[]>`
      select id from unnest(${missing}::text[]) as id where pg_try_advisory_lock(${LIVENESS_LOCK_CLASS}, hashtext(id))`;
    taken.forEach(({ id }) => held.add(id));
  };

  let ticking = false;
  const tick = async () => {
    if (ticking) return;
    ticking = true;
    try {
      await holdLocks();
      const { dead, ended } = await sweep(deps.sql, ours);
      if (dead.length > 0) log.warn({ runners: dead, ended }, "unlocked the jobs of job runners that stopped without releasing them");
    } catch (err) {
      if (!isDatabaseUnavailable(err)) log.error({ err }, "job runner liveness check failed");
    } finally {
      ticking = false;
    }
  };

  const launch = async (): Promise<Runner> => {
    const runner = await start(deps);
    // A runner's id (graphile-worker's pool id) shows on the jobs it locks.
    runner.events.on("job:success", ({ job }) => {
      const now = Date.now();
      for (const [id, run] of succeeded) {
        if (now - run.at < COMPLETION_MS) break; // in the order they succeeded
        succeeded.delete(id);
      }
      if (job.locked_by) succeeded.set(job.id, { id: job.id, lockedBy: job.locked_by, attempts: job.attempts, revision: job.revision, at: now });
    });
    runner.events.on("job:start", ({ job }) => {
      if (job.locked_by && !ours.has(job.locked_by)) {
        ours.add(job.locked_by);
        void tick();
      }
    });
    runner.promise.catch((err: unknown) => {
      failed.add(runner);
      if (current === runner) replace(err);
    });
    return runner;
  };

  /**
   * Stops a failed runner, waits for the database, starts a new one, unlocks the old one's
   * jobs. A failure reported meanwhile is the old runner's (ignored), or the new one's: a
   * runner that failed as it started (before it was current) or while the old one's jobs
   * were unlocked is replaced in turn, rather than left in place with its jobs locked.
   */
  const replace = (reason: unknown) => {
    if (replacing || stopping) return;
    replacing = replaceRunner(reason).finally(() => {
      replacing = undefined;
      if (current !== undefined && failed.has(current)) replace(new Error("the new job runner failed as it started"));
    });
  };

  const replaceRunner = async (reason: unknown) => {
    log.warn({ err: reason }, "job runner lost the database; replacing it once the database is back");
    const old = current;
    const retired = [...ours];
    current = undefined;
    if (old) await within(STOP_TIMEOUT_MS, old.stop());
    ours.clear();
    for (let delay = 200; !stopping; delay = Math.min(delay * 2, 5000)) {
      try {
        await deps.sql`select 1`;
        current = await launch();
        break;
      } catch (err) {
        log.debug({ err }, "database still unavailable");
        await sleep(delay);
      }
    }
    if (retired.length > 0) {
      await liveness`select pg_advisory_unlock(${LIVENESS_LOCK_CLASS}, hashtext(id)) from unnest(${retired}::text[]) as id`.catch(() => {});
      retired.forEach((id) => held.delete(id));
      await releaseRuns(deps.sql, retired, [...succeeded.values()]).catch(() => {}); // else the sweep does it
    }
    if (current) log.info("job runner replaced");
  };

  // graphile-worker records a job's outcome in a promise it does not await: a database
  // error there is an unhandled rejection. Anything else unhandled stays fatal, as in Node.
  const onUnhandled = (reason: unknown) => {
    if (isConnectionLost(reason)) {
      replace(reason);
      return;
    }
    if (reason instanceof Error && STOPPED_RUNNER.test(reason.message)) {
      log.warn({ err: reason }, "a stopped job runner could not write back; the sweep unlocks its jobs");
      return;
    }
    log.fatal({ err: reason }, "unhandled promise rejection");
    log.flush();
    process.exit(1);
  };
  process.on("unhandledRejection", onUnhandled);
  // The same losses can also surface as an 'error' event that nobody listens to (a
  // node-postgres client dropped while connecting or ending): the runner is replaced,
  // as for a rejection, instead of the process dying. Anything else stays fatal.
  const onUncaught = (err: Error) => {
    if (isConnectionLost(err)) {
      replace(err);
      return;
    }
    log.fatal({ err }, "uncaught exception");
    log.flush();
    process.exit(1);
  };
  process.on("uncaughtException", onUncaught);

  current = await launch();
  const timer = setInterval(() => void tick(), SWEEP_MS);
  timer.unref();
  void tick();

  return {
    async stop() {
      stopping = true;
      clearInterval(timer);
      await replacing;
      // Running jobs finish, but not forever: a provider call hangs at most
      // PROVIDER_TIMEOUT_MS, and a job still running after this is released by the
      // liveness sweep of the next worker (its runner's lock goes with this process).
      await within(JOBS_STOP_MS, current?.stop() ?? Promise.resolve());
      // A completion graphile-worker had not written when stop() returned leaves its job
      // locked by a runner that is gone: unlock now rather than at the next sweep, and
      // complete the jobs that succeeded, in the same transaction (no other worker takes
      // one in between). A job whose completion did land is gone already; one no longer
      // held by the run that succeeded is another run's, and left alone (releaseRuns).
      if (ours.size > 0) await releaseRuns(deps.sql, [...ours], [...succeeded.values()]).catch(() => {});
      await liveness.end({ timeout: 5 });
      process.off("unhandledRejection", onUnhandled);
      process.off("uncaughtException", onUncaught);
    },
  };
}
