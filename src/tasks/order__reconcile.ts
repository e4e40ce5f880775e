import type { Task } from "graphile-worker";
import { reconcileDue } from "../reconcile/reconcile.ts";
import type { WorkerDeps } from "./runner.ts";

export const RECONCILE_TASK = "order__reconcile";

/**
 * Every minute, one run across all workers (graphile-worker's cron runs each item once per
 * tick), never two at once: a run may outlast its minute, and a job key alone does not
 * stop the next tick's job from starting beside it, a queue does. At most one attempt:
 * the next tick is the retry.
 */
export const RECONCILE_CRONTAB = `* * * * * ${RECONCILE_TASK} ?id=order_reconcile&jobKey=order_reconcile&queue=reconcile&max=1`;

/** Asks the provider for the status of active orders that fell silent (src/reconcile/). */
export function orderReconcile(deps: WorkerDeps): Task {
  return async () => {
    await reconcileDue({
      sql: deps.sql,
      provider: deps.provider,
      log: deps.log.child({ task: RECONCILE_TASK }),
      afterMin: deps.config.provider.reconcileAfterMin,
      timeZone: deps.config.provider.timezone,
    });
  };
}
