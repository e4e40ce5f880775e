/**
 * The AWB pool's worker tasks; the work itself is in topup.ts, names and payloads in jobs.ts.
 */
import { POLL_TASK, pollPayload, REPLENISH_TASK, replenishPayload } from "./jobs.ts";
import { pollFresh, replenish } from "./topup.ts";
import type { TopUpDeps } from "./topup.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskContext, TaskDefinition } from "../worker/define-task.ts";

const topUpDeps = ({ deps, shared, log }: TaskContext): TopUpDeps => ({ sql: deps.sql, provider: deps.provider, settings: deps.config.awb, log, stopping: shared.stopping });

/**
 * Tops the AWB pool up (cron, allocation below the low watermark, empty pool, or
 * POST /v1/awb/replenish). Runs in the `awb` queue: one top-up at a time.
 */
const awbReplenish = defineTask(REPLENISH_TASK, replenishPayload, async (payload, ctx) => {
  await replenish(topUpDeps(ctx), payload, ctx.job);
});

/**
 * Polls one fresh AWB request; while the provider is still generating, schedules the next
 * poll as a job (never a sleeping worker).
 */
const awbPoll = defineTask(POLL_TASK, pollPayload, async (payload, ctx) => {
  await pollFresh(topUpDeps(ctx), payload, ctx.job);
});

export const awbTasks: readonly TaskDefinition[] = [awbReplenish, awbPoll];
