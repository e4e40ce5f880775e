import { randomInt } from "node:crypto";
import { z } from "zod";
import { PlaceOrderBodySchema } from "../provider/schemas.ts";
import type { PlaceOrderBody } from "../provider/schemas.ts";
import { isTimeZone } from "../domain/time-zones.ts";
import { CALLBACK_SHAPES, EDIT_ANSWERS, PLACE_ANSWERS } from "./behaviour.ts";
import type { Behaviour } from "./behaviour.ts";
import { MAX_AHEAD_MS } from "./clock.ts";

/** Who is calling: one per accepted token or OAuth client (ids never contain secrets). */
export interface Principal {
  id: string;
  method: "token" | "oauth";
}

export interface Rider {
  id: string;
  name: string;
  contact: string;
}

export interface EmulatorOrder {
  svcOrderId: string;
  storeCode: string;
  clientOrderId: string;
  principalId: string;
  status: string;
  trackUrl: string;
  /** The place-order body, with edits applied. */
  body: PlaceOrderBody;
  rider: Rider | null;
  /** Set by collect, doorstep arrival or delivery and never cleared: edits, allot and rider arrival are refused from then on. */
  pickedUp: boolean;
  virtualContactNumber: string | null;
  rtsOrderId: string | null;
  dispatchReady: { at: number; shipmentReadyTimestamp: string | number } | null;
  reattempt: { scheduledAt: number; enabled: boolean } | null;
  cancel: { reason: string; user: string; at: number } | null;
  lastLocation: { latitude: number; longitude: number; accuracy: number | null; at: number } | null;
  history: { status: string; at: number }[];
  createdAt: number;
  updatedAt: number;
}

export interface AwbPool {
  /** Issued by pool replenishment but not yet marked used, in issue order. */
  unused: Set<string>;
  used: Set<string>;
}

export interface AwbRequest {
  requestId: string;
  principalId: string;
  count: number;
  requestType: string;
  createdAt: number;
  readyAt: number;
  delaySeconds: number;
  /** Minted on the first poll after readyAt; the same numbers on every later poll. */
  numbers: string[] | null;
}

export interface RequestLogEntry {
  method: string;
  path: string;
  /** null when the emulator never answered (timeout faults). */
  status: number | null;
  at: string;
  duration_ms: number;
  fault?: string;
}

/** The last number each IdMinter source issued. */
export interface IdCounters {
  order: number;
  awb: number;
  contact: number;
}

/** Identifier sources that survive `reset` (and, with a data dir, restarts and crashes): nothing is ever issued twice. */
export interface IdMinter {
  orderId(): string;
  awbDigits(): string;
  contactNumber(): string;
  counters(): IdCounters;
  /**
   * Makes the counters safe against a crash (persist.ts): each first moves past `reserved`,
   * what a run that died may have issued after its last snapshot; from then on, before a
   * number beyond the last reservation goes out, `reserve` must record a new one durably
   * (RESERVE_BLOCK numbers ahead). If it throws, nothing is issued.
   */
  reserveAhead(reserved: IdCounters | undefined, reserve: (ceiling: IdCounters) => void): void;
  /** After a clean stop: the reservation shrinks to what was issued (`reserve` records it). */
  releaseReservation(): void;
}

export interface EmulatorState {
  orders: Map<string, EmulatorOrder>;
  /**
   * `${store_code}\u0000${client_order_id}` -> svc_order_id of the first order placed with it:
   * the uniqueness rule strict mode enforces. With accept_duplicate_orders later ones live only in `orders`.
   */
  orderKeys: Map<string, string>;
  oauthTokens: Map<string, { principalId: string; expiresAt: number }>;
  awbPools: Map<string, AwbPool>;
  awbRequests: Map<string, AwbRequest>;
  callbackUrls: string[];
  requestLog: RequestLogEntry[];
  ids: IdMinter;
}

const MAX_REQUEST_LOG = 10_000;

/**
 * How far ahead of use numbers are reserved: one small synchronous write per this many
 * numbers of a kind (a fresh-AWB batch of 100,000 costs ten), and at most this many skipped
 * after a crash.
 */
export const RESERVE_BLOCK = 10_000;

const ID_KINDS = ["order", "awb", "contact"] as const satisfies readonly (keyof IdCounters)[];

/**
 * Counters start at a random point so numbers from two emulator runs (e.g. before and
 * after a restart of `npm start`, whose database survives) are very unlikely to meet.
 */
