/**
 * The projection: an order's state as a pure function of the SET of its events. Every
 * choice is a maximum under a total order on events, so arrival order and duplicates do
 * not matter, and the fold is kept as a mergeable FoldState: merging the states of two
 * sets of events gives the state of their union.
 */
import { LATITUDE_FIELDS, LONGITUDE_FIELDS, eventDetails } from "./normalise.ts";
import type { EventDetails, EventKind, JsonObject } from "./normalise.ts";
import { CANONICAL_STATUSES, STATUS_RANK, TERMINAL_RANK, canonicalStatus } from "./statuses.ts";
import type { CanonicalStatus } from "./statuses.ts";

/** An event as stored in order_events. */
export interface StoredEvent {
  id: number;
  dedupeKey: string;
  kind: EventKind;
  svcOrderId: string | null;
  clientOrderId: string | null;
  providerStatus: string | null;
  occurredAt: Date;
  receivedAt: Date;
  payload: JsonObject;
}

export interface Rider {
  id: string | null;
  name: string | null;
  contact: string | null;
  latitude: number | null;
  longitude: number | null;
  locationAt: Date | null;
}

export interface Projection {
  svcOrderId: string | null;
  /** Every provider id seen, sorted; two or more: the provider made several orders of one. */
  svcOrderIds: string[];
  clientOrderId: string | null;
  status: CanonicalStatus | null;
  providerStatus: string | null;
  statusAt: Date | null;
  trackUrl: string | null;
  rider: Rider | null;
  eventCount: number;
  lastEventAt: Date | null;
}

/** What orders two events: event time (epoch ms), then dedupe key (a content hash). */
export interface Stamp {
  at: number;
  key: string;
}

/** The value of the event that wins one part of the projection. */
export interface Winner<T> extends Stamp {
  value: T;
}

/**
 * A rider detail's winner, with the rider id its event named: a name, phone or position
 * is shown only beside that rider's id (project). null: its event named no rider;
 * undefined: a state stored before this was recorded.
 */
export interface RiderWinner<T> extends Winner<T> {
  rider?: string | null;
}

export interface StatusWinner extends Stamp {
  status: CanonicalStatus;
  /** The provider's string as sent (`provider_status`). */
  raw: string;
}

export interface FoldState {
  status: StatusWinner | null;
  svcOrderId: Winner<string> | null;
  /** The set of provider ids (sorted, at most MAX_SVC_IDS): a union, so it merges like the rest. */
  svcOrderIds: string[];
  clientOrderId: Winner<string> | null;
  riderId: Winner<string> | null;
  riderName: RiderWinner<string> | null;
  riderContact: RiderWinner<string> | null;
  location: RiderWinner<{ latitude: number; longitude: number }> | null;
  trackUrl: Winner<string> | null;
  lastEventAt: number | null;
  eventCount: number;
}

/** An order has one provider id, two when the provider duplicated it; more is noise kept short. */
const MAX_SVC_IDS = 8;

export const EMPTY_STATE: FoldState = {
  status: null,
  svcOrderId: null,
  svcOrderIds: [],
  clientOrderId: null,
  riderId: null,
  riderName: null,
  riderContact: null,
  location: null,
  trackUrl: null,
  lastEventAt: null,
  eventCount: 0,
};

/**
 * Later event time first; equal times are settled by the dedupe key, not by arrival, so
 * the winner is a property of the set alone. Takes a stamp's parts, so that the fold,
 * which asks per event, makes no objects.
 */
function laterParts(at: number, key: string, thanAt: number, thanKey: string): boolean {
  return at !== thanAt ? at > thanAt : key > thanKey;
}

const laterStamp = (a: Stamp, b: Stamp): boolean => laterParts(a.at, a.key, b.at, b.key);

function later(a: StoredEvent, b: StoredEvent): boolean {
  return laterParts(a.occurredAt.getTime(), a.dedupeKey, b.occurredAt.getTime(), b.dedupeKey);
}

/** Sort comparator: the fold's "later" events first (a total order on distinct events). */
export function latestFirst(a: StoredEvent, b: StoredEvent): number {
  if (a.dedupeKey === b.dedupeKey) return 0;
  return later(a, b) ? -1 : 1;
}

function latestOf<W extends Stamp>(a: W | null, b: W | null): W | null {
  if (a === null) return b;
  if (b === null) return a;
  return laterStamp(b, a) ? b : a;
}

/**
 * The status winner of two. Higher rank wins. Among terminal events the first one
 * reached wins (once terminal, no later event changes the status); among others the
 * later one wins.
 */
