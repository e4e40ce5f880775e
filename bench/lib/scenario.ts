/**
 * The load: callbacks for many orders, shaped like PRODUCT.md §4's real payloads (the
 * emulator's shapes: `sfx_order_id` as a number, `order_status` with its step-time field,
 * rider fields, rider-location bodies with `rider_latitude`/`rider_longitude`/`timestamp`).
 *
 * Event `u` belongs to order `u % orders` and is that order's step `floor(u / orders)`, so
 * an order's events are `orders` requests apart (a real order's callbacks are minutes
 * apart, not back to back). Four steps of each order are statuses (ALLOTTED, ARRIVED,
 * DISPATCHED, then DELIVERED, or CANCELLED for every tenth order); the rest are rider
 * locations, half of them sent to `/location`. Every body is unique (its own time and
 * position), so every event is a real insert; duplicates are added on purpose (see
 * `RequestSequence`).
 */

export interface Scenario {
  /** Distinct orders. */
  orders: number;
  /** Unique events per order. */
  eventsPerOrder: number;
  /** client_order_id prefix, so runs and warm-ups never share orders. */
  prefix: string;
  /** Every `dupEvery`-th request re-sends the previous event (0: no duplicates). */
  dupEvery: number;
  /** Offset of sfx_order_id numbers, also to keep prefixes apart. */
  svcBase: number;
}

export interface ScenarioEvent {
  /** Path after the callback prefix: "" or "/location". */
  path: string;
  body: Record<string, unknown>;
  kind: "status" | "location";
  order: number;
}

const BASE_TIME = Date.UTC(2026, 5, 1, 8, 0, 0);
const STATUS_STEPS = [
  ["ALLOTTED", "allot_time"],
  ["ARRIVED", "arrival_time"],
  ["DISPATCHED", "dispatch_time"],
] as const;

export function totalEvents(s: Scenario): number {
  return s.orders * s.eventsPerOrder;
}

/** Requests needed to send every unique event once, plus the duplicates. */
export function totalRequests(s: Scenario): number {
  const events = totalEvents(s);
  return s.dupEvery > 1 ? events + Math.floor(events / (s.dupEvery - 1)) : events;
}

/** Which step of an order is its i-th status (4 statuses spread over the steps). */
function statusIndex(step: number, steps: number): number | null {
  if (steps < 4) return step; // tiny orders: statuses only
  for (let i = 0; i < 4; i++) if (Math.round((i * (steps - 1)) / 3) === step) return i;
  return null;
}

export function clientOrderId(s: Scenario, order: number): string {
  return `${s.prefix}-${order}`;
}

/** The canonical status every order must end in. */
export function expectedStatus(order: number): string {
  return order % 10 === 0 ? "CANCELLED" : "DELIVERED";
}

export function scenarioEvent(s: Scenario, u: number): ScenarioEvent {
  const order = u % s.orders;
  const step = Math.floor(u / s.orders);
  const at = new Date(BASE_TIME + order * 1000 + step * 60_000).toISOString();
  const rider = 1000 + (order % 500);
  const common = {
    sfx_order_id: s.svcBase + order,
    client_order_id: clientOrderId(s, order),
    rider_id: rider,
    rider_name: `Rider ${rider}`,
    rider_contact: `98${String(rider * 7919).padStart(8, "0")}`,
  };
  const si = statusIndex(step, s.eventsPerOrder);
  if (si !== null) {
    const last = si === 3 || (s.eventsPerOrder < 4 && step === s.eventsPerOrder - 1);
    const [status, timeField] = last
      ? order % 10 === 0
        ? (["CANCELLED", "cancel_time"] as const)
        : (["DELIVERED", "delivery_time"] as const)
      : STATUS_STEPS[Math.min(si, 2)]!;
    return {
      path: "",
      kind: "status",
      order,
      body: {
        ...common,
        store_code: `STORE-${order % 50}`,
        order_status: status,
        track_url: `https://track.example.com/t/${s.svcBase + order}`,
        [timeField]: at,
        ...(status === "CANCELLED" ? { cancel_reason: "customer not reachable" } : {}),
      },
    };
  }
  return {
    path: step % 2 === 0 ? "/location" : "",
    kind: "location",
    order,
    body: {
      ...common,
      rider_latitude: Math.round((12.9 + (order % 100) / 1000 + step / 10_000) * 1e6) / 1e6,
      rider_longitude: Math.round((77.5 + (order % 77) / 1000 + step / 20_000) * 1e6) / 1e6,
      location_accuracy: 5 + (step % 10),
      timestamp: at,
    },
  };
}

/**
 * The order in which requests are sent: unique events in sequence, and every
 * `dupEvery`-th request a copy of the event sent just before it (likely still in flight,
 * so in-batch and cross-batch duplicates both happen).
 */
export class RequestSequence {
  private sent = 0;
  private unique = 0;
  private readonly s: Scenario;
  constructor(s: Scenario) {
    this.s = s;
  }
  /** The next event to send and whether it is a deliberate duplicate; null when done. */
  next(): { u: number; duplicate: boolean } | null {
    const j = this.sent++;
    if (this.s.dupEvery > 1 && j % this.s.dupEvery === this.s.dupEvery - 1 && this.unique > 0) {
      return { u: this.unique - 1, duplicate: true };
    }
    if (this.unique >= totalEvents(this.s)) return null;
    return { u: this.unique++, duplicate: false };
  }
}