function createIdMinter(start?: IdCounters): IdMinter {
  const issued: IdCounters = start
    ? { ...start }
    : { order: randomInt(100_000_000, 800_000_000), awb: randomInt(1_000_000_000, 8_000_000_000), contact: randomInt(0, 1_000_000_000) };
  let guard: { ceiling: IdCounters; reserve: (ceiling: IdCounters) => void } | null = null;

  function next(kind: keyof IdCounters): number {
    const value = issued[kind] + 1;
    if (guard && value > guard.ceiling[kind]) {
      const ceiling = { ...guard.ceiling, [kind]: value + RESERVE_BLOCK - 1 };
      guard.reserve(ceiling);
      guard.ceiling = ceiling;
    }
    issued[kind] = value;
    return value;
  }

  return {
    orderId: () => String(next("order")),
    awbDigits: () => String(next("awb")).padStart(10, "0"),
    contactNumber: () => `08${String(next("contact") % 1_000_000_000).padStart(9, "0")}`,
    counters: () => ({ ...issued }),
    reserveAhead(reserved, reserve) {
      if (reserved) for (const kind of ID_KINDS) issued[kind] = Math.max(issued[kind], reserved[kind]);
      guard = { ceiling: { ...issued }, reserve };
    },
    releaseReservation() {
      const current = guard;
      if (!current || ID_KINDS.every((kind) => current.ceiling[kind] === issued[kind])) return;
      current.reserve({ ...issued });
      current.ceiling = { ...issued };
    },
  };
}

export function createState(callbackUrls: string[] = []): EmulatorState {
  return {
    orders: new Map(),
    orderKeys: new Map(),
    oauthTokens: new Map(),
    awbPools: new Map(),
    awbRequests: new Map(),
    callbackUrls: [...callbackUrls],
    requestLog: [],
    ids: createIdMinter(),
  };
}

/** Forgets orders, tokens, AWBs and logs; keeps callback URLs (a registration, like config) and the id counters. */
export function resetState(state: EmulatorState): void {
  state.orders.clear();
  state.orderKeys.clear();
  state.oauthTokens.clear();
  state.awbPools.clear();
  state.awbRequests.clear();
  state.requestLog.length = 0;
}

export function orderKey(storeCode: string, clientOrderId: string): string {
  return `${storeCode}\u0000${clientOrderId}`;
}

export function appendRequestLog(state: EmulatorState, entry: RequestLogEntry): void {
  state.requestLog.push(entry);
  if (state.requestLog.length > MAX_REQUEST_LOG) state.requestLog.splice(0, state.requestLog.length - MAX_REQUEST_LOG);
}

// ---------------------------------------------------------------- saved state (persist.ts writes it)

/**
 * What survives a restart when the emulator has a data dir: orders (and the keys that
 * enforce client_order_id uniqueness), AWB pools and fresh requests, the id counters,
 * callback URLs, behaviour switches and the clock offset (saved times are on the
 * emulator's clock). Not saved: OAuth tokens (clients ask again after a 401), the request
 * and delivery logs, queued callbacks and fault rules. Bump SNAPSHOT_VERSION when the
 * shape changes incompatibly: an older file then fails to parse and is set aside.
 */
const SNAPSHOT_VERSION = 1;

const counter = z.number().int().nonnegative();
/**
 * Inside Date's range (±8.64e15 ms) by a day, room for a zone's shift (callback_timezone):
 * a time outside it cannot be written, and would fail every request that writes it. The
 * emulator makes none (its clock and re-attempts stay within 100 years of now, an absolute
 * re-attempt time has a four-digit year), so a file holding one is not read.
 */
const TIME_LIMIT_MS = 8.64e15 - 86_400_000;
const time = z.number().min(-TIME_LIMIT_MS).max(TIME_LIMIT_MS);

const BehaviourSchema = z.strictObject({
  accept_duplicate_orders: z.boolean(),
  place_answer: z.enum(PLACE_ANSWERS),
  // Absent from files saved before the switch existed: those read as the spec's answer.
  edit_answer: z.enum(EDIT_ANSWERS).default("spec"),
  callback_shape: z.enum(CALLBACK_SHAPES),
  callback_timezone: z.string().refine(isTimeZone, { error: "unknown time zone" }).nullable(),
  status_endpoint: z.boolean(),
  // Likewise: files saved before it existed read as retrying, as the emulator then did.
  callback_retries: z.boolean().default(true),
}) satisfies z.ZodType<Behaviour>;

