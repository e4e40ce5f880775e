/**
 * Turns a provider callback body into an event: which order, which kind, which status,
 * when, and its dedupe identity. Pure: the same body always gives the same answer (the
 * time received is only a fallback for a body that carries no time of its own).
 */
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { zonedInstant } from "./time-zones.ts";
import { STEP_TIME_FIELD, canonicalStatus } from "./statuses.ts";

export type EventKind = "status" | "location";
export type JsonObject = Record<string, unknown>;

export interface NormalisedEvent {
  kind: EventKind;
  svcOrderId: string | null;
  clientOrderId: string | null;
  /**
   * The body named its order only by `order_id`, which real payloads use for either id.
   * svcOrderId holds it; the ingest stores it as the client id instead when a known order
   * carries it as its client_order_id (src/events/log.ts). Null in every other case.
   */
  ambiguousId: string | null;
  providerStatus: string | null;
  occurredAt: Date;
  dedupeKey: string;
}

export type RejectReason = "invalid_json" | "missing_order_id";

export type NormaliseResult =
  | { ok: true; event: NormalisedEvent }
  | { ok: false; reason: RejectReason; message: string };

/**
 * Longest order identifier accepted, in characters (code points, as the API and the
 * provider client count the 128 of a place body: an id of 100 emoji placed through the
 * API is 200 UTF-16 units); longer values are not identifiers but garbage.
 */
export const MAX_ID_LENGTH = 128;

/** Code points in `text`, counting no further than just past MAX_ID_LENGTH (a long value costs no more). */
function codePoints(text: string): number {
  if (text.length <= MAX_ID_LENGTH) return text.length;
  if (text.length > MAX_ID_LENGTH * 2) return MAX_ID_LENGTH + 1;
  let n = 0;
  for (const _ of text) if (++n > MAX_ID_LENGTH) break;
  return n;
}
/** Deeper bodies are not callbacks; refusing them also bounds the work of hashing. */
export const MAX_DEPTH = 32;

/** Explicit provider ids, first usable wins. */
const SVC_ID_FIELDS = ["svc_order_id", "sfx_order_id"] as const;
/** Explicit client (merchant) ids, first usable wins. */
const CLIENT_ID_FIELDS = ["client_order_id", "coid"] as const;
/** Either id, depending on the payload (see identify). */
const ORDER_ID_FIELDS = ["order_id"] as const;
const ALL_ID_FIELDS = [...SVC_ID_FIELDS, ...ORDER_ID_FIELDS, ...CLIENT_ID_FIELDS] as const;
const STATUS_FIELDS = ["order_status", "status"] as const;
// New aliases go last: a body that gave a time before still gives the same one.
const TIME_FIELDS = ["event_time", "action_time", "time", "timestamp", "event_timestamp"] as const;
const STEP_TIME_FIELDS = [
  "allot_time",
  "arrival_time",
  "dispatch_time",
  "customer_doorstep_arrival_time",
  "delivery_time",
  "cancel_time",
  "return_time",
] as const;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Where a parsed value holds what jsonb cannot store, or is nested too deep to walk safely. */
export interface Unstorable {
  /** A string or a key holds a NUL or an unpaired UTF-16 surrogate, or a container is nested deeper than MAX_DEPTH. */
  kind: "text" | "key" | "depth";
  /** Keys from the top down to that string, the object holding that key, or that container. */
  path: string[];
}

interface WalkNode {
  value: unknown;
  key: string;
  parent: WalkNode | null;
  /** Containers around this value: its path's length. */
  depth: number;
}

const unstorableText = (s: string) => s.includes("\u0000") || !s.isWellFormed();

function pathOf(node: WalkNode): string[] {
  const path: string[] = [];
  for (let at: WalkNode | null = node; at?.parent; at = at.parent) path.push(at.key);
  return path.reverse();
}

/**
 * The first string or key in a parsed JSON value that PostgreSQL cannot store in jsonb
 * (NUL, unpaired surrogates), or the first container deeper than MAX_DEPTH; null when
 * there is none. Iterative, so hostile nesting cannot blow the stack. The callback
 * receiver and the API's validation both refuse what it finds.
 */
