/**
 * Applies the pure fold to the database, for many orders in one transaction.
 *
 * Two paths. The drain's usual one (projectQueued): an order row stores the fold of the
 * events merged into it so far (orders.projection_state), and new events are merged into
 * that state, so projecting an event costs the same on an order with 3 events as on one
 * with 3,000 rider locations. The full one (projectOrdersIn): gathers every event of an
 * order (following the links between svc_order_id and client_order_id), folds them, and
 * writes the row, merging rows that turned out to be the same order; it serves new
 * orders, links, rows without a state, `npm run rebuild` and retries.
 *
 * Exactly once. An event is merged into a state by the transaction that deletes its
 * projection_queue row, so each event is merged once. The full path therefore folds the
 * events whose queue rows are gone (merged before) or deleted by its own transaction (it
 * claims the queued ones no drain holds), and leaves the rest to whichever drain holds
 * them: that drain merges them into the state written here. Both paths lock an event's
 * identifiers before touching its order, and the full path reads an order's events only
 * after locking its rows, so a merge that commits before it is seen, and one that commits
 * after it builds on what it wrote. Writes happen only when something changed, so
 * re-projecting (or `npm run rebuild`) leaves identical rows.
 */
import type { Sql, TransactionSql } from "postgres";
import { DETAIL_SOURCES, foldState, latestFirst, mergeStates, payloadsNeeded, project } from "../domain/projection.ts";
import type { FoldState, StoredEvent } from "../domain/projection.ts";
import { eventDetails, isJsonObject } from "../domain/normalise.ts";
import type { EventDetails, JsonObject } from "../domain/normalise.ts";
import { succeedFailedPlaces } from "../commands/placements.ts";
import type { Logger } from "../logger.ts";
import { decodeState, encodeState } from "./state.ts";

export interface OrderIds {
  svcOrderId: string | null;
  clientOrderId: string | null;
}

export interface ProjectResult {
  orderId: number;
  changed: boolean;
  /** Newest event's arrival time, for the projection-lag metric. */
  newestReceivedAt: Date | null;
  /** An unconfirmed placement was confirmed by these events. */
  placementConfirmed?: true;
  /** The order now has several provider ids, for the first time (a duplicate at the provider). */
  duplicatedAs?: string[];
}

/**
 * Deadlock and serialisation failures: PostgreSQL rolled the transaction back, and the
 * same work tried again succeeds. Projections of orders linked to each other lock their
 * identifiers round by round, so two of them can meet in a cycle; callers retry.
 */
export function isConflict(err: unknown): boolean {
  const code = typeof err === "object" && err !== null ? (err as { code?: unknown }).code : undefined;
  return code === "40P01" || code === "40001";
}

/** Links between ids are followed at most this many hops (an order has two ids). */
const MAX_LINK_ROUNDS = 4;

type Tx = TransactionSql;

interface EventDbRow {
  id: string;
  dedupe_key: string;
  kind: string;
  svc_order_id: string | null;
  client_order_id: string | null;
  provider_status: string | null;
  occurred_at: Date;
  received_at: Date;
  /** Which details the payload may carry (detailMask, computed by PostgreSQL). */
  details: number;
}

interface OrderDbRow {
  id: string;
  placement_state: string;
  svc_order_ids: string[];
  svc_order_id: string | null;
  client_order_id: string | null;
  projection_state: string | null;
}

const svcKey = (s: string) => `svc:${s}`;
const coidKey = (c: string) => `coid:${c}`;

/** Union-find over identifier keys: an order is a connected set of identifiers. */
class Links {
  private readonly parent = new Map<string, string>();
  add(key: string): void {
    if (!this.parent.has(key)) this.parent.set(key, key);
  }
  find(key: string): string {
    let root = key;
    while (this.parent.get(root) !== root) root = this.parent.get(root)!;
    for (let k = key; k !== root; ) {
      const next = this.parent.get(k)!;
      this.parent.set(k, root);
      k = next;
    }
    return root;
  }
  link(svc: string | null, coid: string | null): void {
    const keys = [svc === null ? null : svcKey(svc), coid === null ? null : coidKey(coid)].filter((k): k is string => k !== null);
    for (const k of keys) this.add(k);
    if (keys.length === 2) {
      const [a, b] = [this.find(keys[0]!), this.find(keys[1]!)];
      if (a !== b) this.parent.set(a, b);
    }
  }
  keys(): string[] {
    return [...this.parent.keys()];
  }
  /** The root of a row's identifiers (they are linked, so any one will do). */
  rootOf(svc: string | null, coid: string | null): string {
    return this.find(svc !== null ? svcKey(svc) : coidKey(coid!));
  }
}