function statusOf(a: StatusWinner | null, b: StatusWinner | null): StatusWinner | null {
  if (a === null) return b;
  if (b === null) return a;
  const rankA = STATUS_RANK[a.status];
  const rankB = STATUS_RANK[b.status];
  if (rankA !== rankB) return rankB > rankA ? b : a;
  if (a.key === b.key) return a;
  if (rankA === TERMINAL_RANK) return laterStamp(a, b) ? b : a;
  return laterStamp(b, a) ? b : a;
}

/** Sorted union, cut to the smallest MAX_SVC_IDS: the same set whatever the merge order. */
function unionOf(a: readonly string[], b: readonly string[]): string[] {
  if (b.length === 0 || (a.length === 1 && b.length === 1 && a[0] === b[0])) return a as string[];
  if (a.length === 0) return b as string[];
  return [...new Set([...a, ...b])].sort().slice(0, MAX_SVC_IDS);
}

/** What an order row shows (its columns in `orders`): all a row without a stored state has. */
export interface ShownColumns {
  status: string | null;
  provider_status: string | null;
  status_at: Date | null;
  svc_order_id: string | null;
  svc_order_ids: string[];
  client_order_id: string | null;
  track_url: string | null;
  rider_id: string | null;
  rider_name: string | null;
  rider_contact: string | null;
  rider_latitude: number | null;
  rider_longitude: number | null;
  rider_location_at: Date | null;
  event_count: number;
  last_event_at: Date | null;
}

/**
 * A state that projects to what a row without a stored state shows (a row projected
 * before states were stored, migration 0003): for an order retention shed events of,
 * what those events told lives on in these columns only (withShed). The events behind
 * them are unknown, so each part gets a stamp of its own: the time the row gives it
 * (status_at, rider_location_at; else the last event's time), and a key naming the part,
 * distinct per part so that the stored form (projection/state.ts) keeps every time.
 */
export function stateOfColumns(row: ShownColumns): FoldState {
  const ms = (d: Date | null) => (d === null ? null : d.getTime());
  const last = ms(row.last_event_at) ?? 0;
  const riderAt = ms(row.rider_location_at) ?? ms(row.status_at) ?? last;
  const winner = <T>(value: T | null, at: number, part: string): Winner<T> | null => (value === null ? null : { value, at, key: `row:${part}` });
  const rider = <T>(value: T | null, at: number, part: string): RiderWinner<T> | null => {
    const w = winner(value, at, part);
    return w === null ? null : { ...w, rider: row.rider_id };
  };
  const status = CANONICAL_STATUSES.find((c) => c === row.status) ?? null;
  return {
    status: status === null ? null : { status, raw: row.provider_status ?? row.status ?? status, at: ms(row.status_at) ?? last, key: "row:status" },
    svcOrderId: winner(row.svc_order_id, 0, "svc"),
    svcOrderIds: row.svc_order_ids,
    clientOrderId: winner(row.client_order_id, 0, "client"),
    riderId: winner(row.rider_id, riderAt, "rider"),
    riderName: rider(row.rider_name, riderAt, "rider"),
    riderContact: rider(row.rider_contact, riderAt, "rider"),
    location:
      row.rider_latitude === null || row.rider_longitude === null
        ? null
        : rider({ latitude: row.rider_latitude, longitude: row.rider_longitude }, ms(row.rider_location_at) ?? riderAt, "location"),
    trackUrl: winner(row.track_url, 0, "track"),
    lastEventAt: ms(row.last_event_at),
    eventCount: row.event_count,
  };
}

/** The state of A ∪ B from the states of two DISJOINT sets of events A and B. */
export function mergeStates(a: FoldState, b: FoldState): FoldState {
  return {
    status: statusOf(a.status, b.status),
    svcOrderId: latestOf(a.svcOrderId, b.svcOrderId),
    svcOrderIds: unionOf(a.svcOrderIds, b.svcOrderIds),
    clientOrderId: latestOf(a.clientOrderId, b.clientOrderId),
    riderId: latestOf(a.riderId, b.riderId),
    riderName: latestOf(a.riderName, b.riderName),
    riderContact: latestOf(a.riderContact, b.riderContact),
    location: latestOf(a.location, b.location),
    trackUrl: latestOf(a.trackUrl, b.trackUrl),
    lastEventAt: a.lastEventAt === null ? b.lastEventAt : b.lastEventAt === null ? a.lastEventAt : Math.max(a.lastEventAt, b.lastEventAt),
    eventCount: a.eventCount + b.eventCount,
  };
}

