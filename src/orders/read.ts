/**
 * Reads of the `orders` table: one order, the list, export pages, the figures /metrics
 * shows, and the lookups intake and reconciliation make. The table's writes are in
 * ./store.ts; both files are the table's only statements.
 */
import type { Tx } from "../db/client.ts";
import { pageOf } from "../db/page.ts";
import type { orders } from "../db/schema/index.ts";
import { DomainError } from "../domain/errors.ts";

export type OrderRow = typeof orders.$inferSelect;

export type OrderRef = { by: "client"; id: string } | { by: "svc"; id: string };

/** An order by its client id, or by any provider id it holds (findOrderHolding). */
export async function findOrder(sql: Tx, ref: OrderRef): Promise<OrderRow | undefined> {
  if (ref.by === "svc") return await findOrderHolding(sql, ref.id);
  const [row] = await sql<OrderRow[]>`select * from orders where client_order_id = ${ref.id}`;
  return row;
}

/**
 * The order holding provider id `svcOrderId`: as its svc_order_id, else as another of its
 * svc_order_ids (a second provider order for its client_order_id, read through
 * orders_other_svc_ids_idx, whose predicate it repeats). Either way the id is that
 * order's: an event naming it joins that order's events, so another order adopting it
 * would be merged into it.
 */
export async function findOrderHolding(sql: Tx, svcOrderId: string): Promise<OrderRow | undefined> {
  const [row] = await sql<OrderRow[]>`
    select * from orders
    where svc_order_id = ${svcOrderId} or (cardinality(svc_order_ids) > 1 and svc_order_ids @> array[${svcOrderId}::text])
    order by svc_order_id = ${svcOrderId} desc nulls last, id
    limit 1`;
  return row;
}

export async function findOrderById(sql: Tx, id: number): Promise<OrderRow | undefined> {
  const [row] = await sql<OrderRow[]>`select * from orders where id = ${id}`;
  return row;
}

/** These orders' rows (those that exist), in no particular order. */
export async function ordersByIds(sql: Tx, ids: readonly number[]): Promise<OrderRow[]> {
  if (ids.length === 0) return [];
  return await sql<OrderRow[]>`select * from orders where id = any(${ids as number[]}::bigint[])`;
}

