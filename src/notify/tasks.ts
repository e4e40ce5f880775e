/** The notifications' worker tasks: one endpoint's deliveries, and the sweep that restarts stalled ones. */
import { z } from "zod";
import { createQueueVacuum } from "../db/vacuum.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import type { WorkerDeps } from "../worker/deps.ts";
import { enqueueDelivery, endpointsWithDue } from "./deliveries.ts";
import { deliverDue, deliveryFailureLog, deliveryRunsOf } from "./deliver.ts";
import { DELIVER_TASK } from "./outbox.ts";

const SWEEP_TASK = "notify__sweep";

/**
 * Every minute: a run for each endpoint with due deliveries no run holds (a run that died,
 * a wake-up job that gave up). One at a time; the next tick is the retry.
 */
export const NOTIFY_CRONTAB = `* * * * * ${SWEEP_TASK} ?id=notify_sweep&jobKey=notify_sweep&queue=notify_sweep&max=1`;

const settingsOf = (deps: WorkerDeps) => ({
  timeoutMs: deps.config.notify.timeoutMs,
  retryScheduleS: deps.config.notify.retryScheduleS,
  allowPrivateUrls: deps.config.notify.allowPrivateUrls,
  burstEventsS: deps.config.notify.burstEventsS,
  burstMaxWaitS: deps.config.notify.burstMaxWaitS,
});

const notifyDeliver = defineTask(DELIVER_TASK, z.object({ endpoint_id: z.string().min(1) }), {
  // Every delivery is updated twice and its job inserted and deleted: vacuumed as the projection's queue is.
  setup: (deps) => ({
    vacuum: createQueueVacuum(deps.sql, { tables: ["notification_deliveries", "graphile_worker._private_jobs"], everyRows: 2000, minIntervalMs: 2000 }),
    runs: { active: 0, max: deliveryRunsOf(deps.config.worker.concurrency) },
    failures: deliveryFailureLog(deps.log.child({ task: DELIVER_TASK })),
  }),
  run: async (payload, { deps, shared, log, state: { vacuum, runs, failures } }) => {
    const deliverDeps = { sql: deps.sql, log, metrics: deps.metrics, settings: settingsOf(deps), load: shared.load, runs, failures, stopping: shared.stopping };
    vacuum.rowsDone(await deliverDue(deliverDeps, payload.endpoint_id));
  },
});

const notifySweep = defineTask(SWEEP_TASK, z.unknown(), async (_payload, { deps }) => {
  for (const endpoint of await endpointsWithDue(deps.sql)) await enqueueDelivery(deps.sql, endpoint);
});

export const notifyTasks: readonly TaskDefinition[] = [notifyDeliver, notifySweep];
