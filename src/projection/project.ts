/**
 * Applies the pure fold to the database: gathers every event of an order (following the
 * links between svc_order_id and client_order_id), folds them, and writes the one order
 * row, merging rows that turned out to be the same order. Writes only when something
 * changed, so re-projecting (or `npm run rebuild`) leaves identical rows.
 */
import type { Sql, TransactionSql } from "postgres";
import { fold } from "../domain/projection.ts";
import type { Projection, StoredEvent } from "../domain/projection.ts";
import { isJsonObject } from "../domain/normalise.ts";

export interface OrderIds {
  svcOrderId: string | null;
  clientOrderId: string | null;
}

export interface ProjectResult {
  orderId: number;
  changed: boolean;
  /** Newest event's arrival time, for the projection-lag metric. */
  newestReceivedAt: Date | null;
}

/** Links between ids are followed at most this many hops (an order has two ids). */
const MAX_LINK_ROUNDS = 4;

interface EventDbRow {
  id: string;
  dedupe_key: string;
  kind: string;
  svc_order_id: string | null;
  client_order_id: string | null;
  provider_status: string | null;
  occurred_at: Date;
  received_at: Date;
  payload: unknown;
}

function toStored(r: EventDbRow): StoredEvent {
  return {
    id: Number(r.id),
    dedupeKey: r.dedupe_key,
    kind: r.kind === "location" ? "location" : "status",
    svcOrderId: r.svc_order_id,
    clientOrderId: r.client_order_id,
    providerStatus: r.provider_status,
    occurredAt: r.occurred_at,
    receivedAt: r.received_at,
    payload: isJsonObject(r.payload) ? r.payload : {},
  };
}

/**
 * Serialises projections of one order across jobs, workers and processes: an advisory
 * lock per identifier, taken in sorted order (a deadlock, which PostgreSQL detects,
 * only makes the job retry).
 */
async function lockIds(tx: TransactionSql, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await tx`select pg_advisory_xact_lock(hashtextextended(k, 0)) from unnest(${keys.sort()}::text[]) as k`;
}

async function gatherEvents(tx: TransactionSql, start: OrderIds): Promise<{ events: StoredEvent[]; svcs: Set<string>; coids: Set<string> }> {
  const svcs = new Set<string>(start.svcOrderId ? [start.svcOrderId] : []);
  const coids = new Set<string>(start.clientOrderId ? [start.clientOrderId] : []);
  const locked = new Set<string>();
  let rows: EventDbRow[] = [];
  for (let round = 0; round < MAX_LINK_ROUNDS; round++) {
    const keys = [...[...svcs].map((s) => `svc:${s}`), ...[...coids].map((c) => `coid:${c}`)].filter((k) => !locked.has(k));
    if (keys.length === 0) break;
    await lockIds(tx, keys);
    keys.forEach((k) => locked.add(k));
    rows = await tx<EventDbRow[]>`
      select id::text, dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload
      from order_events
      where svc_order_id = any(${[...svcs]}::text[]) or client_order_id = any(${[...coids]}::text[])`;
    // An order placed through tracklane links its ids on its row before any event does.
    const linked = await tx<{ svc_order_id: string | null; client_order_id: string | null }[]>`
      select svc_order_id, client_order_id from orders
      where svc_order_id = any(${[...svcs]}::text[]) or client_order_id = any(${[...coids]}::text[])`;
    for (const r of [...rows, ...linked]) {
      if (r.svc_order_id) svcs.add(r.svc_order_id);
      if (r.client_order_id) coids.add(r.client_order_id);
    }
  }
  return { events: rows.map(toStored), svcs, coids };
}

interface ExistingRow {
  id: string;
  placement_state: string;
  svc_order_id: string | null;
  client_order_id: string | null;
}

