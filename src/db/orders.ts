/** Reads of orders, events and rejected callbacks for the API. */
import { and, asc, desc, eq, gt, lt, or, sql } from "./drizzle.ts";
import type { SQL } from "drizzle-orm";
import type { Db } from "./client.ts";
import { commands, orderEvents, orders, rejectedCallbacks } from "./schema/index.ts";

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

export interface CommandListRow {
  id: number;
  kind: string;
  state: string;
  attempts: number;
  lastError: string | null;
  createdAt: Date;
  completedAt: Date | null;
  clientOrderId: string | null;
  svcOrderId: string | null;
}

/**
 * Commands of every order, newest first (by id: a backward scan of the primary key, so no
 * index of its own; the filters are checked on the way).
 */
export async function listCommands(
  db: Db,
  f: { state?: string | undefined; kind?: string | undefined; limit: number; beforeId?: number | undefined },
): Promise<{ rows: CommandListRow[]; nextId: number | null }> {
  const rows = await db
    .select({
      id: commands.id,
      kind: commands.kind,
      state: commands.state,
      attempts: commands.attempts,
      lastError: commands.lastError,
      createdAt: commands.createdAt,
      completedAt: commands.completedAt,
      clientOrderId: orders.clientOrderId,
      svcOrderId: orders.svcOrderId,
    })
    .from(commands)
    .innerJoin(orders, eq(orders.id, commands.orderId))
    .where(
      and(
        f.state !== undefined ? eq(commands.state, f.state) : undefined,
        f.kind !== undefined ? eq(commands.kind, f.kind) : undefined,
        f.beforeId !== undefined ? lt(commands.id, f.beforeId) : undefined,
      ),
    )
    .orderBy(desc(commands.id))
    .limit(f.limit + 1);
  const more = rows.length > f.limit;
  const page = more ? rows.slice(0, f.limit) : rows;
  return { rows: page, nextId: more ? page[page.length - 1]!.id : null };
}

export interface ExportFilter {
  /** created_at >= from */
  from?: Date | undefined;
  /** created_at < to */
  to?: Date | undefined;
  status?: string | undefined;
}

/** The highest order id now: an export stops there, so orders created meanwhile cannot keep it going. */
export async function maxOrderId(db: Db): Promise<number> {
  const [row] = await db.select({ id: sql<number>`coalesce(max(${orders.id}), 0)::float8` }).from(orders);
  return row?.id ?? 0;
}

/**
 * One page of an export: orders with `afterId < id <= untilId`, oldest first. Keyset by
 * id, so each page is a range scan of the primary key (or of orders_status_idx with a
 * status) that starts where the last one ended; created_at has no index of its own (it
 * would cost every order write) and is checked on the way, which the export's full read
 * pays for anyway.
 */
export async function exportPage(db: Db, f: ExportFilter, page: { afterId: number; untilId: number; limit: number }): Promise<OrderRow[]> {
  return await db
    .select()
    .from(orders)
    .where(
      and(
        gt(orders.id, page.afterId),
        sql`${orders.id} <= ${page.untilId}`,
        f.from !== undefined ? sql`${orders.createdAt} >= ${f.from.toISOString()}::timestamptz` : undefined,
        f.to !== undefined ? sql`${orders.createdAt} < ${f.to.toISOString()}::timestamptz` : undefined,
        f.status !== undefined ? eq(orders.status, f.status) : undefined,
      ),
    )
    .orderBy(asc(orders.id))
    .limit(page.limit);
}
