/** The reconciliation's worker task and its cron line; the work itself is in reconcile.ts. */
import { z } from "zod";
import { reconcileDue } from "./reconcile.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";

const RECONCILE_TASK = "order__reconcile";

/**
 * Every minute, one run across all workers (graphile-worker's cron runs each item once per
 * tick), never two at once: a run may outlast its minute, and a job key alone does not
 * stop the next tick's job from starting beside it, a queue does. At most one attempt:
 * the next tick is the retry.
 */
export const RECONCILE_CRONTAB = `* * * * * ${RECONCILE_TASK} ?id=order_reconcile&jobKey=order_reconcile&queue=reconcile&max=1`;

/** Asks the provider for the status of active orders that fell silent (src/reconcile/). The payload is not read. */
const orderReconcile = defineTask(RECONCILE_TASK, z.unknown(), async (_payload, { deps, shared, log }) => {
  await reconcileDue({
    sql: deps.sql,
    provider: deps.provider,
    log,
    afterMin: deps.config.provider.reconcileAfterMin,
    timeZone: deps.config.provider.timezone,
    stopping: shared.stopping,
  });
});

export const reconcileTasks: readonly TaskDefinition[] = [orderReconcile];