export async function projectOrder(sql: Sql, start: OrderIds): Promise<ProjectResult | null> {
  return await sql.begin(async (tx) => {
    const { events, svcs, coids } = await gatherEvents(tx, start);
    const existing = await tx<ExistingRow[]>`
      select id::text, placement_state, svc_order_id, client_order_id from orders
      where svc_order_id = any(${[...svcs]}::text[]) or client_order_id = any(${[...coids]}::text[])
      order by (placement_state <> 'external') desc, id
      for update`;
    if (events.length === 0 && existing.length === 0) return null;
    const p = fold(events);
    const newestReceivedAt = events.reduce<Date | null>((m, e) => (m === null || e.receivedAt > m ? e.receivedAt : m), null);
    const firstReceivedAt = events.reduce<Date | null>((m, e) => (m === null || e.receivedAt < m ? e.receivedAt : m), null);

    const [survivor, ...merged] = existing;
    let orderId: number;
    if (survivor === undefined) {
      const [row] = await tx<{ id: string }[]>`
        insert into orders (client_order_id, svc_order_id, created_at, updated_at)
        values (${p.clientOrderId}, ${p.svcOrderId}, ${firstReceivedAt ?? new Date()}, now())
        returning id::text`;
      orderId = Number(row!.id);
    } else {
      orderId = Number(survivor.id);
      if (merged.length > 0) await mergeInto(tx, orderId, merged.map((m) => Number(m.id)));
    }
    const changed = await writeProjection(tx, orderId, p, survivor === undefined);
    return { orderId, changed, newestReceivedAt };
  });
}

/**
 * Rows that turned out to be one order: keep the survivor (placed through tracklane if
 * any, else the oldest), take over what only the others knew, delete the others.
 */
async function mergeInto(tx: TransactionSql, survivorId: number, otherIds: number[]): Promise<void> {
  await tx`update commands set order_id = ${survivorId} where order_id = any(${otherIds}::bigint[])`;
  const others = await tx<{ svc_order_id: string | null; client_order_id: string | null; store_code: string | null; awb_number: string | null; pickup_otp: string | null; created_at: Date }[]>`
    delete from orders where id = any(${otherIds}::bigint[])
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

/** Writes the projected columns; true when anything changed (updated_at moves only then). */
async function writeProjection(tx: TransactionSql, orderId: number, p: Projection, fresh: boolean): Promise<boolean> {
  const r = p.rider;
  const values = {
    svc: p.svcOrderId,
    coid: p.clientOrderId,
    status: p.status,
    providerStatus: p.providerStatus,
    statusAt: p.statusAt,
    trackUrl: p.trackUrl,
    riderId: r?.id ?? null,
    riderName: r?.name ?? null,
    riderContact: r?.contact ?? null,
    lat: r?.latitude ?? null,
    lng: r?.longitude ?? null,
    locationAt: r?.locationAt ?? null,
    count: p.eventCount,
    lastEventAt: p.lastEventAt,
  };
  // Identifiers and track_url are only ever filled in, never blanked: an order placed
  // through tracklane knows them before any event does.
  const rows = await tx`
    update orders set
      svc_order_id = coalesce(${values.svc}, svc_order_id),
      client_order_id = coalesce(${values.coid}, client_order_id),
      status = ${values.status}, provider_status = ${values.providerStatus}, status_at = ${values.statusAt},
      track_url = coalesce(${values.trackUrl}, track_url),
      rider_id = ${values.riderId}, rider_name = ${values.riderName}, rider_contact = ${values.riderContact},
      rider_latitude = ${values.lat}, rider_longitude = ${values.lng}, rider_location_at = ${values.locationAt},
      event_count = ${values.count}, last_event_at = ${values.lastEventAt},
      updated_at = now()
    where id = ${orderId}
      and (${fresh}::boolean or (
        svc_order_id, client_order_id, status, provider_status, status_at, track_url,
        rider_id, rider_name, rider_contact, rider_latitude, rider_longitude, rider_location_at,
        event_count, last_event_at
      ) is distinct from (
        coalesce(${values.svc}, svc_order_id), coalesce(${values.coid}, client_order_id),
        ${values.status}, ${values.providerStatus}, ${values.statusAt}::timestamptz,
        coalesce(${values.trackUrl}, track_url),
        ${values.riderId}, ${values.riderName}, ${values.riderContact},
        ${values.lat}::float8, ${values.lng}::float8, ${values.locationAt}::timestamptz,
        ${values.count}::int, ${values.lastEventAt}::timestamptz
      ))`;
  return rows.count > 0;
}
