/**
 * The `order__project` job's payload and key, shared by the drain that enqueues it
 * (queue.ts, through SQL) and the task that runs it (tasks.ts).
 */
import { z } from "zod";

export const PROJECT_TASK = "order__project";

export const projectPayload = z.object({
  svc_order_id: z.string().nullable(),
  client_order_id: z.string().nullable(),
});
export type ProjectPayload = z.infer<typeof projectPayload>;

/**
 * A projection job of its own for one order (one pending job per order identity:
 * graphile-worker job_key, replace mode), for an order whose projection failed in a
 * drain batch (src/projection/queue.ts).
 */
export function projectionJob(svcOrderId: string | null, clientOrderId: string | null) {
  const payload: ProjectPayload = { svc_order_id: svcOrderId, client_order_id: clientOrderId };
  // JSON keeps the two ids apart whatever characters they hold.
  return { key: `${PROJECT_TASK}:${JSON.stringify([svcOrderId, clientOrderId])}`, payload };
}
