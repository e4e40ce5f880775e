/**
 * The one writer of the `orders` table. The projection, placement results, placement
 * decisions made by hand, AWB assignment and reconciliation all write through here; every
 * write that can move an order returns what changed (OrderChange) and hands it to the
 * notifications' outbox in the same transaction.
 */
import type { PendingQuery, Row, TransactionSql } from "postgres";
import type { Tx } from "../db/client.ts";
import { arrayLiteral, columnOf, jsonLines } from "../db/columns.ts";
import type { Projection, ShownColumns } from "../domain/projection.ts";
import { moveCommands } from "../commands/store.ts";
import { ORDER_JSON_COLUMNS } from "./json.ts";
import type { OrderJsonRow } from "./json.ts";
import type { OrderRow } from "./read.ts";
import { NEW_ORDER } from "./change.ts";
import type { OrderChange, OrderSnapshot } from "./change.ts";
import { enabledEndpoints } from "../notify/endpoints.ts";
import { moveOrderMessages, recordOrderChanges } from "../notify/outbox.ts";

type AfterRow = { id: number } & OrderSnapshot;

/**
 * What the projection's write returns (constants only, so unsafe is safe): while an
 * endpoint is enabled, every column of the order's JSON, so that its messages need no
 * second read; else only what an OrderChange compares. Parsing the whole row took a
 * tenth of the worker's CPU for changes nobody was told of.
 */
const RETURNED_FOR_JSON = ORDER_JSON_COLUMNS.map((c) => `o.${c}`).join(", ");
const RETURNED_FOR_CHANGE = ["id", "status", "placement_state", "rider_id", "rider_location_at", "svc_order_ids"].map((c) => `o.${c}`).join(", ");

function changeOf(before: OrderSnapshot, after: AfterRow, created = false): OrderChange {
  return {
    orderId: after.id,
    created,
    status: { before: before.status, after: after.status },
    placement: { before: before.placement_state, after: after.placement_state },
    riderId: { before: before.rider_id, after: after.rider_id },
    locationAt: { before: before.rider_location_at, after: after.rider_location_at },
    svcOrderIds: { before: before.svc_order_ids, after: after.svc_order_ids },
  };
}

/** Every change is reported to the outbox in the transaction that makes it (no change without its messages). */
async function published(tx: Tx, change: OrderChange): Promise<OrderChange> {
  await recordOrderChanges(tx, [change]);
  return change;
}

/**
 * One order's row updated with `set` (and `updated_at`), when `onlyIf` holds; its change,
 * or null when no row was written. The row is locked as it is read, so "before" is the
 * version this update replaces.
 */
async function updateOne(tx: Tx, id: number, set: PendingQuery<Row[]>, onlyIf?: PendingQuery<Row[]>): Promise<OrderChange | null> {
  type Returned = AfterRow & { [K in keyof OrderSnapshot as `was_${K}`]: OrderSnapshot[K] };
  const [row] = await tx<Returned[]>`
    with old as (
      select id, status, placement_state, rider_id, rider_location_at, svc_order_ids from orders where id = ${id} for update)
    update orders o set ${set}, updated_at = now()
    from old where o.id = old.id ${onlyIf ?? tx``}
    returning o.id, o.status, o.placement_state, o.rider_id, o.rider_location_at, o.svc_order_ids,
      old.status as was_status, old.placement_state as was_placement_state, old.rider_id as was_rider_id,
      old.rider_location_at as was_rider_location_at, old.svc_order_ids as was_svc_order_ids`;
  if (!row) return null;
  const before: OrderSnapshot = {
    status: row.was_status,
    placement_state: row.was_placement_state,
    rider_id: row.was_rider_id,
    rider_location_at: row.was_rider_location_at,
    svc_order_ids: row.was_svc_order_ids,
  };
  return await published(tx, changeOf(before, row));
}

// ---------------------------------------------------------------- placement

export type LockedOrder = Pick<OrderRow, "id" | "client_order_id" | "svc_order_id" | "status" | "placement_state">;

/** The order's row, locked for the rest of the transaction; undefined when there is none. */
export async function lockOrder(tx: TransactionSql, id: number): Promise<LockedOrder | undefined> {
  const [row] = await tx<LockedOrder[]>`
    select id, client_order_id, svc_order_id, status, placement_state from orders where id = ${id} for update`;
  return row;
}

/**
 * A new order placed through tracklane: placement pending, status CREATED (its "placed
 * through tracklane" event is appended beside it), and the AWB already allocated to its
 * client_order_id, if any. A concurrent insert of the same id fails on the unique index.
 */
