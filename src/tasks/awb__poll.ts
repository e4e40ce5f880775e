import type { Task } from "graphile-worker";
import { pollPayload } from "../awb/jobs.ts";
import { pollFresh } from "../awb/topup.ts";
import type { WorkerDeps } from "./runner.ts";

/**
 * Polls one fresh AWB request; while the provider is still generating, schedules the next
 * poll as a job (never a sleeping worker).
 */
export function awbPoll(deps: WorkerDeps): Task {
  return async (raw, helpers) => {
    const payload = pollPayload.safeParse(raw);
    if (!payload.success) {
      helpers.logger.error("awb__poll: invalid payload, dropped", { issues: payload.error.issues });
      return;
    }
    await pollFresh(
      { sql: deps.sql, provider: deps.provider, settings: deps.config.awb, log: deps.log },
      payload.data,
      { lastAttempt: helpers.job.attempts >= helpers.job.max_attempts, attempts: helpers.job.attempts, key: helpers.job.key },
    );
  };
}