export function findUnstorable(value: unknown): Unstorable | null {
  const stack: WalkNode[] = [{ value, key: "", parent: null, depth: 0 }];
  while (stack.length > 0) {
    const node = stack.pop()!;
    const v = node.value;
    if (typeof v === "string") {
      if (unstorableText(v)) return { kind: "text", path: pathOf(node) };
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (node.depth >= MAX_DEPTH) return { kind: "depth", path: pathOf(node) };
    for (const [key, child] of Object.entries(v)) {
      if (unstorableText(key)) return { kind: "key", path: pathOf(node) };
      stack.push({ value: child, key, parent: node, depth: node.depth + 1 });
    }
  }
  return null;
}

/**
 * The first alias whose value `parse` accepts. A blank or unusable value under one alias
 * does not hide a good value under the next (`{"order_status":" ","status":"DELIVERED"}`
 * is a DELIVERED event).
 */
function firstUsable<T>(body: JsonObject, fields: readonly string[], parse: (raw: unknown) => T | null): T | null {
  for (const f of fields) {
    const value = parse(body[f]);
    if (value !== null) return value;
  }
  return null;
}

const asText = (raw: unknown): string | null => {
  if (typeof raw === "string") return raw.trim() || null;
  if (typeof raw === "number" && Number.isFinite(raw)) return String(raw);
  return null;
};

const asId = (raw: unknown): string | null => {
  if (typeof raw === "string") return raw.trim() || null;
  if (typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 0) return String(raw);
  return null;
};

interface IdField {
  value: string;
  field: string;
}

/**
 * The first usable identifier among `fields` (a blank or unusable value does not hide the
 * next alias), and the first field present with a value that is not an identifier at all.
 */
function readIdField(body: JsonObject, fields: readonly string[]): { id: IdField | null; bad: string | null } {
  let bad: string | null = null;
  for (const field of fields) {
    const raw = body[field];
    const value = asId(raw);
    if (value !== null) return { id: { value, field }, bad };
    if (bad === null && raw !== undefined && raw !== null && !(typeof raw === "string" && raw.trim() === "")) bad = field;
  }
  return { id: null, bad };
}

/**
 * Why the value of id field `field` is no identifier. An integer past 2^53 - 1 is one, but
 * JSON.parse has already rounded it: the message says so rather than ask for an integer.
 */
function unusableIdMessage(field: string, raw: unknown): string {
  if (typeof raw === "number" && Number.isInteger(raw) && raw > Number.MAX_SAFE_INTEGER) {
    return `${field} is an integer larger than ${Number.MAX_SAFE_INTEGER}, which a JSON number cannot carry exactly: send it as a string`;
  }
  return `${field} must be a string or a non-negative integer`;
}

type Identity =
  | { ok: true; svcOrderId: string | null; clientOrderId: string | null; ambiguousId: string | null }
  | { ok: false; message: string };

/**
 * Which order a body names. Explicit fields say which id they hold; `order_id` does not
 * (real payloads use it for the provider's id and for the merchant's), so its role is read
 * from what it sits beside:
 * - beside an explicit client id only: the provider's id when it differs from it (equal,
 *   it adds nothing);
 * - beside an explicit provider id only: the client's id when it differs from it;
 * - beside both: ignored for identity (it stays in the payload);
 * - alone: the provider's id, as it always was read, flagged as `ambiguousId` so the
 *   ingest can store it as the client id of a known order instead.
 * An id in an unusable form (an object, a fraction, an integer beyond 2^53 that JSON.parse
 * has already rounded, or text longer than MAX_ID_LENGTH) is passed over when the other
 * role's id is usable: the event is stored under that one, and the field stays in the
 * payload. (Refusing it would lose the event: the real provider does not retry.) With no
 * usable id at all, the error names the unusable fields. `order_id` counts towards the
 * provider id's role for that, as it always did.
 */
function identify(body: JsonObject): Identity {
  const svc = readIdField(body, SVC_ID_FIELDS);
  const client = readIdField(body, CLIENT_ID_FIELDS);
  const order = readIdField(body, ORDER_ID_FIELDS);
  let svcId = svc.id;
  let clientId = client.id;
  let ambiguous = false;
  const o = order.id;
  if (o !== null) {
    if (svcId === null && clientId === null) {
      svcId = o;
      ambiguous = true;
    } else if (svcId === null) {
      if (o.value !== clientId!.value) svcId = o;
    } else if (clientId === null) {
      if (o.value !== svcId.value) clientId = o;
    }
  }
  const usable = (id: IdField | null) => (id !== null && codePoints(id.value) <= MAX_ID_LENGTH ? id : null);
  const svcUsable = usable(svcId);
  const clientUsable = usable(clientId);
  if (svcUsable === null && clientUsable === null) {
    const messages: string[] = [];
    const check = (id: IdField | null, bad: string | null) => {
      if (id !== null) messages.push(`${id.field} is longer than ${MAX_ID_LENGTH} characters`);
      else if (bad !== null) messages.push(unusableIdMessage(bad, body[bad]));
    };
    check(svcId, svc.bad ?? order.bad);
    check(clientId, client.bad);
    if (messages.length > 0) return { ok: false, message: messages.join("; ") };
  }
  return {
    ok: true,
    svcOrderId: svcUsable?.value ?? null,
    clientOrderId: clientUsable?.value ?? null,
    ambiguousId: ambiguous && svcUsable !== null ? svcUsable.value : null,
  };
}

/** A string or number as text; anything else (objects, booleans) is not a value here. */
function readText(body: JsonObject, fields: readonly string[]): string | null {
  return firstUsable(body, fields, asText);
}

function readNumber(body: JsonObject, fields: readonly string[], min: number, max: number): number | null {
  return firstUsable(body, fields, (raw) => {
    const n = typeof raw === "number" ? raw : typeof raw === "string" && raw.trim() !== "" ? Number(raw) : NaN;
    return Number.isFinite(n) && n >= min && n <= max ? n : null;
  });
}

const EARLIEST = Date.UTC(2000, 0, 1);
const LATEST = Date.UTC(2100, 0, 1);

function realDate(year: number, month: number, day: number): boolean {
  return month >= 1 && month <= 12 && day >= 1 && day <= new Date(Date.UTC(year, month, 0)).getUTCDate();
}

// Compiled once: parseTime runs for every callback.
const EPOCH_TEXT = /^\d+(\.\d+)?$/;
/**
 * ISO 8601 date, optional time (HH:MM, :SS, fraction) and optional zone: Z, UTC, GMT or
 * an offset (+05:30, +0530, +05). Groups: 1-3 date, 4-7 time, 8 named zone, 9-11 offset.
 */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?\s*(?:(Z|UTC|GMT)|([+-])(\d{2})(?::?(\d{2}))?)?)?$/i;

