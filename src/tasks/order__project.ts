import type { Task } from "graphile-worker";
import type { Sql } from "postgres";
import type { Logger } from "../logger.ts";
import { projectOrders, reportPlacements } from "../projection/project.ts";
import type { Metrics } from "../metrics.ts";
import { projectPayload } from "./jobs.ts";

/**
 * Re-derives one order from its events. Projection normally runs in drain batches
 * (projection__drain); an order whose projection failed inside a batch is retried alone
 * here, with graphile-worker's backoff.
 */
export function orderProject(deps: { sql: Sql; metrics: Metrics; log: Logger }): Task {
  return async (raw, helpers) => {
    const payload = projectPayload.safeParse(raw);
    if (!payload.success) {
      // Retrying cannot fix a malformed payload: record why and give up.
      helpers.logger.error("order__project: invalid payload, dropped", { issues: payload.error.issues });
      return;
    }
    const [result] = await projectOrders(deps.sql, [
      { svcOrderId: payload.data.svc_order_id, clientOrderId: payload.data.client_order_id },
    ]);
    if (result?.changed && result.newestReceivedAt) {
      deps.metrics.projectionLag.observe(Math.max(0, Date.now() - result.newestReceivedAt.getTime()) / 1000);
    }
    if (result) reportPlacements(deps.log, [result]);
  };
}