/**
 * The state of an order derived from its log. `log` folds the events the log still has;
 * `kept` is the order row's state (every event it ever merged; null: none); `shed` says
 * retention dropped a partition this order had events in. Then what those events told
 * (the rider's last position, mostly) lives on only in the row: every field takes the
 * later of the two, the log's on a tie, and the count stays the row's. With nothing shed
 * the log alone decides, so a rebuild still corrects a row the fold's rules now read
 * otherwise, or a damaged one.
 */
export function withShed(log: FoldState, kept: FoldState | null, shed: boolean): FoldState {
  if (!shed || kept === null) return log;
  return { ...mergeStates(log, kept), eventCount: Math.max(kept.eventCount, log.eventCount) };
}

/** The part of a state one event wins so far: its stamp, value and rider (see foldState). */
interface Best<T> {
  at: number;
  key: string;
  value: T | null;
  rider: string | null;
}

const noBest = <T>(): Best<T> => ({ at: 0, key: "", value: null, rider: null });

/** Takes (at, key, value) into `best` when the value is there and its stamp is later. */
function offer<T>(best: Best<T>, at: number, key: string, value: T | null, rider: string | null = null): void {
  if (value !== null && (best.value === null || laterParts(at, key, best.at, best.key))) {
    best.at = at;
    best.key = key;
    best.value = value;
    best.rider = rider;
  }
}

const won = <T>(b: Best<T>): Winner<T> | null => (b.value === null ? null : { value: b.value, at: b.at, key: b.key });
const wonByRider = <T>(b: Best<T>): RiderWinner<T> | null => (b.value === null ? null : { value: b.value, at: b.at, key: b.key, rider: b.rider });

/** Has the payload any key? (Most of a full derivation's events come without their payloads.) */
function hasKeys(payload: JsonObject): boolean {
  for (const _ in payload) return true;
  return false;
}

/**
 * The state of a set of events (duplicates, by dedupe key, count once): what merging every
 * event's own state gives (mergeStates), found in one pass that keeps each part's winning
 * event so far and makes the state's objects once, at the end. A rebuild folds millions of
 * events, and a state object per event was most of its garbage.
 */
export function foldState(input: readonly StoredEvent[]): FoldState {
  if (input.length === 0) return EMPTY_STATE;
  const seen = new Set<string>();
  const svc = noBest<string>();
  const client = noBest<string>();
  const riderId = noBest<string>();
  const riderName = noBest<string>();
  const riderContact = noBest<string>();
  const location = noBest<{ latitude: number; longitude: number }>();
  const trackUrl = noBest<string>();
  const svcIds = new Set<string>();
  let status: { status: CanonicalStatus; raw: string; rank: number; at: number; key: string } | null = null;
  let lastEventAt = Number.NEGATIVE_INFINITY;
  for (const e of input) {
    const key = e.dedupeKey;
    if (seen.has(key)) continue;
    seen.add(key);
    const at = e.occurredAt.getTime();
    if (at > lastEventAt) lastEventAt = at;
    offer(svc, at, key, e.svcOrderId);
    offer(client, at, key, e.clientOrderId);
    if (e.svcOrderId !== null) svcIds.add(e.svcOrderId);
    // Unknown strings (and location events) never set the status: they appear in the timeline only.
    const canonical = e.kind === "status" ? canonicalStatus(e.providerStatus) : null;
    if (canonical !== null) {
      const rank = STATUS_RANK[canonical];
      // As statusOf: the higher rank; among terminal events the first reached, else the later.
      const takes =
        status === null ||
        rank > status.rank ||
        (rank === status.rank && (rank === TERMINAL_RANK ? laterParts(status.at, status.key, at, key) : laterParts(at, key, status.at, status.key)));
      if (takes) status = { status: canonical, raw: e.providerStatus!, rank, at, key };
    }
    if (!hasKeys(e.payload)) continue;
    const d = eventDetails(e.payload);
    offer(riderId, at, key, d.riderId);
    offer(riderName, at, key, d.riderName, d.riderId);
    offer(riderContact, at, key, d.riderContact, d.riderId);
    // The pair is made only for an event that wins it.
    if (d.latitude !== null && d.longitude !== null && (location.value === null || laterParts(at, key, location.at, location.key))) {
      offer(location, at, key, { latitude: d.latitude, longitude: d.longitude }, d.riderId);
    }
    offer(trackUrl, at, key, d.trackUrl);
  }
  return {
    status: status === null ? null : { status: status.status, raw: status.raw, at: status.at, key: status.key },
    svcOrderId: won(svc),
    svcOrderIds: [...svcIds].sort().slice(0, MAX_SVC_IDS),
    clientOrderId: won(client),
    riderId: won(riderId),
    riderName: wonByRider(riderName),
    riderContact: wonByRider(riderContact),
    location: wonByRider(location),
    trackUrl: won(trackUrl),
    lastEventAt,
    eventCount: seen.size,
  };
}

