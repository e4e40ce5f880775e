/**
 * Applies the pure fold (src/domain/projection.ts) to the database, for many orders in one
 * transaction: merges queued events into each order's stored fold state (projectQueued),
 * or derives an order from its whole log (projectOrdersIn). Exactly once and lock order:
 * docs/architecture.md, "Projection".
 */
import type { Sql, TransactionSql } from "postgres";
import { DETAIL_SOURCES, foldState, latestFirst, mergeStates, payloadsNeeded, project, stateOfColumns, withShed } from "../domain/projection.ts";
import type { FoldState, StoredEvent } from "../domain/projection.ts";
import { eventDetails, isJsonObject } from "../domain/normalise.ts";
import type { EventDetails, JsonObject } from "../domain/normalise.ts";
import { redactState } from "../domain/redact.ts";
import { succeedFailedPlaces } from "../commands/store.ts";
import { foldColumns, payloadsOf, roundBranches, shedOrderKeys } from "../events/log.ts";
import type { EventColumns, FoldEvent } from "../events/log.ts";
import type { Logger } from "../logger.ts";
import { NEW_ORDER } from "../orders/change.ts";
import type { OrderChange, OrderSnapshot } from "../orders/change.ts";
import { insertSeenOrders, lockOrdersOf, mergeOrders, shownColumnsOf, writeProjected } from "../orders/store.ts";
import type { ProjectionRow, ProjectedWrite } from "../orders/store.ts";
import { claimAndRead, withQueueProbes } from "./backlog.ts";
import { decodeState, encodeState } from "./state.ts";

export interface OrderIds {
  svcOrderId: string | null;
  clientOrderId: string | null;
}