function split(keys: Iterable<string>): { svcs: string[]; coids: string[] } {
  const svcs: string[] = [];
  const coids: string[] = [];
  for (const k of keys) {
    if (k.startsWith("svc:")) svcs.push(k.slice(4));
    else coids.push(k.slice(5));
  }
  return { svcs, coids };
}

/** The columns of an order_events row that the fold reads. */
export type EventColumns = Pick<EventDbRow, "id" | "dedupe_key" | "kind" | "svc_order_id" | "client_order_id" | "provider_status" | "occurred_at" | "received_at">;

/** An order_events row as the fold sees it; the payload is loaded only where needed. */
export function toStored(r: EventColumns, payload: JsonObject = {}): StoredEvent {
  return {
    id: Number(r.id),
    dedupeKey: r.dedupe_key,
    kind: r.kind === "location" ? "location" : "status",
    svcOrderId: r.svc_order_id,
    clientOrderId: r.client_order_id,
    providerStatus: r.provider_status,
    occurredAt: r.occurred_at,
    receivedAt: r.received_at,
    payload,
  };
}

/**
 * Serialises projections of one order across transactions, workers and processes: an
 * advisory lock per identifier. Taken in one statement in hash order, so two
 * transactions never wait on each other in a cycle over identifiers locked together (a
 * deadlock on identifiers found later through links is detected by PostgreSQL and only
 * makes the projection retry).
 */
async function lockIds(tx: Tx, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await tx`
    select pg_advisory_xact_lock(h)
    from (select distinct hashtextextended(k, 0) as h from unnest(${keys}::text[]) as k order by 1) as ordered`;
}

/**
 * Merged events of these identifiers, without payloads: their mask says which details
 * they may hold. An event whose queue row is still there belongs to the drain that will
 * merge it (see the header); this transaction's own taken rows are already deleted. One
 * branch per identifier column, each an index scan whatever the table's size (an OR of
 * the two made the planner pick sequential scans); an event found by both comes back
 * twice and is kept once.
 */
function readEvents(tx: Tx, svcs: string[], coids: string[]) {
  const s = DETAIL_SOURCES;
  const columns = tx`
    id::text, dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at,
      (payload ?| ${s.riderId[0]}::text[])::int
      + (payload ?| ${s.riderName[0]}::text[])::int * 2
      + (payload ?| ${s.riderContact[0]}::text[])::int * 4
      + ((payload ?| ${s.location[0]}::text[]) and (payload ?| ${s.location[1]}::text[]))::int * 8
      + (payload ?| ${s.trackUrl[0]}::text[])::int * 16 as details`;
  const merged = tx`not exists (select from projection_queue q where q.event_id = e.id)`;
  return tx<EventDbRow[]>`
    select ${columns} from order_events e where svc_order_id = any(${svcs}::text[]) and ${merged}
    union all
    select ${columns} from order_events e where client_order_id = any(${coids}::text[]) and ${merged}`;
}

/**
 * Claims the queued events of these identifiers that no other drain holds: deleting
 * their queue rows makes them this transaction's to fold (readEvents then includes
 * them), so a full derivation, a rebuild above all, folds the whole log. Never waits:
 * rows another drain holds stay with it.
 */
function claimQueued(tx: Tx, svcs: string[], coids: string[]) {
  return tx`
    with chosen as materialized (
      select q.event_id from projection_queue q join order_events e on e.id = q.event_id
      where e.svc_order_id = any(${svcs}::text[])
      union
      select q.event_id from projection_queue q join order_events e on e.id = q.event_id
      where e.client_order_id = any(${coids}::text[])
    ),
    locked as materialized (
      select q.event_id from projection_queue q join chosen using (event_id) for update of q skip locked
    )
    delete from projection_queue q using locked where q.event_id = locked.event_id`;
}

/** Order rows of these identifiers, locked (in id order, the order every projection locks them in). */
function readOrders(tx: Tx, svcs: string[], coids: string[]) {
  return tx<OrderDbRow[]>`
    select id::text, placement_state, svc_order_ids, svc_order_id, client_order_id, projection_state from orders
    where id in (
      select id from orders where svc_order_id = any(${svcs}::text[])
      union
      select id from orders where client_order_id = any(${coids}::text[]))
    order by id
    for update`;
}

