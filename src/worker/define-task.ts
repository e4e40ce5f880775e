/**
 * One way to write a graphile-worker task: the payload parsed with zod (queued jobs
 * outlive code changes), a logger naming the task and job, then the feature's handler.
 */
import type { Job, JobHelpers, Task } from "graphile-worker";
import type { z } from "zod";
import type { Logger } from "../logger.ts";
import type { JobInfo, RunnerShared, WorkerDeps } from "./deps.ts";

export interface TaskContext<State = undefined> {
  deps: WorkerDeps;
  /** What every task of the runner shares (its load meter). */
  shared: RunnerShared;
  /** deps.log with the task's name and the job's id. */
  log: Logger;
  job: JobInfo;
  /** What the task's `setup` made for this runner (undefined without one). */
  state: State;
}

export type TaskHandler<Payload, State = undefined> = (payload: Payload, ctx: TaskContext<State>) => Promise<void>;

/** A handler with state that a runner's jobs share (the projection's drainer). */
export interface StatefulHandler<Payload, State> {
  /** Runs once per runner (per `build`). */
  setup: (deps: WorkerDeps, shared: RunnerShared) => State;
  run: TaskHandler<Payload, State>;
}

/** A task, ready to be wired to a runner's dependencies. */
export interface TaskDefinition {
  readonly name: string;
  build(deps: WorkerDeps, shared: RunnerShared): Task;
}

function jobInfo(job: Pick<Job, "id" | "attempts" | "max_attempts" | "key">): JobInfo {
  return { id: job.id, lastAttempt: job.attempts >= job.max_attempts, attempts: job.attempts, key: job.key };
}

/**
 * A task named `name` whose payload must match `payloadSchema`. An invalid payload is
 * logged at error and the job ends (no retry can fix it); a handler that throws fails the
 * job, which graphile-worker retries.
 */
export function defineTask<S extends z.ZodType>(name: string, payloadSchema: S, handler: TaskHandler<z.output<S>>): TaskDefinition;
export function defineTask<S extends z.ZodType, State>(name: string, payloadSchema: S, handler: StatefulHandler<z.output<S>, State>): TaskDefinition;
export function defineTask<S extends z.ZodType, State>(
  name: string,
  payloadSchema: S,
  handler: TaskHandler<z.output<S>> | StatefulHandler<z.output<S>, State>,
): TaskDefinition {
  if (typeof handler === "function") return withState(name, payloadSchema, { setup: () => undefined, run: handler });
  return withState(name, payloadSchema, handler);
}

function withState<S extends z.ZodType, State>(name: string, payloadSchema: S, handler: StatefulHandler<z.output<S>, State>): TaskDefinition {
  return {
    name,
    build(deps, shared) {
      const state = handler.setup(deps, shared);
      return async (raw: unknown, helpers: JobHelpers) => {
        const log = deps.log.child({ task: name, job: helpers.job.id });
        const payload = payloadSchema.safeParse(raw);
        if (!payload.success) {
          log.error({ issues: payload.error.issues }, `${name}: invalid payload, dropped`);
          return;
        }
        await handler.run(payload.data, { deps, shared, log, job: jobInfo(helpers.job), state });
      };
    },
  };
}
