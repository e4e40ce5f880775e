import type { Task } from "graphile-worker";
import { replenishPayload } from "../awb/jobs.ts";
import { replenish } from "../awb/topup.ts";
import type { WorkerDeps } from "./runner.ts";

/**
 * Tops the AWB pool up (cron, allocation below the low watermark, empty pool, or
 * POST /v1/awb/replenish). Runs in the `awb` queue: one top-up at a time.
 */
export function awbReplenish(deps: WorkerDeps): Task {
  return async (raw, helpers) => {
    const payload = replenishPayload.safeParse(raw);
    if (!payload.success) {
      helpers.logger.error("awb__replenish: invalid payload, dropped", { issues: payload.error.issues });
      return;
    }
    await replenish(
      { sql: deps.sql, provider: deps.provider, settings: deps.config.awb, log: deps.log },
      payload.data,
      { lastAttempt: helpers.job.attempts >= helpers.job.max_attempts, attempts: helpers.job.attempts, key: helpers.job.key },
    );
  };
}