interface Gathered {
  links: Links;
  events: Map<string, StoredEvent & { mask: number }>;
  orders: Map<string, OrderDbRow>;
}

/**
 * Locks and reads, round by round, every identifier reachable from the starts through
 * events and order rows. Each round's lock and reads travel together (pipelined on the
 * transaction's connection, executed in order): identifiers, then rows, then events, so
 * that no event is read before the rows it was merged into are locked, and queued events
 * no other drain holds are claimed before the events are read.
 */
async function gather(tx: Tx, starts: readonly OrderIds[]): Promise<Gathered> {
  const links = new Links();
  for (const s of starts) links.link(s.svcOrderId, s.clientOrderId);
  const events = new Map<string, StoredEvent & { mask: number }>();
  const orders = new Map<string, OrderDbRow>();
  const locked = new Set<string>();
  for (let round = 0; round < MAX_LINK_ROUNDS; round++) {
    const keys = links.keys().filter((k) => !locked.has(k));
    if (keys.length === 0) break;
    keys.forEach((k) => locked.add(k));
    const { svcs, coids } = split(keys);
    const [, orderRows, , rows] = await Promise.all([
      lockIds(tx, keys),
      readOrders(tx, svcs, coids),
      claimQueued(tx, svcs, coids),
      readEvents(tx, svcs, coids),
    ]);
    for (const r of rows) {
      if (!events.has(r.id)) events.set(r.id, { ...toStored(r), mask: r.details });
      links.link(r.svc_order_id, r.client_order_id);
    }
    for (const o of orderRows) {
      orders.set(o.id, o);
      links.link(o.svc_order_id, o.client_order_id);
    }
  }
  return { links, events, orders };
}

interface OrderWork {
  events: StoredEvent[];
  rows: OrderDbRow[];
  state?: FoldState;
  orderId?: number;
  fresh?: boolean;
}

/** An order row to write: its new state, and whether it was inserted by this transaction. */
interface Written {
  orderId: number;
  fresh: boolean;
  state: FoldState;
  /** The row's placement and number of provider ids before this write (the rows it merges, at most). */
  before: Before;
}

interface Before {
  placement: string;
  svcIds: number;
}

/** What the rows of one order said before this transaction writes them. */
const beforeOf = (rows: readonly OrderDbRow[]): Before => ({
  placement: rows[0]?.placement_state ?? "external",
  svcIds: rows.reduce((n, r) => Math.max(n, r.svc_order_ids.length), 0),
});

/** Reads the payloads the fold needs (payloadsNeeded), in as few rounds as it takes. */
async function loadPayloads(tx: Tx, work: Iterable<OrderWork>, mask: (e: StoredEvent) => number): Promise<void> {
  const details = new Map<StoredEvent, EventDetails>();
  const sorted = [...work].map((w) => [...w.events].sort(latestFirst));
  for (;;) {
    const need = sorted.flatMap((events) => payloadsNeeded(events, mask, (e) => details.get(e)));
    if (need.length === 0) return;
    const byId = new Map(need.map((e) => [String(e.id), e]));
    const rows = await tx<{ id: string; payload: unknown }[]>`
      select id::text, payload from order_events where id = any(${[...byId.keys()]}::bigint[])`;
    for (const r of rows) {
      const e = byId.get(r.id)!;
      e.payload = isJsonObject(r.payload) ? (r.payload as JsonObject) : {};
      details.set(e, eventDetails(e.payload));
    }
    // An event that vanished cannot be: order_events is append-only. Guard the loop anyway.
    if (rows.length < byId.size) throw new Error("events disappeared while projecting");
  }
}

/** The latest arrival among these events, for the projection-lag metric. */
const newestReceived = (events: readonly StoredEvent[]) =>
  events.reduce<Date | null>((m, e) => (m === null || e.receivedAt > m ? e.receivedAt : m), null);

/**
 * Projects the orders of `starts` in the caller's transaction; one result per start
 * (null when the order has neither events nor a row). Starts that are the same order
 * share one projection.
 */
