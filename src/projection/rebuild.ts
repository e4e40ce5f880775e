import type { Sql } from "postgres";
import { projectOrder } from "./project.ts";

/**
 * Re-projects every order identity in the log (and every order row, so a row whose
 * events are gone is noticed). Rows that are already right are left untouched.
 */
export async function rebuildAll(sql: Sql, progress?: (done: number) => void): Promise<{ orders: number; changed: number }> {
  let done = 0;
  let changed = 0;
  const identities = sql<{ svc_order_id: string | null; client_order_id: string | null }[]>`
    select distinct svc_order_id, client_order_id from order_events
    union
    select svc_order_id, client_order_id from orders`.cursor(500);
  for await (const batch of identities) {
    for (const ids of batch) {
      const result = await projectOrder(sql, { svcOrderId: ids.svc_order_id, clientOrderId: ids.client_order_id });
      if (result?.changed) changed++;
      if (++done % 1000 === 0) progress?.(done);
    }
  }
  return { orders: done, changed };
}