/**
 * Parses the time formats seen in the wild: ISO 8601 with a zone or an offset, the same
 * without one ("2026-11-23 15:35:00", "2026-11-23T15:35:00.250", "2026-11-23"), read as
 * wall-clock time in `timeZone` (an IANA name), and epoch seconds or milliseconds (as
 * numbers or digit strings). Outside 2000-2100 is noise, and so is anything else: text
 * that Date.parse would read in the host's own zone (`2026-11-23 3:35 PM`) is refused
 * rather than read differently on differently configured machines.
 */
export function parseTime(raw: unknown, timeZone = "UTC"): Date | null {
  let ms: number;
  if (typeof raw === "number" && Number.isFinite(raw)) {
    ms = raw > 1e11 ? raw : raw * 1000;
  } else if (typeof raw === "string") {
    const s = raw.trim();
    if (EPOCH_TEXT.test(s)) return parseTime(Number(s));
    const m = DATE_TIME.exec(s);
    if (m === null) return null;
    const year = Number(m[1]);
    const month = Number(m[2]);
    const day = Number(m[3]);
    // Date.UTC rolls impossible dates and times over (Feb 30 -> Mar 2): refuse them instead.
    if (!realDate(year, month, day)) return null;
    const hour = Number(m[4] ?? 0);
    const minute = Number(m[5] ?? 0);
    const second = Number(m[6] ?? 0);
    // Milliseconds: further digits are cut, as Date.parse does.
    const milli = m[7] === undefined ? 0 : Number(m[7].slice(0, 3).padEnd(3, "0"));
    // 24:00 is the end of the day, as ISO 8601 and Date.parse allow; nothing later.
    const endOfDay = hour === 24 && minute === 0 && second === 0 && milli === 0;
    if ((hour > 23 && !endOfDay) || minute > 59 || second > 59) return null;
    const wall = Date.UTC(year, month - 1, day, hour, minute, second, milli);
    if (m[8] !== undefined) {
      ms = wall;
    } else if (m[9] !== undefined) {
      const offsetHours = Number(m[10]);
      const offsetMinutes = Number(m[11] ?? 0);
      if (offsetHours > 23 || offsetMinutes > 59) return null;
      ms = wall - (m[9] === "-" ? -1 : 1) * (offsetHours * 60 + offsetMinutes) * 60_000;
    } else {
      ms = timeZone === "UTC" ? wall : zonedInstant(wall, timeZone);
    }
  } else {
    return null;
  }
  if (!Number.isFinite(ms) || ms < EARLIEST || ms >= LATEST) return null;
  return new Date(Math.round(ms));
}