export async function projectOrdersIn(tx: Tx, starts: readonly OrderIds[]): Promise<(ProjectResult | null)[]> {
  const { links, events, orders } = await gather(tx, starts);
  const work = new Map<string, OrderWork>();
  const workOf = (root: string) => {
    let w = work.get(root);
    if (!w) work.set(root, (w = { events: [], rows: [] }));
    return w;
  };
  const masks = new Map<StoredEvent, number>();
  for (const e of events.values()) {
    const { mask, ...stored } = e;
    const se: StoredEvent = stored;
    masks.set(se, mask);
    workOf(links.rootOf(e.svcOrderId, e.clientOrderId)).events.push(se);
  }
  for (const o of orders.values()) workOf(links.rootOf(o.svc_order_id, o.client_order_id)).rows.push(o);
  // The survivor first: placed through tracklane if any, else the oldest.
  const rank = (o: OrderDbRow) => (o.placement_state !== "external" ? 0 : 1);
  for (const w of work.values()) w.rows.sort((a, b) => rank(a) - rank(b) || Number(a.id) - Number(b.id));

  await loadPayloads(tx, work.values(), (e) => masks.get(e) ?? 0);

  const inserts: { w: OrderWork; state: FoldState; createdAt: Date }[] = [];
  for (const w of work.values()) {
    if (w.events.length === 0 && w.rows.length === 0) continue;
    w.state = foldState(w.events);
    const [survivor, ...merged] = w.rows;
    if (survivor === undefined) {
      const firstReceivedAt = w.events.reduce<Date | null>((m, e) => (m === null || e.receivedAt < m ? e.receivedAt : m), null);
      inserts.push({ w, state: w.state, createdAt: firstReceivedAt ?? new Date() });
    } else {
      w.orderId = Number(survivor.id);
      w.fresh = false;
      if (merged.length > 0) await mergeInto(tx, w.orderId, merged.map((m) => Number(m.id)));
    }
  }
  await insertOrders(tx, inserts);
  const notes: WriteNotes = { confirmed: [], duplicated: [] };
  const changed = await writeProjections(
    tx,
    [...work.values()].flatMap((w) =>
      w.state === undefined || w.orderId === undefined ? [] : [{ orderId: w.orderId, fresh: w.fresh === true, state: w.state, before: beforeOf(w.rows) }],
    ),
    notes,
  );
  await succeedFailedPlaces(tx, notes.confirmed, CONFIRMED_BY_EVENT);

  return starts.map((s) => {
    if (s.svcOrderId === null && s.clientOrderId === null) return null;
    const root = links.rootOf(s.svcOrderId, s.clientOrderId);
    const w = work.get(root);
    if (!w || w.orderId === undefined) return null;
    return withNotes({ orderId: w.orderId, changed: changed.has(w.orderId), newestReceivedAt: newestReceived(w.events) }, notes);
  });
}

/**
 * Logs what the projection found about placements, once: it is found by the transaction
 * that makes the change, so call this after that transaction committed.
 */
export function reportPlacements(log: Logger, results: readonly ProjectResult[]): void {
  for (const r of results) {
    if (r.placementConfirmed) log.info({ orderId: r.orderId }, "unconfirmed placement confirmed by the provider's event");
    if (r.duplicatedAs) {
      log.warn(
        { orderId: r.orderId, svcOrderIds: r.duplicatedAs },
        "the provider has several orders for one client_order_id: cancel the extra one at the provider",
      );
    }
  }
}

function withNotes(result: ProjectResult, notes: WriteNotes): ProjectResult {
  if (notes.confirmed.includes(result.orderId)) result.placementConfirmed = true;
  const duplicated = notes.duplicated.find((d) => d.orderId === result.orderId);
  if (duplicated) result.duplicatedAs = duplicated.svcOrderIds;
  return result;
}

/** Several orders: one transaction, one result per start (see projectOrdersIn). */
export async function projectOrders(sql: Sql, starts: readonly OrderIds[]): Promise<(ProjectResult | null)[]> {
  return await sql.begin((tx) => projectOrdersIn(tx, starts));
}

/** Events split by order, as far as the events themselves link their identifiers. */
export function groupByOrder(events: readonly StoredEvent[]): StoredEvent[][] {
  const links = new Links();
  for (const e of events) links.link(e.svcOrderId, e.clientOrderId);
  const groups = new Map<string, StoredEvent[]>();
  for (const e of events) {
    const root = links.rootOf(e.svcOrderId, e.clientOrderId);
    const g = groups.get(root);
    if (g) g.push(e);
    else groups.set(root, [e]);
  }
  return [...groups.values()];
}

/**
 * Does this order row already carry every identifier of the event? An event that would
 * add one (a link, a changed provider id) is left to the full derivation: identity
 * changes always go through the path that reads the log.
 */
