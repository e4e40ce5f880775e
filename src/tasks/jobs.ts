/**
 * Job payloads and keys, shared by the code that enqueues jobs (often through SQL) and
 * the tasks that run them. Payloads are parsed with zod on the task side: queued jobs
 * outlive code changes.
 */
import { z } from "zod";

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
  return { key: `order__project:${JSON.stringify([svcOrderId, clientOrderId])}`, payload };
}