/** A nested object under `key`, or null when there is none (or it is not an object). */
function nested(body: JsonObject | null, key: string): JsonObject | null {
  const value = body?.[key];
  return isJsonObject(value) ? value : null;
}

/**
 * When the event happened. In order: a generic time field; the step time of the event's
 * status, at the top level, then inside `order_details` (the shape of the provider's
 * order-status answer); then the latest of the top-level step times; else the time
 * received. Only the matching step is read from `order_details`: that object holds every
 * step's time so far, and any other one would date this state by an earlier step. For the
 * same reason the top level's fallback is its latest step: a CANCELLED body carrying
 * `allot_time` and `arrival_time` but no `cancel_time` happened after both, not at the
 * allotment.
 */
function eventTime(body: JsonObject, providerStatus: string | null, receivedAt: Date, timeZone: string): Date {
  for (const f of TIME_FIELDS) {
    const t = parseTime(body[f], timeZone);
    if (t) return t;
  }
  const canonical = canonicalStatus(providerStatus);
  const stepField = canonical ? STEP_TIME_FIELD[canonical] : null;
  if (stepField) {
    const t = parseTime(body[stepField], timeZone) ?? parseTime(nested(body, "order_details")?.[stepField], timeZone);
    if (t) return t;
  }
  let latest: Date | null = null;
  for (const f of STEP_TIME_FIELDS) {
    const t = parseTime(body[f], timeZone);
    if (t && (latest === null || t > latest)) latest = t;
  }
  return latest ?? receivedAt;
}

export const LATITUDE_FIELDS = ["rider_latitude", "latitude"] as const;
export const LONGITUDE_FIELDS = ["rider_longitude", "longitude"] as const;
const NESTED_LATITUDE_FIELDS = ["latitude"] as const;
const NESTED_LONGITUDE_FIELDS = ["longitude"] as const;

/**
 * The rider's position: the top-level coordinates when both are usable, else those of
 * `rider_details.rider_location`. A pair is taken from one place only: a latitude from
 * one and a longitude from the other would be a point nobody reported.
 */
export function coordinates(body: JsonObject): { latitude: number; longitude: number } | null {
  let latitude = readNumber(body, LATITUDE_FIELDS, -90, 90);
  let longitude = readNumber(body, LONGITUDE_FIELDS, -180, 180);
  if (latitude !== null && longitude !== null) return { latitude, longitude };
  const location = nested(nested(body, "rider_details"), "rider_location");
  if (location === null) return null;
  latitude = readNumber(location, NESTED_LATITUDE_FIELDS, -90, 90);
  longitude = readNumber(location, NESTED_LONGITUDE_FIELDS, -180, 180);
  return latitude !== null && longitude !== null ? { latitude, longitude } : null;
}

/** Whether the body carries a usable rider position (top level or `rider_details.rider_location`). */
export function hasCoordinates(body: JsonObject): boolean {
  return coordinates(body) !== null;
}

export interface NormaliseOptions {
  /** `/callbacks/{secret}/location`: always a location event. */
  forceLocation: boolean;
  receivedAt: Date;
  /**
   * IANA zone in which times without a zone or offset are read (PROVIDER_TIMEZONE);
   * "UTC" when left out.
   */
  timeZone?: string;
}