const carries = (row: OrderDbRow, e: StoredEvent) =>
  (e.svcOrderId === null || e.svcOrderId === row.svc_order_id) && (e.clientOrderId === null || e.clientOrderId === row.client_order_id);

/**
 * Projects events taken off the projection queue by this transaction (their queue rows
 * already deleted in it). An order whose row has a state and already carries every
 * identifier of its new events gets them merged into that state: one locked read and one
 * write, whatever the order's history. Every other order (new, linked to another one by
 * these events, or without a state yet) is derived in full (projectOrdersIn), after the
 * merges, so that a derivation reaching a merged row recomputes it from the log. One
 * result per order.
 */
export async function projectQueued(tx: Tx, events: readonly StoredEvent[]): Promise<ProjectResult[]> {
  if (events.length === 0) return [];
  const links = new Links();
  for (const e of events) links.link(e.svcOrderId, e.clientOrderId);
  const keys = links.keys();
  const { svcs, coids } = split(keys);
  const [, rows] = await Promise.all([lockIds(tx, keys), readOrders(tx, svcs, coids)]);
  for (const o of rows) links.link(o.svc_order_id, o.client_order_id);

  const groups = new Map<string, { events: StoredEvent[]; rows: OrderDbRow[] }>();
  const groupOf = (root: string) => {
    let g = groups.get(root);
    if (!g) groups.set(root, (g = { events: [], rows: [] }));
    return g;
  };
  for (const e of events) groupOf(links.rootOf(e.svcOrderId, e.clientOrderId)).events.push(e);
  for (const o of rows) groupOf(links.rootOf(o.svc_order_id, o.client_order_id)).rows.push(o);

  const merged: (Written & { newestReceivedAt: Date | null })[] = [];
  const derive: OrderIds[] = [];
  for (const g of groups.values()) {
    const row = g.rows.length === 1 ? g.rows[0]! : null;
    const state = row === null ? null : decodeState(row.projection_state);
    if (row !== null && state !== null && g.events.every((e) => carries(row, e))) {
      merged.push({
        orderId: Number(row.id),
        fresh: false,
        state: mergeStates(state, foldState(g.events)),
        before: beforeOf([row]),
        newestReceivedAt: newestReceived(g.events),
      });
    } else {
      for (const e of g.events) derive.push({ svcOrderId: e.svcOrderId, clientOrderId: e.clientOrderId });
    }
  }
  const notes: WriteNotes = { confirmed: [], duplicated: [] };
  const changed = await writeProjections(tx, merged, notes);
  await succeedFailedPlaces(tx, notes.confirmed, CONFIRMED_BY_EVENT);
  const results = new Map<number, ProjectResult>(
    merged.map((m) => [m.orderId, withNotes({ orderId: m.orderId, changed: changed.has(m.orderId), newestReceivedAt: m.newestReceivedAt }, notes)]),
  );
  if (derive.length > 0) {
    for (const r of await projectOrdersIn(tx, derive)) if (r !== null) results.set(r.orderId, r);
  }
  return [...results.values()];
}

/** New order rows, one statement; their ids go back into the work. */
async function insertOrders(tx: Tx, inserts: { w: OrderWork; state: FoldState; createdAt: Date }[]): Promise<void> {
  if (inserts.length === 0) return;
  const input = inserts.map((i) => ({ coid: i.state.clientOrderId?.value ?? null, svc: i.state.svcOrderId?.value ?? null, created_at: i.createdAt.toISOString() }));
  const rows = await tx<{ id: string; client_order_id: string | null; svc_order_id: string | null }[]>`
    insert into orders (client_order_id, svc_order_id, created_at, updated_at)
    select t.coid, t.svc, t.created_at, now()
    from json_to_recordset(${JSON.stringify(input)}::text::json) as t(coid text, svc text, created_at timestamptz)
    returning id::text, client_order_id, svc_order_id`;
  // Both identifiers are unique among orders, and a new row has at least one of them.
  const byCoid = new Map(rows.filter((r) => r.client_order_id !== null).map((r) => [r.client_order_id!, r.id]));
  const bySvc = new Map(rows.filter((r) => r.svc_order_id !== null).map((r) => [r.svc_order_id!, r.id]));
  for (const i of inserts) {
    const coid = i.state.clientOrderId?.value ?? null;
    const id = coid !== null ? byCoid.get(coid) : bySvc.get(i.state.svcOrderId!.value);
    if (id === undefined) throw new Error("inserted order row not returned");
    i.w.orderId = Number(id);
    i.w.fresh = true;
  }
}