export interface ProjectResult {
  orderId: number;
  changed: boolean;
  /** What the write changed on the order's row (null: nothing). */
  change: OrderChange | null;
  /** Newest event's arrival time, for the projection-lag metric. */
  newestReceivedAt: Date | null;
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
    const a = svc === null ? null : svcKey(svc);
    const b = coid === null ? null : coidKey(coid);
    if (a !== null) this.add(a);
    if (b !== null) this.add(b);
    if (a !== null && b !== null) {
      const [ra, rb] = [this.find(a), this.find(b)];
      if (ra !== rb) this.parent.set(ra, rb);
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

/** The payload of an event whose payload the fold did not need: shared, so never changed. */
const NO_PAYLOAD: JsonObject = Object.freeze({});

/** The row itself with a payload: the fold's events are the rows the read made, not copies. */
function withPayload(r: FoldEvent, payload: JsonObject): GatheredEvent {
  const e = r as GatheredEvent;
  e.payload = payload;
  return e;
}

/** An order_events row as the fold sees it; the payload is loaded only where needed. */
export function toStored(r: EventColumns, payload: JsonObject): StoredEvent {
  return {
    id: r.id,
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
 * The advisory locks a projection of these orders takes first (lockIds), for a
 * transaction that locks an order's row before it projects the order (the redaction):
 * taken before the row, as the projection does, so that the two never wait on each other
 * in a cycle. projectOrdersIn takes them again (they are re-entrant) with any found later.
 */
export async function lockOrderIds(tx: Tx, orders: readonly OrderIds[]): Promise<void> {
  const keys = orders.flatMap((o) => [...(o.svcOrderId === null ? [] : [svcKey(o.svcOrderId)]), ...(o.clientOrderId === null ? [] : [coidKey(o.clientOrderId)])]);
  await lockIds(tx, [...new Set(keys)]);
}

const DETAIL_KEYS = Object.values(DETAIL_SOURCES);

/** An event of the fold, with its payload-key bit mask (foldColumns) and its partition's period. */
type GatheredEvent = StoredEvent & Pick<FoldEvent, "details" | "period">;

interface Gathered {
  links: Links;
  events: Map<number, GatheredEvent>;
  orders: Map<number, ProjectionRow>;
}

/**
 * Locks and reads, round by round, every identifier reachable from the starts through
 * events and order rows. Each round's lock and reads travel together (pipelined on the
 * transaction's connection, executed in order): identifiers, then rows, then events, so
 * that no event is read before the rows it was merged into are locked; the events are
 * read as their queued rows no other drain holds are claimed (backlog.ts claimAndRead).
 */
async function gather(tx: Tx, starts: readonly OrderIds[]): Promise<Gathered> {
  const links = new Links();
  for (const s of starts) links.link(s.svcOrderId, s.clientOrderId);
  const events = new Map<number, GatheredEvent>();
  const orders = new Map<number, ProjectionRow>();
  const locked = new Set<string>();
  for (let round = 0; round < MAX_LINK_ROUNDS; round++) {
    const keys = links.keys().filter((k) => !locked.has(k));
    if (keys.length === 0) break;
    keys.forEach((k) => locked.add(k));
    const { svcs, coids } = split(keys);
    const branches = roundBranches(tx, { svcs, coids, svcsRead: split(locked).svcs });
    const [, orderRows, rows] = await Promise.all([lockIds(tx, keys), lockOrdersOf(tx, svcs, coids), claimAndRead<FoldEvent>(tx, branches, foldColumns(tx, DETAIL_KEYS))]);
    // An order's events come together: its pair of ids is linked once, not per event.
    let previous: FoldEvent | null = null;
    for (const r of rows) {
      if (!events.has(r.id)) events.set(r.id, withPayload(r, NO_PAYLOAD));
      if (previous === null || previous.svcOrderId !== r.svcOrderId || previous.clientOrderId !== r.clientOrderId) links.link(r.svcOrderId, r.clientOrderId);
      previous = r;
    }
    for (const o of orderRows) {
      orders.set(o.id, o);
      links.link(o.svc_order_id, o.client_order_id);
    }
  }
  return { links, events, orders };
}

interface OrderWork {
  events: GatheredEvent[];
  rows: ProjectionRow[];
  state?: FoldState;
  orderId?: number;
  fresh?: boolean;
}

/** An order row to write: its new state, and whether it was inserted by this transaction. */
interface Written {
  orderId: number;
  fresh: boolean;
  state: FoldState;
  /** The row before this write (the survivor, where rows merge). */
  before: OrderSnapshot;
}

/** Reads the payloads the fold needs (payloadsNeeded), in as few rounds as it takes. */
async function loadPayloads(tx: Tx, work: Iterable<OrderWork>): Promise<void> {
  const details = new Map<StoredEvent, EventDetails>();
  const sorted = [...work].map((w) => [...w.events].sort(latestFirst));
  for (;;) {
    const need = sorted.flatMap((events) => payloadsNeeded(events, (e) => e.details, (e) => details.get(e)));
    if (need.length === 0) return;
    const byId = new Map(need.map((e) => [e.id, e]));
    const rows = await payloadsOf(tx, [...byId.values()]);
    for (const r of rows) {
      const e = byId.get(r.id)!;
      e.payload = isJsonObject(r.payload) ? (r.payload as JsonObject) : {};
      details.set(e, eventDetails(e.payload));
    }
    // An event that vanished cannot be: order_events is append-only. Guard the loop anyway.
    if (rows.length < byId.size) throw new Error("events disappeared while projecting");
  }
}

/**
 * What an order's rows hold between them (rows of one order merge: their events are
 * disjoint); null: no state. A row without a stored state counts with `columns`' state of
 * it when given (stateOfColumns), else not at all.
 */
function keptState(rows: readonly ProjectionRow[], columns: ReadonlyMap<number, FoldState> = NO_COLUMNS): FoldState | null {
  const states = rows.map((r) => decodeState(r.projection_state) ?? columns.get(r.id) ?? null).filter((s): s is FoldState => s !== null);
  return states.length === 0 ? null : states.reduce(mergeStates);
}

const NO_COLUMNS: ReadonlyMap<number, FoldState> = new Map();

/**
 * The states of the rows without a stored state (rows projected before states were
 * stored) of the orders retention shed events of, read from their columns: what the
 * dropped events told is there only, and a derivation from the events left would blank it.
 */
async function columnStates(tx: Tx, work: ReadonlyMap<string, OrderWork>, shed: ReadonlySet<string>): Promise<ReadonlyMap<number, FoldState>> {
  const ids = [...work].flatMap(([root, w]) => (shed.has(root) ? w.rows.filter((r) => decodeState(r.projection_state) === null).map((r) => r.id) : []));
  if (ids.length === 0) return NO_COLUMNS;
  return new Map((await shownColumnsOf(tx, ids)).map((r) => [r.id, stateOfColumns(r)]));
}

/** The latest arrival among these events, for the projection-lag metric. */
function newestReceived(events: readonly StoredEvent[]): Date | null {
  let newest: Date | null = null;
  for (const e of events) if (newest === null || e.receivedAt.getTime() > newest.getTime()) newest = e.receivedAt;
  return newest;
}

/** The earliest arrival among these events (null: none). */
function firstReceived(events: readonly StoredEvent[]): Date | null {
  let first: Date | null = null;
  for (const e of events) if (first === null || e.receivedAt.getTime() < first.getTime()) first = e.receivedAt;
  return first;
}

/**
 * Everything a projection reads before it writes: the orders' events and rows (gather),
 * grouped per order, the payloads the fold needs and the orders retention shed events of.
 * Run with the reads' planner settings (backlog.ts withQueueProbes): each of these
 * statements probes every partition, or prunes per row as it runs, and a custom plan of
 * one estimated every id against every partition.
 */
async function readOrders(tx: Tx, starts: readonly OrderIds[]): Promise<{ links: Links; work: Map<string, OrderWork>; shed: Set<string> }> {
  const { links, events, orders } = await gather(tx, starts);
  const work = new Map<string, OrderWork>();
  const workOf = (root: string) => {
    let w = work.get(root);
    if (!w) work.set(root, (w = { events: [], rows: [] }));
    return w;
  };
  // Consecutive events of one order share its work: found once per run of them.
  let previous: StoredEvent | null = null;
  let previousWork: OrderWork | null = null;
  for (const e of events.values()) {
    const w: OrderWork =
      previousWork !== null && previous!.svcOrderId === e.svcOrderId && previous!.clientOrderId === e.clientOrderId
        ? previousWork
        : workOf(links.rootOf(e.svcOrderId, e.clientOrderId));
    w.events.push(e);
    previous = e;
    previousWork = w;
  }
  for (const o of orders.values()) workOf(links.rootOf(o.svc_order_id, o.client_order_id)).rows.push(o);
  // The survivor first: placed through tracklane if any, else the oldest.
  const rank = (o: ProjectionRow) => (o.placement_state !== "external" ? 0 : 1);
  for (const w of work.values()) w.rows.sort((a, b) => rank(a) - rank(b) || a.id - b.id);

  // Orders retention shed events of: their rows keep what those events told. Asked while
  // the payloads load (pipelined on the transaction's connection).
  const keys = links.keys();
  const bare = (k: string) => k.slice(k.indexOf(":") + 1);
  const [shedKeys] = await Promise.all([
    shedOrderKeys(tx, [...new Set(keys.map(bare))]),
    loadPayloads(tx, work.values()),
  ]);
  const shed = new Set(keys.filter((k) => shedKeys.has(bare(k))).map((k) => links.find(k)));
  return { links, work, shed };
}

export interface DeriveOptions {
  /**
   * The derivation of a redaction (src/retention/redact.ts): what the stored state keeps of
   * events retention dropped comes without the rider's name and contact.
   */
  redacting?: boolean;
}

/**
 * Projects the orders of `starts` in the caller's transaction; one result per start
 * (null when the order has neither events nor a row). Starts that are the same order
 * share one projection.
 */
export async function projectOrdersIn(tx: Tx, starts: readonly OrderIds[], options: DeriveOptions = {}): Promise<(ProjectResult | null)[]> {
  const { links, work, shed } = await withQueueProbes(tx, () => readOrders(tx, starts));
  const columns = await columnStates(tx, work, shed);
  const kept = (rows: readonly ProjectionRow[]) => {
    const state = keptState(rows, columns);
    return state !== null && options.redacting ? redactState(state) : state;
  };

  const inserts: { w: OrderWork; state: FoldState; createdAt: Date; firstEventId: number }[] = [];
  for (const [root, w] of work) {
    if (w.events.length === 0 && w.rows.length === 0) continue;
    w.state = withShed(foldState(w.events), kept(w.rows), shed.has(root));
    const [survivor, ...merged] = w.rows;
    if (survivor === undefined) {
      let firstEventId = Number.POSITIVE_INFINITY;
      for (const e of w.events) if (e.id < firstEventId) firstEventId = e.id;
      inserts.push({ w, state: w.state, createdAt: firstReceived(w.events) ?? new Date(), firstEventId });
    } else {
      w.orderId = survivor.id;
      w.fresh = false;
      if (merged.length > 0) await mergeOrders(tx, w.orderId, merged.map((m) => m.id));
    }
  }
  // New orders get their ids in the order their first events arrived, whatever order the
  // log's partitions returned the events in.
  inserts.sort((a, b) => a.firstEventId - b.firstEventId);
  const ids = await insertSeenOrders(
    tx,
    inserts.map((i) => ({ clientOrderId: i.state.clientOrderId?.value ?? null, svcOrderId: i.state.svcOrderId?.value ?? null, createdAt: i.createdAt })),
  );
  inserts.forEach((i, n) => {
    i.w.orderId = ids[n]!;
    i.w.fresh = true;
  });
  const changes = await write(
    tx,
    [...work.values()].flatMap((w) =>
      w.state === undefined || w.orderId === undefined
        ? []
        : [{ orderId: w.orderId, fresh: w.fresh === true, state: w.state, before: w.fresh ? NEW_ORDER : beforeOf(w.rows, w.state) }],
    ),
  );

  return starts.map((s) => {
    if (s.svcOrderId === null && s.clientOrderId === null) return null;
    const root = links.rootOf(s.svcOrderId, s.clientOrderId);
    const w = work.get(root);
    if (!w || w.orderId === undefined) return null;
    const change = changes.get(w.orderId) ?? null;
    return { orderId: w.orderId, changed: change !== null, change, newestReceivedAt: newestReceived(w.events) };
  });
}

/**
 * The row "before" a write, for the messages it calls for (OrderChange): the survivor's.
 * Where rows merge, a status, rider or location the survivor already shows but a merged
 * row did not is reported as changed from that row's: the merged row's receivers (who
 * knew the order by its other id) heard nothing of it, and which row survives turns on
 * the order the events arrived in.
 */
function beforeOf(rows: readonly ProjectionRow[], state: FoldState): OrderSnapshot {
  const [survivor, ...merged] = rows;
  if (survivor === undefined) return NEW_ORDER;
  if (merged.length === 0) return survivor;
  const after = project(state);
  const riderId = after.rider?.id ?? null;
  const locationAt = after.rider?.locationAt?.getTime() ?? null;
  // Per field: the survivor's value when it differs from the write's, else the first merged row's that does.
  const differing = (differs: (r: ProjectionRow) => boolean) => (differs(survivor) ? survivor : (merged.find(differs) ?? survivor));
  const status = differing((r) => r.status !== after.status).status;
  const rider = differing((r) => r.rider_id !== riderId).rider_id;
  const location = differing((r) => (r.rider_location_at?.getTime() ?? null) !== locationAt).rider_location_at;
  return { ...survivor, status, rider_id: rider, rider_location_at: location };
}

/** A placement settled by an event: the provider had the order after all. */
const confirmedByEvent = (c: OrderChange) =>
  (c.placement.before === "unconfirmed" || c.placement.before === "failed") && c.placement.after === "placed";

/** Several provider ids for the first time: the provider made a second order. */
const duplicated = (c: OrderChange) => c.svcOrderIds.after.length > 1 && c.svcOrderIds.before.length <= 1;

/**
 * Writes the projections through the orders table's owner, and settles the place commands
 * of placements the events confirmed, in the caller's transaction; the changes by order.
 */
async function write(tx: Tx, written: readonly Written[]): Promise<Map<number, OrderChange>> {
  const writes: ProjectedWrite[] = written.map((w) => ({
    orderId: w.orderId,
    fresh: w.fresh,
    state: encodeState(w.state),
    projection: project(w.state),
    before: w.before,
  }));
  const changes = await writeProjected(tx, writes);
  await succeedFailedPlaces(tx, changes.filter(confirmedByEvent).map((c) => c.orderId), CONFIRMED_BY_EVENT);
  return new Map(changes.map((c) => [c.orderId, c]));
}

/**
 * Logs what the projection found about placements, once: it is found by the transaction
 * that makes the change, so call this after that transaction committed.
 */
export function reportPlacements(log: Logger, results: readonly ProjectResult[]): void {
  for (const { change } of results) {
    if (change === null) continue;
    if (confirmedByEvent(change)) log.info({ orderId: change.orderId }, "unconfirmed placement confirmed by the provider's event");
    if (duplicated(change)) {
      log.warn(
        { orderId: change.orderId, svcOrderIds: change.svcOrderIds.after },
        "the provider has several orders for one client_order_id: cancel the extra one at the provider",
      );
    }
  }
}

/** Several orders: one transaction, one result per start (see projectOrdersIn). */
/** An order row's identities: its client id with each provider id it carries (what re-deriving the row starts from). */
export function identitiesOfRow(o: { svc_order_id: string | null; client_order_id: string | null; svc_order_ids: string[] }): OrderIds[] {
  const svcs = new Set([...(o.svc_order_id === null ? [] : [o.svc_order_id]), ...o.svc_order_ids]);
  if (svcs.size === 0) return [{ svcOrderId: null, clientOrderId: o.client_order_id }];
  return [...svcs].map((svc) => ({ svcOrderId: svc, clientOrderId: o.client_order_id }));
}

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
const carries = (row: ProjectionRow, e: StoredEvent) =>
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
  const [, rows] = await Promise.all([lockIds(tx, keys), lockOrdersOf(tx, svcs, coids)]);
  for (const o of rows) links.link(o.svc_order_id, o.client_order_id);

  const groups = new Map<string, { events: StoredEvent[]; rows: ProjectionRow[] }>();
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
        orderId: row.id,
        fresh: false,
        state: mergeStates(state, foldState(g.events)),
        before: row,
        newestReceivedAt: newestReceived(g.events),
      });
    } else {
      for (const e of g.events) derive.push({ svcOrderId: e.svcOrderId, clientOrderId: e.clientOrderId });
    }
  }
  const changes = await write(tx, merged);
  const results = new Map<number, ProjectResult>(
    merged.map((m) => {
      const change = changes.get(m.orderId) ?? null;
      return [m.orderId, { orderId: m.orderId, changed: change !== null, change, newestReceivedAt: m.newestReceivedAt }];
    }),
  );
  if (derive.length > 0) {
    for (const r of await projectOrdersIn(tx, derive)) if (r !== null) results.set(r.orderId, r);
  }
  return [...results.values()];
}

/** The answer recorded on a place command that an event from the provider settled. */
const CONFIRMED_BY_EVENT = "confirmed: an event from the provider named the order's provider id";
