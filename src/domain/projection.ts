/**
 * The projection: an order's state as a pure function of the SET of its events
 * (PRODUCT.md §5). Every choice below is a maximum under a total order on events, so the
 * result does not depend on arrival order or on duplicates: fold(permute(E ∪ dups)) =
 * fold(E). Property tests in test/unit/projection.test.ts hold it to that.
 */
import { LATITUDE_FIELDS, LONGITUDE_FIELDS, eventDetails } from "./normalise.ts";
import type { EventDetails, EventKind, JsonObject } from "./normalise.ts";
import { STATUS_RANK, TERMINAL_RANK, canonicalStatus } from "./statuses.ts";
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
  clientOrderId: string | null;
  status: CanonicalStatus | null;
  providerStatus: string | null;
  statusAt: Date | null;
  trackUrl: string | null;
  rider: Rider | null;
  eventCount: number;
  lastEventAt: Date | null;
}

/**
 * Later event time first; equal times are settled by the dedupe key (a hash of the
 * content), not by arrival, so the winner is a property of the set alone.
 */
function later(a: StoredEvent, b: StoredEvent): boolean {
  const dt = a.occurredAt.getTime() - b.occurredAt.getTime();
  return dt !== 0 ? dt > 0 : a.dedupeKey > b.dedupeKey;
}

/**
 * Does `a` beat `b` for the order's status? Higher rank wins. Among terminal events the
 * first one reached wins (once terminal, no later event changes the status); among
 * others the later one wins.
 */
function beatsForStatus(a: StoredEvent, rankA: number, b: StoredEvent, rankB: number): boolean {
  if (rankA !== rankB) return rankA > rankB;
  if (rankA === TERMINAL_RANK) return a.dedupeKey === b.dedupeKey ? false : !later(a, b);
  return later(a, b);
}

/** Sort comparator: the fold's "later" events first (a total order on distinct events). */
export function latestFirst(a: StoredEvent, b: StoredEvent): number {
  if (a.dedupeKey === b.dedupeKey) return 0;
  return later(a, b) ? -1 : 1;
}

/** The latest (by event time) of the events for which `pick` finds a value. */
function latestWith<T>(events: StoredEvent[], pick: (e: StoredEvent) => T | null): { value: T; at: Date } | null {
  let best: { event: StoredEvent; value: T } | null = null;
  for (const e of events) {
    const value = pick(e);
    if (value === null) continue;
    if (best === null || later(e, best.event)) best = { event: e, value };
  }
  return best && { value: best.value, at: best.event.occurredAt };
}

export function fold(input: readonly StoredEvent[]): Projection {
  const events = [...new Map(input.map((e) => [e.dedupeKey, e])).values()];
  let winner: { event: StoredEvent; status: CanonicalStatus; rank: number } | null = null;
  let svcOrderId: StoredEvent | null = null;
  let clientOrderId: StoredEvent | null = null;
  let lastEventAt: Date | null = null;
  for (const e of events) {
    if (lastEventAt === null || e.occurredAt > lastEventAt) lastEventAt = e.occurredAt;
    if (e.svcOrderId !== null && (svcOrderId === null || later(e, svcOrderId))) svcOrderId = e;
    if (e.clientOrderId !== null && (clientOrderId === null || later(e, clientOrderId))) clientOrderId = e;
    if (e.kind !== "status") continue;
    const status = canonicalStatus(e.providerStatus);
    if (status === null) continue; // unknown strings appear in the timeline only
    const rank = STATUS_RANK[status];
    if (winner === null || beatsForStatus(e, rank, winner.event, winner.rank)) winner = { event: e, status, rank };
  }
  const details = new Map(events.map((e) => [e.dedupeKey, eventDetails(e.payload)]));
  const d = (e: StoredEvent) => details.get(e.dedupeKey)!;
  const riderId = latestWith(events, (e) => d(e).riderId);
  const riderName = latestWith(events, (e) => d(e).riderName);
  const riderContact = latestWith(events, (e) => d(e).riderContact);
  const location = latestWith(events, (e) => {
    const { latitude, longitude } = d(e);
    return latitude !== null && longitude !== null ? { latitude, longitude } : null;
  });
  const rider: Rider | null =
    riderId || riderName || riderContact || location
      ? {
          id: riderId?.value ?? null,
          name: riderName?.value ?? null,
          contact: riderContact?.value ?? null,
          latitude: location?.value.latitude ?? null,
          longitude: location?.value.longitude ?? null,
          locationAt: location?.at ?? null,
        }
      : null;
  return {
    svcOrderId: svcOrderId?.svcOrderId ?? null,
    clientOrderId: clientOrderId?.clientOrderId ?? null,
    status: winner?.status ?? null,
    providerStatus: winner?.event.providerStatus ?? null,
    statusAt: winner?.event.occurredAt ?? null,
    trackUrl: latestWith(events, (e) => d(e).trackUrl)?.value ?? null,
    rider,
    eventCount: events.length,
    lastEventAt,
  };
}

/**
 * The details the fold reads from payloads, and the top-level keys each can come from
 * (eventDetails's aliases): a detail comes only from a payload holding at least one key of
 * every group. test/integration/ingest-projection.test.ts checks this against
 * eventDetails, so a new alias there cannot be missed here.
 */
export const DETAIL_SOURCES = {
  riderId: [["rider_id", "sfx_rider_id"]],
  riderName: [["rider_name"]],
  riderContact: [["rider_contact", "rider_contact_number", "virtual_contact_number"]],
  location: [[...LATITUDE_FIELDS], [...LONGITUDE_FIELDS]],
  trackUrl: [["track_url"]],
} as const satisfies Record<string, readonly (readonly string[])[]>;

export type DetailName = keyof typeof DETAIL_SOURCES;
export const DETAIL_NAMES = Object.keys(DETAIL_SOURCES) as DetailName[];

/** Bit of a detail in a `DetailMask` (bit i = DETAIL_NAMES[i]). */
export const detailBit = (name: DetailName): number => 1 << DETAIL_NAMES.indexOf(name);

/** Which details a payload may carry, by its keys alone (a superset of what it does carry). */
export function detailMask(payload: JsonObject): number {
  let mask = 0;
  for (const name of DETAIL_NAMES) {
    const groups: readonly (readonly string[])[] = DETAIL_SOURCES[name];
    if (groups.every((keys) => keys.some((k) => Object.hasOwn(payload, k)))) mask |= detailBit(name);
  }
  return mask;
}

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
export function payloadsNeeded(
  latestFirstEvents: readonly StoredEvent[],
  mask: (e: StoredEvent) => number,
  loaded: (e: StoredEvent) => EventDetails | undefined,
): StoredEvent[] {
  const need = new Set<StoredEvent>();
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