export async function insertPlacedOrder(
  tx: TransactionSql,
  o: { clientOrderId: string; storeCode: string | null; pickupOtp: string | null; at: Date },
): Promise<OrderChange> {
  await lockAwbOfClientOrder(tx, o.clientOrderId);
  const [row] = await tx<AfterRow[]>`
    insert into orders (client_order_id, store_code, pickup_otp, placement_state,
                        status, provider_status, status_at, event_count, last_event_at, awb_number)
    values (${o.clientOrderId}, ${o.storeCode}, ${o.pickupOtp}, 'pending', 'CREATED', 'CREATED', ${o.at}, 1, ${o.at},
            (select awb_number from awb_numbers where client_order_id = ${o.clientOrderId}))
    returning id, status, placement_state, rider_id, rider_location_at, svc_order_ids`;
  return await published(tx, changeOf(NEW_ORDER, row!, true));
}

/**
 * The provider accepted the place and named the order `svcOrderId`. Another row may
 * already hold that id (a callback raced the answer): then this row keeps its own and the
 * projection merges the two, linked by the event the caller appends.
 */
export async function recordAccepted(tx: TransactionSql, id: number, svcOrderId: string, trackUrl: string | null): Promise<OrderChange | null> {
  return await updateOne(
    tx,
    id,
    tx`placement_state = 'placed', placement_error = null, track_url = coalesce(${trackUrl}, o.track_url),
       svc_order_id = case when exists (select 1 from orders where svc_order_id = ${svcOrderId}) then o.svc_order_id else ${svcOrderId} end`,
  );
}

/**
 * A person found the order at the provider as `svcOrderId`. `takeId`: no other row holds
 * the id (else that row is merged into this one by the projection, through the link event).
 */
export async function recordConfirmed(tx: TransactionSql, id: number, svcOrderId: string, takeId: boolean): Promise<OrderChange | null> {
  return await updateOne(
    tx,
    id,
    tx`placement_state = 'placed', placement_error = null,
       svc_order_id = case when ${takeId} then ${svcOrderId} else o.svc_order_id end`,
  );
}

/** The placement is settled as placed without a new id (the provider's event already named it). */
export async function recordPlaced(tx: TransactionSql, id: number): Promise<OrderChange | null> {
  return await updateOne(tx, id, tx`placement_state = 'placed', placement_error = null`);
}

/** The place is sent (again): placement pending. */
export async function recordPlacementPending(tx: TransactionSql, id: number): Promise<OrderChange | null> {
  return await updateOne(tx, id, tx`placement_state = 'pending', placement_error = null`);
}

/** The place ended without an order: `failed` (refused) or `unconfirmed` (outcome unknown); only from pending. */
export async function recordPlacementEnded(tx: TransactionSql, id: number, state: "failed" | "unconfirmed", error: string): Promise<OrderChange | null> {
  return await updateOne(tx, id, tx`placement_state = ${state}, placement_error = ${error}`, tx`and o.placement_state = 'pending'`);
}

// ---------------------------------------------------------------- AWB and reconciliation

/**
 * Serialises, per client_order_id, an AWB's allocation (awb/pool.ts) with the insert of an
 * order placed through tracklane: whichever commits second sees the other's row, so the
 * order carries the AWB allocated to its client_order_id however the two interleave.
 */
export async function lockAwbOfClientOrder(tx: Tx, clientOrderId: string): Promise<void> {
  await tx`select pg_advisory_xact_lock(hashtextextended(${`awb_numbers:${clientOrderId}`}, 0))`;
}

/** The order with this client_order_id (if any) carries the AWB allocated to it. */
export async function assignAwb(tx: Tx, clientOrderId: string, awbNumber: string): Promise<void> {
  await tx`
    update orders set awb_number = ${awbNumber}, updated_at = now()
    where client_order_id = ${clientOrderId} and awb_number is distinct from ${awbNumber}`;
}

/** The reconciliation job asked the provider about this order just now. */
export async function markPolled(tx: Tx, id: number): Promise<void> {
  await tx`update orders set reconciled_at = now() where id = ${id}`;
}

// ---------------------------------------------------------------- the projection's writes

/** An order row as the projection reads it, locked. */
export type ProjectionRow = Pick<OrderRow, "id" | "svc_order_id" | "client_order_id" | "projection_state"> & OrderSnapshot;

