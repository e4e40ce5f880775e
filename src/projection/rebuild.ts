import type { Sql } from "postgres";
import { everyIdentity } from "../events/log.ts";
import { isConflict, projectOrders } from "./project.ts";
import type { ProjectResult } from "./project.ts";

/** Attempts of one page before the rebuild gives up (conflicts with running drains). */
const MAX_ATTEMPTS = 10;

/**
 * Re-derives every order from the whole log (queued events no drain holds included) and
 * checks every order row, so a row whose events are gone is noticed. Rows that are already
 * right are left untouched. Safe while workers run: a page that meets a drain in a
 * deadlock is rolled back by PostgreSQL and projected again.
 */
export async function rebuildAll(sql: Sql, progress?: (done: number) => void): Promise<{ orders: number; changed: number }> {
  let done = 0;
  let changed = 0;
  for await (const batch of everyIdentity(sql)) {
    // One set-based projection per page of identities (the worker's own code path).
    const results = await withRetry(() => projectOrders(sql, batch.map((ids) => ({ svcOrderId: ids.svc_order_id, clientOrderId: ids.client_order_id }))));
    // Identities of one order share its result: count each changed order once.
    changed += new Set(results.filter((r) => r?.changed).map((r) => r!.orderId)).size;
    const before = done;
    done += batch.length;
    if (Math.floor(done / 1000) > Math.floor(before / 1000)) progress?.(done);
  }
  return { orders: done, changed };
}

async function withRetry(project: () => Promise<(ProjectResult | null)[]>): Promise<(ProjectResult | null)[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await project();
    } catch (err) {
      if (!isConflict(err) || attempt >= MAX_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 10 * attempt));
    }
  }
}