export function normaliseCallback(body: unknown, options: NormaliseOptions): NormaliseResult {
  if (!isJsonObject(body)) return { ok: false, reason: "invalid_json", message: "body must be a JSON object" };
  const unstorable = findUnstorable(body);
  if (unstorable?.kind === "depth") {
    return { ok: false, reason: "invalid_json", message: `body is nested deeper than ${MAX_DEPTH} levels` };
  }
  if (unstorable) {
    return { ok: false, reason: "invalid_json", message: "body contains a NUL character or an unpaired UTF-16 surrogate" };
  }
  const id = identify(body);
  if (!id.ok) return { ok: false, reason: "missing_order_id", message: id.message };
  if (id.svcOrderId === null && id.clientOrderId === null) {
    return {
      ok: false,
      reason: "missing_order_id",
      message: `no order identifier: send one of ${ALL_ID_FIELDS.join(", ")}`,
    };
  }
  const status = readText(body, STATUS_FIELDS);
  const kind: EventKind = options.forceLocation || (status === null && hasCoordinates(body)) ? "location" : "status";
  const providerStatus = kind === "status" ? status : null;
  return {
    ok: true,
    event: {
      kind,
      svcOrderId: id.svcOrderId,
      clientOrderId: id.clientOrderId,
      ambiguousId: id.ambiguousId,
      providerStatus,
      occurredAt: eventTime(body, providerStatus, options.receivedAt, options.timeZone ?? "UTC"),
      dedupeKey: dedupeKey(kind, body),
    },
  };
}

/**
 * The provider sends no event id, so an event is identified by what it says: its kind
 * and the canonical JSON of its body (which holds the order identifiers). Canonical as
 * JSON (key order, `\u0915` or a literal क, number spelling as JSON.parse reads it) and as
 * Unicode: text in NFC, so a body sent again with a name in another normalisation form
 * (a client or proxy that decomposes "é", or composes a Devanagari nukta) is the same event,
 * as it reads the same. ASCII text is unchanged by NFC: keys of such bodies are as before.
 */
export function dedupeKey(kind: EventKind, body: JsonObject): string {
  return sha256Hex(`${kind}\n${canonicalJson(body, { nfc: true })}`);
}

/** Details a payload may carry beyond identity and status, read by the projection. */
export interface EventDetails {
  riderId: string | null;
  riderName: string | null;
  riderContact: string | null;
  latitude: number | null;
  longitude: number | null;
  trackUrl: string | null;
}

const RIDER_ID_FIELDS = ["rider_id", "sfx_rider_id"] as const;
const RIDER_CONTACT_FIELDS = ["rider_contact", "rider_contact_number", "virtual_contact_number", "rider_phone"] as const;
const NESTED_CONTACT_FIELDS = ["rider_contact", "rider_phone"] as const;
const RIDER_NAME_FIELDS = ["rider_name"] as const;
const NESTED_RIDER_ID_FIELDS = ["rider_id"] as const;
const MASKED_CONTACT_FIELDS = ["number", "contact"] as const;
const TRACK_URL_FIELDS = ["track_url"] as const;

/** `masked_rider_contact`: the number itself, or an object holding it as `number` or `contact`. */
function maskedContact(raw: unknown): string | null {
  return isJsonObject(raw) ? readText(raw, MASKED_CONTACT_FIELDS) : asText(raw);
}

/**
 * The details of a payload. Each detail is read from the top level first, then from the
 * nested `rider_details` object (the shape of the provider's order-status answer and of
 * some callbacks), and within each place in the order of its aliases below. Aliases added
 * later come after the older ones, so a stored payload that gave a detail before gives
 * the same one now: re-projecting the log does not change what an order showed.
 * - rider id: rider_id | sfx_rider_id, then rider_details.rider_id;
 * - name: rider_name, then rider_details.rider_name;
 * - contact: rider_contact | rider_contact_number | virtual_contact_number | rider_phone |
 *   masked_rider_contact (text, or {number} | {contact}), then rider_details.rider_contact |
 *   rider_details.rider_phone;
 * - position: see coordinates(). Numbers may be sent as numeric strings anywhere.
 * Every top-level key read here is in DETAIL_SOURCES (src/domain/projection.ts).
 */
export function eventDetails(body: JsonObject): EventDetails {
  const rider = nested(body, "rider_details");
  const position = coordinates(body);
  return {
    riderId: readText(body, RIDER_ID_FIELDS) ?? (rider && readText(rider, NESTED_RIDER_ID_FIELDS)),
    riderName: readText(body, RIDER_NAME_FIELDS) ?? (rider && readText(rider, RIDER_NAME_FIELDS)),
    riderContact:
      readText(body, RIDER_CONTACT_FIELDS) ?? maskedContact(body.masked_rider_contact) ?? (rider && readText(rider, NESTED_CONTACT_FIELDS)),
    latitude: position?.latitude ?? null,
    longitude: position?.longitude ?? null,
    trackUrl: readText(body, TRACK_URL_FIELDS),
  };
}
