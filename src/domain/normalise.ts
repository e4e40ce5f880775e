/**
 * Turns a provider callback body into an event: which order, which kind, which status,
 * when, and its dedupe identity. Pure: the same body always gives the same answer (the
 * time received is only a fallback for a body that carries no time of its own).
 */
import { canonicalJson, sha256Hex } from "./canonical-json.ts";
import { STEP_TIME_FIELD, canonicalStatus } from "./statuses.ts";

export type EventKind = "status" | "location";
export type JsonObject = Record<string, unknown>;

export interface NormalisedEvent {
  kind: EventKind;
  svcOrderId: string | null;
  clientOrderId: string | null;
  providerStatus: string | null;
  occurredAt: Date;
  dedupeKey: string;
}

export type RejectReason = "invalid_json" | "missing_order_id";

export type NormaliseResult =
  | { ok: true; event: NormalisedEvent }
  | { ok: false; reason: RejectReason; message: string };

/** Longest order identifier accepted; longer values are not identifiers but garbage. */
export const MAX_ID_LENGTH = 128;
/** Deeper bodies are not callbacks; refusing them also bounds the work of hashing. */
export const MAX_DEPTH = 32;

const SVC_ID_FIELDS = ["svc_order_id", "sfx_order_id", "order_id"] as const;
const CLIENT_ID_FIELDS = ["client_order_id", "coid"] as const;
const STATUS_FIELDS = ["order_status", "status"] as const;
const TIME_FIELDS = ["event_time", "action_time", "time", "timestamp"] as const;
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

/**
 * Walks a parsed body without recursion (hostile bodies cannot blow the stack) and
 * reports its nesting depth, and whether any key or string holds text that PostgreSQL
 * cannot store in jsonb (NUL, unpaired surrogates).
 */