/**
 * Rows that turned out to be one order: keep the survivor (placed through tracklane if
 * any, else the oldest), take over what only the others knew, delete the others.
 */
async function mergeInto(tx: Tx, survivorId: number, otherIds: number[]): Promise<void> {
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

/** The answer recorded on a place command that an event from the provider settled. */
const CONFIRMED_BY_EVENT = "confirmed: an event from the provider named the order's provider id";

/** What writing the projections found beyond the changed rows. */
export interface WriteNotes {
  /** Orders whose placement was unconfirmed or failed and is now placed: an event named the provider's id. */
  confirmed: number[];
  /** Orders that now carry several provider ids for the first time. */
  duplicated: { orderId: number; svcOrderIds: string[] }[];
}

/**
 * Writes the state and the projected columns of every order in one statement; returns
 * the ids of the rows that changed (updated_at moves only for them), and notes what the
 * write found (WriteNotes) against the rows as this transaction read and locked them.
 */
async function writeProjections(tx: Tx, written: readonly Written[], notes: WriteNotes): Promise<Set<number>> {
  if (written.length === 0) return new Set();
  const iso = (d: Date | null) => (d === null ? null : d.toISOString());
  const input = written.map((w) => {
    const p = project(w.state);
    const r = p.rider;
    return {
      id: w.orderId,
      fresh: w.fresh,
      state: encodeState(w.state),
      svc: p.svcOrderId,
      svcs: p.svcOrderIds,
      coid: p.clientOrderId,
      status: p.status,
      provider_status: p.providerStatus,
      status_at: iso(p.statusAt),
      track_url: p.trackUrl,
      rider_id: r?.id ?? null,
      rider_name: r?.name ?? null,
      rider_contact: r?.contact ?? null,
      lat: r?.latitude ?? null,
      lng: r?.longitude ?? null,
      location_at: iso(r?.locationAt ?? null),
      count: p.eventCount,
      last_event_at: iso(p.lastEventAt),
    };
  });
  // Identifiers and track_url are only ever filled in, never blanked: an order placed
  // through tracklane knows them before any event does. An unconfirmed or failed
  // placement becomes placed once an event names a provider id for the order (the
  // evidence): the order's events are the provider's callbacks and polls, tracklane's own
  // record of an answer or of a confirmation by hand. A pending one is left to its place
  // command, which adopts the id instead of sending (commands/execute.ts).
  const rows = await tx<{ id: string; placement: string; svcs: string[] }[]>`
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
      updated_at = now()
    from json_to_recordset(${JSON.stringify(input)}::text::json) as v(
      id bigint, fresh boolean, state text, svc text, svcs text[], coid text, status text, provider_status text, status_at timestamptz,
      track_url text, rider_id text, rider_name text, rider_contact text, lat float8, lng float8,
      location_at timestamptz, count int, last_event_at timestamptz)
    where o.id = v.id and o.id = any(${written.map((w) => w.orderId)}::bigint[])
      and (v.fresh or (o.placement_state in ('unconfirmed', 'failed') and v.svc is not null) or (
        o.svc_order_id, o.svc_order_ids, o.client_order_id, o.status, o.provider_status, o.status_at, o.track_url,
        o.rider_id, o.rider_name, o.rider_contact, o.rider_latitude, o.rider_longitude, o.rider_location_at,
        o.event_count, o.last_event_at, o.projection_state
      ) is distinct from (
        coalesce(v.svc, o.svc_order_id), v.svcs, coalesce(v.coid, o.client_order_id), v.status, v.provider_status, v.status_at,
        coalesce(v.track_url, o.track_url), v.rider_id, v.rider_name, v.rider_contact, v.lat, v.lng, v.location_at,
        v.count, v.last_event_at, v.state
      ))
    returning o.id::text, o.placement_state as placement, o.svc_order_ids as svcs`;
  const before = new Map(written.map((w) => [w.orderId, w.before]));
  for (const r of rows) {
    const was = before.get(Number(r.id));
    if ((was?.placement === "unconfirmed" || was?.placement === "failed") && r.placement === "placed") notes.confirmed.push(Number(r.id));
    if (r.svcs.length > 1 && (was?.svcIds ?? 0) <= 1) notes.duplicated.push({ orderId: Number(r.id), svcOrderIds: r.svcs });
  }
  return new Set(rows.map((r) => Number(r.id)));
}
