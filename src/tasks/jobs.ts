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
 * One pending projection job per order identity: a burst of events for an order
 * collapses into one job (graphile-worker job_key, replace mode).
 */
export function projectionJob(svcOrderId: string | null, clientOrderId: string | null) {
  const payload: ProjectPayload = { svc_order_id: svcOrderId, client_order_id: clientOrderId };
  // JSON keeps the two ids apart whatever characters they hold.
  return { key: `order__project:${JSON.stringify([svcOrderId, clientOrderId])}`, payload };
}