export function inspectJson(value: unknown): { depth: number; unstorable: boolean } {
  let depth = 0;
  let unstorable = false;
  const bad = (s: string) => s.includes("\u0000") || !s.isWellFormed();
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (typeof v === "string") {
      if (bad(v)) unstorable = true;
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (d > depth) depth = d;
    if (d > MAX_DEPTH) break;
    for (const [k, child] of Object.entries(v)) {
      if (bad(k)) unstorable = true;
      stack.push([child, d + 1]);
    }
  }
  return { depth, unstorable };
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

type IdResult = { ok: true; value: string | null } | { ok: false; message: string };

const asId = (raw: unknown): string | null => {
  if (typeof raw === "string") return raw.trim() || null;
  if (typeof raw === "number" && Number.isSafeInteger(raw) && raw >= 0) return String(raw);
  return null;
};

/**
 * An order identifier from the first usable alias. A value present but unusable under
 * every alias (an object, a float, 200 characters) is an error naming the field, not
 * silently "no identifier".
 */
function readId(body: JsonObject, fields: readonly string[]): IdResult {
  const value = firstUsable(body, fields, asId);
  if (value !== null) {
    const field = fields.find((f) => asId(body[f]) === value)!;
    if (value.length > MAX_ID_LENGTH) return { ok: false, message: `${field} is longer than ${MAX_ID_LENGTH} characters` };
    return { ok: true, value };
  }
  const bad = fields.find((f) => body[f] !== undefined && body[f] !== null && !(typeof body[f] === "string" && body[f].trim() === ""));
  if (bad !== undefined) return { ok: false, message: `${bad} must be a string or a non-negative integer` };
  return { ok: true, value: null };
}

/** A string or number as text; anything else (objects, booleans) is not a value here. */
export function readText(body: JsonObject, fields: readonly string[]): string | null {
  return firstUsable(body, fields, asText);
}

export function readNumber(body: JsonObject, fields: readonly string[], min: number, max: number): number | null {
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

/**
 * Parses the time formats seen in the wild: ISO 8601, "YYYY-MM-DD HH:MM:SS" (read as UTC
 * when it has no zone), and epoch seconds or milliseconds. Outside 2000-2100 is noise.
 */
export function parseTime(raw: unknown): Date | null {
  let ms: number;
  if (typeof raw === "number" && Number.isFinite(raw)) {
    ms = raw > 1e11 ? raw : raw * 1000;
  } else if (typeof raw === "string") {
    const s = raw.trim();
    if (/^\d+(\.\d+)?$/.test(s)) return parseTime(Number(s));
    const isoLike = s.replace(/^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(:\d{2}(\.\d+)?)?)$/, "$1T$2Z");
    const date = /^(\d{4})-(\d{2})-(\d{2})/.exec(isoLike);
    // Date.parse rolls impossible dates over (Feb 30 -> Mar 2): refuse them instead.
    if (!date || !realDate(Number(date[1]), Number(date[2]), Number(date[3]))) return null;
    ms = Date.parse(isoLike);
  } else {
    return null;
  }
  if (!Number.isFinite(ms) || ms < EARLIEST || ms >= LATEST) return null;
  return new Date(Math.round(ms));
}

function eventTime(body: JsonObject, providerStatus: string | null, receivedAt: Date): Date {
  for (const f of TIME_FIELDS) {
    const t = parseTime(body[f]);
    if (t) return t;
  }
  const canonical = canonicalStatus(providerStatus);
  const stepField = canonical ? STEP_TIME_FIELD[canonical] : null;
  if (stepField) {
    const t = parseTime(body[stepField]);
    if (t) return t;
  }
  for (const f of STEP_TIME_FIELDS) {
    const t = parseTime(body[f]);
    if (t) return t;
  }
  return receivedAt;
}

export const LATITUDE_FIELDS = ["rider_latitude", "latitude"] as const;
export const LONGITUDE_FIELDS = ["rider_longitude", "longitude"] as const;

export function hasCoordinates(body: JsonObject): boolean {
  return readNumber(body, LATITUDE_FIELDS, -90, 90) !== null && readNumber(body, LONGITUDE_FIELDS, -180, 180) !== null;
}

export interface NormaliseOptions {
  /** `/callbacks/{secret}/location`: always a location event. */
  forceLocation: boolean;
  receivedAt: Date;
}

export function normaliseCallback(body: unknown, options: NormaliseOptions): NormaliseResult {
  if (!isJsonObject(body)) return { ok: false, reason: "invalid_json", message: "body must be a JSON object" };
  const shape = inspectJson(body);
  if (shape.depth > MAX_DEPTH) {
    return { ok: false, reason: "invalid_json", message: `body is nested deeper than ${MAX_DEPTH} levels` };
  }
  if (shape.unstorable) {
    return { ok: false, reason: "invalid_json", message: "body contains a NUL character or an unpaired UTF-16 surrogate" };
  }
  const svc = readId(body, SVC_ID_FIELDS);
  const client = readId(body, CLIENT_ID_FIELDS);
  if (!svc.ok || !client.ok) {
    const messages = [svc, client].flatMap((r) => (r.ok ? [] : [r.message]));
    return { ok: false, reason: "missing_order_id", message: messages.join("; ") };
  }
  if (svc.value === null && client.value === null) {
    return {
      ok: false,
      reason: "missing_order_id",
      message: `no order identifier: send one of ${[...SVC_ID_FIELDS, ...CLIENT_ID_FIELDS].join(", ")}`,
    };
  }
  const status = readText(body, STATUS_FIELDS);
  const kind: EventKind = options.forceLocation || (status === null && hasCoordinates(body)) ? "location" : "status";
  const providerStatus = kind === "status" ? status : null;
  return {
    ok: true,
    event: {
      kind,
      svcOrderId: svc.value,
      clientOrderId: client.value,
      providerStatus,
      occurredAt: eventTime(body, providerStatus, options.receivedAt),
      dedupeKey: dedupeKey(kind, body),
    },
  };
}

/**
 * The provider sends no event id, so an event is identified by what it says: its kind
 * and the canonical JSON of its body (which holds the order identifiers).
 */
export function dedupeKey(kind: EventKind, body: JsonObject): string {
  return sha256Hex(`${kind}\n${canonicalJson(body)}`);
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

export function eventDetails(body: JsonObject): EventDetails {
  const latitude = readNumber(body, LATITUDE_FIELDS, -90, 90);
  const longitude = readNumber(body, LONGITUDE_FIELDS, -180, 180);
  const located = latitude !== null && longitude !== null;
  return {
    riderId: readText(body, ["rider_id", "sfx_rider_id"]),
    riderName: readText(body, ["rider_name"]),
    riderContact: readText(body, ["rider_contact", "rider_contact_number", "virtual_contact_number"]),
    latitude: located ? latitude : null,
    longitude: located ? longitude : null,
    trackUrl: readText(body, ["track_url"]),
  };
}
