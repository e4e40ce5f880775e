/** Reads of orders, events and rejected callbacks for the API. */
import { and, asc, desc, eq, gt, lt, or, sql } from "./drizzle.ts";
import type { SQL } from "drizzle-orm";
import type { Db } from "./client.ts";
import { orderEvents, orders, rejectedCallbacks } from "./schema/index.ts";

export type OrderRow = typeof orders.$inferSelect;
export type EventRow = typeof orderEvents.$inferSelect;
export type RejectedRow = typeof rejectedCallbacks.$inferSelect;

export type OrderRef = { by: "client"; id: string } | { by: "svc"; id: string };

export function orderWhere(ref: OrderRef): SQL {
  return ref.by === "client" ? eq(orders.clientOrderId, ref.id) : eq(orders.svcOrderId, ref.id);
}

export async function findOrder(db: Db, ref: OrderRef): Promise<OrderRow | undefined> {
  const [row] = await db.select().from(orders).where(orderWhere(ref)).limit(1);
  return row;
}

export interface OrderFilter {
  status?: string | undefined;
  storeCode?: string | undefined;
  placement?: string | undefined;
  updatedAfter?: Date | undefined;
  limit: number;
  /** Keyset cursor: the last id of the previous page. */
  beforeId?: number | undefined;
}

/** Newest first (by id); one row more than asked tells whether a next page exists. */
export async function listOrders(db: Db, f: OrderFilter): Promise<{ rows: OrderRow[]; nextId: number | null }> {
  const conditions = [
    f.status !== undefined ? eq(orders.status, f.status) : undefined,
    f.storeCode !== undefined ? eq(orders.storeCode, f.storeCode) : undefined,
    f.placement !== undefined ? eq(orders.placementState, f.placement) : undefined,
    f.updatedAfter !== undefined ? gt(orders.updatedAt, f.updatedAfter) : undefined,
    f.beforeId !== undefined ? lt(orders.id, f.beforeId) : undefined,
  ];
  const rows = await db
    .select()
    .from(orders)
    .where(and(...conditions))
    .orderBy(desc(orders.id))
    .limit(f.limit + 1);
  const more = rows.length > f.limit;
  const page = more ? rows.slice(0, f.limit) : rows;
  return { rows: page, nextId: more ? page[page.length - 1]!.id : null };
}

/** Events of an order by either of its identifiers, in event-time order. */
export async function orderTimeline(
  db: Db,
  order: Pick<OrderRow, "svcOrderId" | "clientOrderId">,
  page: { limit: number; after?: { micros: string; id: number } | undefined },
): Promise<{ rows: (EventRow & { micros: string })[]; next: { micros: string; id: number } | null }> {
  const ids = [
    order.svcOrderId !== null ? eq(orderEvents.svcOrderId, order.svcOrderId) : undefined,
    order.clientOrderId !== null ? eq(orderEvents.clientOrderId, order.clientOrderId) : undefined,
  ].filter((c) => c !== undefined);
  if (ids.length === 0) return { rows: [], next: null };
  // Microseconds since the epoch, so the cursor is exact (a JS Date keeps only ms).
  const micros = sql<string>`((extract(epoch from ${orderEvents.occurredAt}) * 1000000)::bigint)::text`;
  const after = page.after
    ? sql`(${micros}::bigint, ${orderEvents.id}) > (${page.after.micros}::bigint, ${page.after.id})`
    : undefined;
  const rows = await db
    .select({ event: orderEvents, micros })
    .from(orderEvents)
    .where(and(or(...ids), after))
    .orderBy(asc(orderEvents.occurredAt), asc(orderEvents.id))
    .limit(page.limit + 1);
  const more = rows.length > page.limit;
  const items = (more ? rows.slice(0, page.limit) : rows).map((r) => ({ ...r.event, micros: r.micros }));
  const last = items[items.length - 1];
  return { rows: items, next: more && last ? { micros: last.micros, id: last.id } : null };
}

export async function listRejected(db: Db, page: { limit: number; beforeId?: number | undefined }) {
  const rows = await db
    .select()
    .from(rejectedCallbacks)
    .where(page.beforeId !== undefined ? lt(rejectedCallbacks.id, page.beforeId) : undefined)
    .orderBy(desc(rejectedCallbacks.id))
    .limit(page.limit + 1);
  const more = rows.length > page.limit;
  const items = more ? rows.slice(0, page.limit) : rows;
  return { rows: items, nextId: more ? items[items.length - 1]!.id : null };
}