/**
 * Order rows of these identifiers, locked in id order (the order every projection locks
 * them in). The two identifier indexes are read as one bitmap (BitmapOr): for a batch of
 * 476 orders, 2.1–2.4 ms against 4.8–5.1 ms as a union of two index scans joined back to
 * the table by id (`EXPLAIN ANALYZE` on a 1 M event database).
 */
export async function lockOrdersOf(tx: TransactionSql, svcs: readonly string[], coids: readonly string[]): Promise<ProjectionRow[]> {
  return await tx<ProjectionRow[]>`
    select id, svc_order_id, client_order_id, projection_state, status, placement_state, rider_id, rider_location_at, svc_order_ids
    from orders
    where svc_order_id = any(${svcs as string[]}::text[]) or client_order_id = any(${coids as string[]}::text[])
    order by id
    for update`;
}

/**
 * What these rows show, for rows without a stored state whose orders retention shed events
 * of (projection/project.ts): rare, so not read with every lock (lockOrdersOf).
 */
export async function shownColumnsOf(tx: Tx, ids: readonly number[]): Promise<(ShownColumns & { id: number })[]> {
  return await tx<(ShownColumns & { id: number })[]>`
    select id, status, provider_status, status_at, svc_order_id, svc_order_ids, client_order_id, track_url,
           rider_id, rider_name, rider_contact, rider_latitude, rider_longitude, rider_location_at, event_count, last_event_at
    from orders where id = any(${ids as number[]}::bigint[])`;
}

/** New rows for orders first seen in events, one statement; their ids, in input order. */
export async function insertSeenOrders(
  tx: TransactionSql,
  input: readonly { clientOrderId: string | null; svcOrderId: string | null; createdAt: Date }[],
): Promise<number[]> {
  if (input.length === 0) return [];
  const column = columnOf(input);
  const rows = await tx<{ id: number; client_order_id: string | null; svc_order_id: string | null }[]>`
    insert into orders (client_order_id, svc_order_id, created_at, updated_at, awb_number)
    select t.coid, t.svc, to_timestamp(t.created_ms / 1000), now(),
           (select a.awb_number from awb_numbers a where a.client_order_id = t.coid)
    from unnest(${column((i) => i.clientOrderId)}::text[], ${column((i) => i.svcOrderId)}::text[], ${column((i) => msOrNull(i.createdAt))}::float8[])
      as t(coid, svc, created_ms)
    returning id, client_order_id, svc_order_id`;
  // Both identifiers are unique among orders, and a new row has at least one of them.
  const byCoid = new Map(rows.filter((r) => r.client_order_id !== null).map((r) => [r.client_order_id!, r.id]));
  const bySvc = new Map(rows.filter((r) => r.svc_order_id !== null).map((r) => [r.svc_order_id!, r.id]));
  return input.map((i) => {
    const id = i.clientOrderId !== null ? byCoid.get(i.clientOrderId) : bySvc.get(i.svcOrderId!);
    if (id === undefined) throw new Error("inserted order row not returned");
    return id;
  });
}

/**
 * Rows that turned out to be one order: the survivor takes over the others' commands, their
 * notification messages (its sequence continues above theirs) and what only they knew; the
 * others are deleted.
 */
export async function mergeOrders(tx: TransactionSql, survivorId: number, otherIds: readonly number[]): Promise<void> {
  await moveCommands(tx, otherIds, survivorId);
  await moveOrderMessages(tx, otherIds, survivorId);
  const others = await tx<Pick<OrderRow, "svc_order_id" | "client_order_id" | "store_code" | "awb_number" | "pickup_otp" | "created_at">[]>`
    delete from orders where id = any(${otherIds as number[]}::bigint[])
    returning svc_order_id, client_order_id, store_code, awb_number, pickup_otp, created_at`;
  const first = <K extends keyof (typeof others)[number]>(k: K) => others.find((o) => o[k] !== null)?.[k] ?? null;
  const createdAt = others.reduce<Date | null>((m, o) => (m === null || o.created_at < m ? o.created_at : m), null);
  await tx`
    update orders set
      svc_order_id = coalesce(svc_order_id, ${first("svc_order_id")}),
      client_order_id = coalesce(client_order_id, ${first("client_order_id")}),
      store_code = coalesce(store_code, ${first("store_code")}),
      awb_number = coalesce(awb_number, ${first("awb_number")}),
      pickup_otp = coalesce(pickup_otp, ${first("pickup_otp")}),
      created_at = least(created_at, ${createdAt}),
      updated_at = now()
    where id = ${survivorId}`;
}

