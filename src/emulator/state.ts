import { randomInt } from "node:crypto";
import type { PlaceOrderBody } from "../provider/schemas.ts";

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
  /** Set by collect and never cleared: edits are refused from then on. */
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

/** Identifier sources that survive `reset`: nothing is ever issued twice by one emulator. */
export interface IdMinter {
  orderId(): string;
  awbDigits(): string;
  contactNumber(): string;
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

export const MAX_REQUEST_LOG = 10_000;

/**
 * Counters start at a random point so numbers from two emulator runs (e.g. before and
 * after a restart of `npm start`, whose database survives) are very unlikely to meet.
 */
export function createIdMinter(): IdMinter {
  let order = randomInt(100_000_000, 800_000_000);
  let awb = randomInt(1_000_000_000, 8_000_000_000);
  let contact = randomInt(0, 1_000_000_000);
  return {
    orderId: () => String(++order),
    awbDigits: () => String(++awb).padStart(10, "0"),
    contactNumber: () => `08${String(++contact % 1_000_000_000).padStart(9, "0")}`,
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