const OrderSchema = z.object({
  svcOrderId: z.string().min(1),
  storeCode: z.string(),
  clientOrderId: z.string(),
  principalId: z.string(),
  status: z.string(),
  trackUrl: z.string(),
  body: PlaceOrderBodySchema,
  rider: z.object({ id: z.string(), name: z.string(), contact: z.string() }).nullable(),
  pickedUp: z.boolean(),
  virtualContactNumber: z.string().nullable(),
  rtsOrderId: z.string().nullable(),
  dispatchReady: z.object({ at: time, shipmentReadyTimestamp: z.union([z.string(), z.number()]) }).nullable(),
  reattempt: z.object({ scheduledAt: time, enabled: z.boolean() }).nullable(),
  cancel: z.object({ reason: z.string(), user: z.string(), at: time }).nullable(),
  lastLocation: z.object({ latitude: z.number(), longitude: z.number(), accuracy: z.number().nullable(), at: time }).nullable(),
  history: z.array(z.object({ status: z.string(), at: time })),
  createdAt: time,
  updatedAt: time,
}) satisfies z.ZodType<EmulatorOrder>;

const AwbRequestSchema = z.object({
  requestId: z.string().min(1),
  principalId: z.string(),
  count: counter,
  requestType: z.string(),
  createdAt: time,
  readyAt: time,
  delaySeconds: z.number().nonnegative(),
  numbers: z.array(z.string()).nullable(),
}) satisfies z.ZodType<AwbRequest>;

const EmulatorSnapshotSchema = z.object({
  version: z.literal(SNAPSHOT_VERSION),
  savedAt: z.string(),
  ids: z.object({ order: counter, awb: counter, contact: counter }),
  orders: z.array(OrderSchema),
  /** [orderKey(store_code, client_order_id), svc_order_id] */
  orderKeys: z.array(z.tuple([z.string(), z.string()])),
  awbPools: z.record(z.string(), z.object({ unused: z.array(z.string()), used: z.array(z.string()) })),
  awbRequests: z.array(AwbRequestSchema),
  callbackUrls: z.array(z.string()),
  behaviour: BehaviourSchema,
  /** The start values in force when saved: a restart with other start options uses those instead. */
  startBehaviour: BehaviourSchema,
  clockOffsetMs: z.number().nonnegative().max(MAX_AHEAD_MS),
});
/** As written; reading it back through the schema normalises numeric strings in order bodies. */
export type EmulatorSnapshot = z.input<typeof EmulatorSnapshotSchema>;

/** What is saved beside EmulatorState: owned by other modules, passed in and handed back. */
export interface SavedExtras {
  behaviour: Behaviour;
  startBehaviour: Behaviour;
  clockOffsetMs: number;
}

/**
 * A JSON-ready view of the state. Orders and AWB requests are the live objects (copying
 * them all on every save would double its cost): stringify it before the state moves on.
 */
export function serialiseState(state: EmulatorState, extras: SavedExtras, savedAt: Date = new Date()): EmulatorSnapshot {
  return {
    version: SNAPSHOT_VERSION,
    savedAt: savedAt.toISOString(),
    ids: state.ids.counters(),
    orders: [...state.orders.values()],
    orderKeys: [...state.orderKeys],
    awbPools: Object.fromEntries([...state.awbPools].map(([id, p]) => [id, { unused: [...p.unused], used: [...p.used] }])),
    awbRequests: [...state.awbRequests.values()],
    callbackUrls: [...state.callbackUrls],
    behaviour: { ...extras.behaviour },
    startBehaviour: { ...extras.startBehaviour },
    clockOffsetMs: extras.clockOffsetMs,
  };
}

export type DeserialiseResult = { ok: true; state: EmulatorState; extras: SavedExtras } | { ok: false; error: string };

/** Validates what was read back from disk and rebuilds the state from it. */
export function deserialiseState(input: unknown): DeserialiseResult {
  const parsed = EmulatorSnapshotSchema.safeParse(input);
  if (!parsed.success) {
    const first = parsed.error.issues.slice(0, 3).map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
    return { ok: false, error: first.join("; ") };
  }
  const s = parsed.data;
  const orders = new Map(s.orders.map((o) => [o.svcOrderId, o]));
  // A key naming an order the file does not hold would refuse a place with a dangling id.
  const orderKeys = new Map(s.orderKeys.filter(([, id]) => orders.has(id)));
  return {
    ok: true,
    state: {
      orders,
      orderKeys,
      oauthTokens: new Map(),
      awbPools: new Map(Object.entries(s.awbPools).map(([id, p]) => [id, { unused: new Set(p.unused), used: new Set(p.used) }])),
      awbRequests: new Map(s.awbRequests.map((r) => [r.requestId, r])),
      callbackUrls: s.callbackUrls,
      requestLog: [],
      ids: createIdMinter(s.ids),
    },
    extras: { behaviour: s.behaviour, startBehaviour: s.startBehaviour, clockOffsetMs: s.clockOffsetMs },
  };
}