/** One order's projection to write: the fold's encoded state, its projection, the row as read. */
export interface ProjectedWrite {
  orderId: number;
  /** Inserted by this transaction (insertSeenOrders): written whatever it holds. */
  fresh: boolean;
  /** The encoded fold state (encodeState): JSON text. */
  state: string;
  projection: Projection;
  before: OrderSnapshot;
}

/**
 * Writes the projected columns and state of every order in one statement, only where
 * something changed (updated_at moves only then); returns those rows' changes.
 *
 * Identifiers and track_url are only ever filled in, never blanked: an order placed
 * through tracklane knows them before any event does. An unconfirmed or failed placement
 * becomes placed once an event names a provider id for the order (the evidence). A
 * pending one is left to its place command, which adopts the id instead of sending.
 */
export async function writeProjected(tx: TransactionSql, writes: readonly ProjectedWrite[]): Promise<OrderChange[]> {
  if (writes.length === 0) return [];
  // One array per column (zipped by unnest), like the event log's append: as one JSON
  // document, json_to_recordset built a hash table per row and took longer than the
  // update itself (31 µs of 53 per row, `EXPLAIN ANALYZE` on the bench's database).
  // The states, the longest column, travel as JSON lines (db/columns.ts), escaped for no
  // array: as a text[], escaping them took a twentieth of the worker's CPU.
  const column = columnOf(writes);
  const rider = (w: ProjectedWrite) => w.projection.rider;
  // Asked first: which columns come back depends on it, and the outbox reuses the answer.
  const endpoints = await enabledEndpoints(tx);
  const full = endpoints.length > 0;
  const rows = await tx<(AfterRow | OrderJsonRow)[]>`
    update orders o set
      svc_order_id = coalesce(v.svc, o.svc_order_id),
      svc_order_ids = v.svcs,
      client_order_id = coalesce(v.coid, o.client_order_id),
      status = v.status, provider_status = v.provider_status, status_at = v.status_at,
      track_url = coalesce(v.track_url, o.track_url),
      rider_id = v.rider_id, rider_name = v.rider_name, rider_contact = v.rider_contact,
      rider_latitude = v.lat, rider_longitude = v.lng, rider_location_at = v.location_at,
      event_count = v.count, last_event_at = v.last_event_at, projection_state = v.state,
      placement_state = case when o.placement_state in ('unconfirmed', 'failed') and v.svc is not null then 'placed' else o.placement_state end,
      placement_error = case when o.placement_state in ('unconfirmed', 'failed') and v.svc is not null then null else o.placement_error end,
      -- Tracklane's clock, not the event's: set by the write that first makes the order
      -- finished (statuses.ts, rank 5), kept while it stays so (a rebuild too), cleared if
      -- it ever is not. An order redacted before finished_at existed (migration 0017) has
      -- none: it finished when the rule that redacted it said (status_at, the row's before
      -- this event), no later than that redaction, so a late event leaves it due at once
      -- rather than PII_RETENTION_DAYS from now (as 0017 did for those it made due again).
      finished_at = case when v.status in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')
                         then coalesce(o.finished_at, case when o.redacted_at is not null then least(o.status_at, o.redacted_at) end, now()) end,
      -- An event arriving after the redaction may bring personal data again: the order is
      -- due once more (src/retention/redact.ts), and its finished_at keeps it at the front.
      redacted_at = case when v.count > o.event_count then null else o.redacted_at end,
      updated_at = now()
    from (
      select id, fresh, state, svc, svcs::text[] as svcs, coid, status, provider_status, to_timestamp(status_ms / 1000) as status_at,
             track_url, rider_id, rider_name, rider_contact, lat, lng, to_timestamp(location_ms / 1000) as location_at, count,
             to_timestamp(last_event_ms / 1000) as last_event_at
      from unnest(${writes.map((w) => w.orderId)}::bigint[], ${column((w) => (w.fresh ? "t" : "f"))}::bool[], string_to_array(${jsonLines(writes.map((w) => w.state))}::text, E'\n'),
        ${column((w) => w.projection.svcOrderId)}::text[], ${column((w) => arrayLiteral(w.projection.svcOrderIds))}::text[],
        ${column((w) => w.projection.clientOrderId)}::text[], ${column((w) => w.projection.status)}::text[],
        ${column((w) => w.projection.providerStatus)}::text[], ${column((w) => msOrNull(w.projection.statusAt))}::float8[],
        ${column((w) => w.projection.trackUrl)}::text[], ${column((w) => rider(w)?.id ?? null)}::text[],
        ${column((w) => rider(w)?.name ?? null)}::text[], ${column((w) => rider(w)?.contact ?? null)}::text[],
        ${column((w) => numberOrNull(rider(w)?.latitude))}::float8[], ${column((w) => numberOrNull(rider(w)?.longitude))}::float8[],
        ${column((w) => msOrNull(rider(w)?.locationAt))}::float8[], ${column((w) => String(w.projection.eventCount))}::int[],
        ${column((w) => msOrNull(w.projection.lastEventAt))}::float8[])
        as t(id, fresh, state, svc, svcs, coid, status, provider_status, status_ms, track_url,
             rider_id, rider_name, rider_contact, lat, lng, location_ms, count, last_event_ms)
    ) v
    where o.id = v.id and o.id = any(${writes.map((w) => w.orderId)}::bigint[])
      and (v.fresh or (o.placement_state in ('unconfirmed', 'failed') and v.svc is not null) or (
        o.svc_order_id, o.svc_order_ids, o.client_order_id, o.status, o.provider_status, o.status_at, o.track_url,
        o.rider_id, o.rider_name, o.rider_contact, o.rider_latitude, o.rider_longitude, o.rider_location_at,
        o.event_count, o.last_event_at, o.projection_state
      ) is distinct from (
        coalesce(v.svc, o.svc_order_id), v.svcs, coalesce(v.coid, o.client_order_id), v.status, v.provider_status, v.status_at,
        coalesce(v.track_url, o.track_url), v.rider_id, v.rider_name, v.rider_contact, v.lat, v.lng, v.location_at,
        v.count, v.last_event_at, v.state
      ))
    returning ${tx.unsafe(full ? RETURNED_FOR_JSON : RETURNED_FOR_CHANGE)}`;
  const byId = new Map(writes.map((w) => [w.orderId, w]));
  const changes = rows.map((r) => {
    const w = byId.get(r.id)!;
    return { ...changeOf(w.before, r, w.fresh), row: full ? (r as OrderJsonRow) : undefined };
  });
  await recordOrderChanges(tx, changes, endpoints);
  return changes;
}