/** The order, or DomainError order_not_found naming the id that was asked for. */
export async function requireOrder(sql: Tx, ref: OrderRef): Promise<OrderRow> {
  const order = await findOrder(sql, ref);
  if (!order) {
    const what = ref.by === "client" ? "client_order_id" : "svc_order_id";
    throw new DomainError("order_not_found", `no order with ${what} ${JSON.stringify(ref.id)}`);
  }
  return order;
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
export async function listOrders(sql: Tx, f: OrderFilter): Promise<{ rows: OrderRow[]; nextId: number | null }> {
  const rows = await sql<OrderRow[]>`
    select * from orders
    where true
      ${f.status !== undefined ? sql`and status = ${f.status}` : sql``}
      ${f.storeCode !== undefined ? sql`and store_code = ${f.storeCode}` : sql``}
      ${f.placement !== undefined ? sql`and placement_state = ${f.placement}` : sql``}
      ${f.updatedAfter !== undefined ? sql`and updated_hour >= date_trunc('hour', ${f.updatedAfter}::timestamptz at time zone 'UTC') and updated_at > ${f.updatedAfter}` : sql``}
      ${f.beforeId !== undefined ? sql`and id < ${f.beforeId}` : sql``}
    order by id desc
    limit ${f.limit + 1}`;
  return pageOf(rows, f.limit);
}

export interface ExportFilter {
  /** created_at >= from */
  from?: Date | undefined;
  /** created_at < to */
  to?: Date | undefined;
  status?: string | undefined;
}

/** The highest order id now: an export stops there, so orders created meanwhile cannot keep it going. */
export async function maxOrderId(sql: Tx): Promise<number> {
  const [row] = await sql<{ id: number }[]>`select coalesce(max(id), 0)::int8 as id from orders`;
  return row?.id ?? 0;
}

/**
 * One page of an export: orders with `afterId < id <= untilId`, oldest first. Keyset by
 * id, so each page is a range scan of the primary key (or of orders_status_idx with a
 * status) that starts where the last one ended; created_at has no index of its own (it
 * would cost every order write) and is checked on the way.
 */
export async function exportPage(sql: Tx, f: ExportFilter, page: { afterId: number; untilId: number; limit: number }): Promise<OrderRow[]> {
  return await sql<OrderRow[]>`
    select * from orders
    where id > ${page.afterId} and id <= ${page.untilId}
      ${f.from !== undefined ? sql`and created_at >= ${f.from}` : sql``}
      ${f.to !== undefined ? sql`and created_at < ${f.to}` : sql``}
      ${f.status !== undefined ? sql`and status = ${f.status}` : sql``}
    order by id
    limit ${page.limit}`;
}

/** Placements that need a person, counted for /metrics (orders_placement_idx serves the count). */
export async function placementCounts(sql: Tx): Promise<Record<"pending" | "unconfirmed" | "failed", number>> {
  const rows = await sql<{ state: string; n: number }[]>`
    select placement_state as state, count(*)::int as n from orders
    where placement_state in ('pending', 'unconfirmed', 'failed') group by 1`;
  const count = (state: string) => rows.find((r) => r.state === state)?.n ?? 0;
  return { pending: count("pending"), unconfirmed: count("unconfirmed"), failed: count("failed") };
}

/**
 * Of these ids, those a known order carries as its client_order_id while no order
 * carries them as a provider id: its svc_order_id, or another of its svc_order_ids (a
 * second provider order for one client_order_id). Intake decides with it what a bare
 * `order_id` names. The second test reads orders_other_svc_ids_idx, whose predicate it
 * repeats: only orders with more than one provider id have another.
 */
export async function knownClientIds(sql: Tx, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await sql<{ id: string }[]>`
    select v as id from unnest(${ids as string[]}::text[]) as v
    where exists (select from orders o where o.client_order_id = v)
      and not exists (select from orders o where o.svc_order_id = v)
      and not exists (select from orders o where cardinality(o.svc_order_ids) > 1 and o.svc_order_ids @> array[v])`;
  return new Set(rows.map((r) => r.id));
}

/**
 * When an order was last heard of, on tracklane's clock: its newest event's time
 * (`last_event_at`, the provider's clock), but no later than the row's last change
 * (`updated_at`, which every new event's projection moves), or its creation when no event
 * came yet. An event the provider dated ahead of its arrival (a clock hours fast, zone-less
 * local times read in the wrong zone) would otherwise hold its order out of the polls and
 * the stuck list until that time had come, however long the provider stayed silent.
 */
const silentSince = (sql: Tx) => sql`least(coalesce(last_event_at, created_at), updated_at)`;

export type DueOrder = Pick<OrderRow, "id" | "client_order_id" | "svc_order_ids"> & { svc_order_id: string };

/**
 * Active orders (a provider id, one of `activeStatuses` or none yet) silent for
 * `afterMin` minutes and not polled for as long, longest unpolled first. Silent since
 * silentSince. Active statuses are named, not terminal ones excluded: orders_status_idx
 * then finds the active orders, few beside the finished ones, with no index of their own.
 */
export async function ordersDueForPoll(sql: Tx, activeStatuses: readonly string[], afterMin: number, limit: number): Promise<DueOrder[]> {
  const seconds = afterMin * 60;
  return await sql<DueOrder[]>`
    select id, svc_order_id, client_order_id, svc_order_ids from orders
    where svc_order_id is not null
      and (status is null or status = any(${activeStatuses as string[]}::text[]))
      and ${silentSince(sql)} < now() - make_interval(secs => ${seconds})
      and (reconciled_at is null or reconciled_at < now() - make_interval(secs => ${seconds}))
    order by reconciled_at nulls first, id
    limit ${limit}`;
}

export type SilentOrder = Pick<OrderRow, "id" | "client_order_id" | "svc_order_id" | "status" | "placement_state" | "last_event_at" | "created_at"> & {
  /** When the order was last heard of (silentSince). */
  silent_since: Date;
};

/**
 * Active orders (one of `activeStatuses`, or none yet) with no event for `afterMin`
 * minutes, the longest silent first, and how many there are. As `ordersDueForPoll`:
 * orders_status_idx finds the active orders, few beside the finished ones; orders whose
 * placement failed or is unconfirmed are left out (they need a person for that reason,
 * listed by placement).
 */
export async function silentOrders(
  sql: Tx,
  activeStatuses: readonly string[],
  afterMin: number,
  limit: number,
): Promise<{ rows: SilentOrder[]; total: number }> {
  const rows = await sql<(SilentOrder & { total: number })[]>`
    select id, client_order_id, svc_order_id, status, placement_state, last_event_at, created_at,
           ${silentSince(sql)} as silent_since, count(*) over ()::int as total
    from orders
    where (status is null or status = any(${activeStatuses as string[]}::text[]))
      and placement_state not in ('failed', 'unconfirmed')
      and ${silentSince(sql)} < now() - make_interval(secs => ${afterMin * 60})
    order by ${silentSince(sql)}, id
    limit ${limit}`;
  return { rows: rows.map(({ total: _, ...r }) => r), total: rows[0]?.total ?? 0 };
}

/**
 * Of these identifier pairs, those no order row carries under either id: two lookups of
 * the unique indexes per pair, whatever the table's size. A pair known only by an order's
 * second provider id (svc_order_ids) counts as unknown: a rebuild then projects it again,
 * which is harmless, and rare.
 */
export async function withoutOrder<P extends { svc_order_id: string | null; client_order_id: string | null }>(sql: Tx, pairs: readonly P[]): Promise<P[]> {
  if (pairs.length === 0) return [];
  const svcs = [...new Set(pairs.flatMap((p) => (p.svc_order_id === null ? [] : [p.svc_order_id])))];
  const coids = [...new Set(pairs.flatMap((p) => (p.client_order_id === null ? [] : [p.client_order_id])))];
  const known = await sql<{ svc: string | null; coid: string | null }[]>`
    select svc_order_id as svc, null as coid from orders where svc_order_id = any(${svcs}::text[])
    union all
    select null, client_order_id from orders where client_order_id = any(${coids}::text[])`;
  const knownSvcs = new Set(known.flatMap((k) => (k.svc === null ? [] : [k.svc])));
  const knownCoids = new Set(known.flatMap((k) => (k.coid === null ? [] : [k.coid])));
  return pairs.filter((p) => !(p.svc_order_id !== null && knownSvcs.has(p.svc_order_id)) && !(p.client_order_id !== null && knownCoids.has(p.client_order_id)));
}

/** A page of orders by id (keyset) with every identifier each carries: what a rebuild walks. */
export async function orderIdentityPage(
  sql: Tx,
  page: { afterId: number; upToId?: number | undefined; limit: number },
): Promise<Pick<OrderRow, "id" | "svc_order_id" | "client_order_id" | "svc_order_ids">[]> {
  return await sql<Pick<OrderRow, "id" | "svc_order_id" | "client_order_id" | "svc_order_ids">[]>`
    select id, svc_order_id, client_order_id, svc_order_ids from orders
    where id > ${page.afterId} ${page.upToId !== undefined ? sql`and id <= ${page.upToId}` : sql``}
    order by id
    limit ${page.limit}`;
}

/** Finished orders not yet redacted that tracklane saw finish before `before`, oldest first (orders_pii_due_idx). */
export async function ordersDueForRedaction(
  sql: Tx,
  before: Date,
  limit: number,
  skip: readonly number[] = [],
): Promise<Pick<OrderRow, "id" | "svc_order_id" | "client_order_id" | "svc_order_ids">[]> {
  return await sql<Pick<OrderRow, "id" | "svc_order_id" | "client_order_id" | "svc_order_ids">[]>`
    select id, svc_order_id, client_order_id, svc_order_ids from orders
    where redacted_at is null and status in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')
      and finished_at < ${before} and id <> all(${skip as number[]}::bigint[])
    order by finished_at
    limit ${limit}`;
}