const date = (ms: number | undefined | null) => (ms === undefined || ms === null ? null : new Date(ms));

/**
 * A rider detail, unless its event named another rider than the latest rider id: one
 * rider's phone or position is never shown under another's id (a reassigned order shows
 * the new rider without the old one's details until the new one's arrive).
 */
function ofRider<T>(w: RiderWinner<T> | null, riderId: string | null): RiderWinner<T> | null {
  if (w === null || riderId === null || w.rider === undefined || w.rider === null) return w;
  return w.rider === riderId ? w : null;
}

/** What the order row shows of a state. */
export function project(s: FoldState): Projection {
  const id = s.riderId?.value ?? null;
  const name = ofRider(s.riderName, id);
  const contact = ofRider(s.riderContact, id);
  const location = ofRider(s.location, id);
  const rider: Rider | null =
    id !== null || name || contact || location
      ? {
          id,
          name: name?.value ?? null,
          contact: contact?.value ?? null,
          latitude: location?.value.latitude ?? null,
          longitude: location?.value.longitude ?? null,
          locationAt: date(location?.at),
        }
      : null;
  return {
    svcOrderId: s.svcOrderId?.value ?? null,
    svcOrderIds: s.svcOrderIds,
    clientOrderId: s.clientOrderId?.value ?? null,
    status: s.status?.status ?? null,
    providerStatus: s.status?.raw ?? null,
    statusAt: date(s.status?.at),
    trackUrl: s.trackUrl?.value ?? null,
    rider,
    eventCount: s.eventCount,
    lastEventAt: date(s.lastEventAt),
  };
}

export function fold(input: readonly StoredEvent[]): Projection {
  return project(foldState(input));
}

/**
 * The details the fold reads from payloads, and the top-level keys each can come from
 * (eventDetails's aliases): a detail comes only from a payload holding at least one key of
 * every group. test/integration/ingest-projection.test.ts checks this against
 * eventDetails, so a new alias there cannot be missed here.
 */
export const DETAIL_SOURCES = {
  // rider_details: a nested object that may hold the rider's id, name, phone and location.
  riderId: [["rider_id", "sfx_rider_id", "rider_details"]],
  riderName: [["rider_name", "rider_details"]],
  riderContact: [["rider_contact", "rider_contact_number", "virtual_contact_number", "rider_phone", "masked_rider_contact", "rider_details"]],
  // A position is a pair from one place: both top-level coordinates, or rider_details alone.
  location: [
    [...LATITUDE_FIELDS, "rider_details"],
    [...LONGITUDE_FIELDS, "rider_details"],
  ],
  trackUrl: [["track_url"]],
} as const satisfies Record<string, readonly (readonly string[])[]>;

export type DetailName = keyof typeof DETAIL_SOURCES;
export const DETAIL_NAMES = Object.keys(DETAIL_SOURCES) as DetailName[];

/** Bit of a detail in an event's details mask (payloadsNeeded's `mask`, FoldEvent's `details`): bit i = DETAIL_NAMES[i]. */
export const detailBit = (name: DetailName): number => 1 << DETAIL_NAMES.indexOf(name);

function hasDetail(d: EventDetails, name: DetailName): boolean {
  if (name === "location") return d.latitude !== null && d.longitude !== null;
  return d[name] !== null;
}

/**
 * The payloads the fold still needs: for each detail, walking the events latest first
 * past those whose keys rule the detail out (`mask`), the first one not yet `loaded`,
 * unless an already loaded one before it supplies the detail. Load them and ask again
 * until nothing is needed; then fold(events with the loaded payloads, every other payload
 * empty) = fold(events with every payload), since each detail's winner is the latest event
 * that supplies it and every event before it in that walk is loaded. Only a handful of an
 * order's events (its latest location, its latest status) are ever read in full.
 */
export function payloadsNeeded<E extends StoredEvent>(
  latestFirstEvents: readonly E[],
  mask: (e: E) => number,
  loaded: (e: E) => EventDetails | undefined,
): E[] {
  const need = new Set<E>();
  for (const name of DETAIL_NAMES) {
    const bit = detailBit(name);
    for (const e of latestFirstEvents) {
      if ((mask(e) & bit) === 0) continue;
      const d = loaded(e);
      if (d === undefined) {
        need.add(e);
        break;
      }
      if (hasDetail(d, name)) break;
    }
  }
  return [...need];
}