/**
 * An instant as its milliseconds since 1970 (to_timestamp turns them back, exactly: it
 * rounds to the microsecond), or null: shorter than ISO text, and no string to format.
 */
const msOrNull = (at: Date | null | undefined): string | null => (at ? String(at.getTime()) : null);

/** A finite number as the text PostgreSQL reads back exactly (JS prints the shortest round-trip form); else null. */
const numberOrNull = (n: number | null | undefined): string | null => (n === null || n === undefined || !Number.isFinite(n) ? null : String(n));

/**
 * The order's placement error (the provider's words when a place failed) as `redact` returns
 * it; null from `redact` leaves it as it is. The customer's details a refusal echoed go
 * with the rest of the order's personal data (src/retention/redact.ts).
 */
export async function redactPlacementError(tx: TransactionSql, orderId: number, redact: (error: string) => string | null): Promise<boolean> {
  const [row] = await tx<{ placement_error: string | null }[]>`select placement_error from orders where id = ${orderId} for update`;
  const error = row?.placement_error ?? null;
  const redacted = error === null ? null : redact(error);
  if (redacted === null) return false;
  await tx`update orders set placement_error = ${redacted} where id = ${orderId}`;
  return true;
}

/**
 * Up to `batch` finished orders, not redacted, without finished_at (they finished before
 * migration 0017 added it) get it from their row's last change, which came no earlier than
 * tracklane learned they had finished; how many. Run by the daily redaction before it
 * looks for orders due, a batch per statement, so the migration rewrites none of them
 * under its lock. Rows a transaction holds are left to the next call (or to the
 * projection holding them, which sets finished_at itself).
 */
export async function fillFinishedAt(sql: Tx, batch: number): Promise<number> {
  const rows = await sql`
    update orders o set finished_at = o.updated_at
    from (
      select id from orders
      where finished_at is null and redacted_at is null and status in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')
      limit ${batch} for update skip locked
    ) f
    where o.id = f.id and o.finished_at is null`;
  return rows.count;
}

/** The order's personal data is gone (its events and commands were redacted and it was projected again). */
export async function markRedacted(tx: Tx, orderId: number): Promise<void> {
  await tx`update orders set redacted_at = now() where id = ${orderId}`;
}
