import { statusCallback } from "./payloads.ts";
import type { Coordinates } from "./payloads.ts";
import type { EmulatorContext } from "./types.ts";
import type { EmulatorOrder, Rider } from "./state.ts";

/**
 * Order statuses the emulator uses, the state-table rules of provider-api.md §3, and the
 * step-time field of each status (callbacks and the status answer name times by it).
 * Callback payloads themselves are built in payloads.ts.
 */

export const STATUS = {
  created: "CREATED",
  accepted: "ACCEPTED",
  allotted: "ALLOTTED",
  arrived: "ARRIVED",
  collected: "COLLECTED",
  doorstep: "ARRIVED_CUSTOMER_DOORSTEP",
  delivered: "DELIVERED",
  /** Cancel through the API, by any user. */
  cancelled: "CANCELLED",
  /** Stop re-attempt after the rescheduled time (spelled as in provider-api.md §4.2). */
  reattemptCancelled: "Cancelled",
  cancelledByCustomer: "CANCELLED_BY_CUSTOMER",
  /** seller-return: the spec shows no resulting status; RTS_INITIATED is our choice. */
  rtsInitiated: "RTS_INITIATED",
} as const;

/**
 * No sandbox step, cancel or edit moves an order out of these. The spec's "any" rows are
 * read as "any order not yet finished".
 */
const TERMINAL_STATUSES: ReadonlySet<string> = new Set([
  STATUS.delivered,
  STATUS.cancelled,
  STATUS.reattemptCancelled,
  STATUS.cancelledByCustomer,
  STATUS.rtsInitiated,
]);

/**
 * Reaching one of these means the rider has the parcel: the edit window is over
 * (provider-api.md §8) and steps before pickup (allot, rider arrival) are refused.
 */
const PICKED_UP_STATUSES: ReadonlySet<string> = new Set([STATUS.collected, STATUS.doorstep, STATUS.delivered]);

const TIME_FIELD: Record<string, string> = {
  [STATUS.accepted]: "allot_time",
  [STATUS.allotted]: "allot_time",
  [STATUS.arrived]: "arrival_time",
  [STATUS.collected]: "dispatch_time",
  [STATUS.doorstep]: "customer_doorstep_arrival_time",
  [STATUS.delivered]: "delivery_time",
  [STATUS.cancelled]: "cancel_time",
  [STATUS.reattemptCancelled]: "cancel_time",
  [STATUS.cancelledByCustomer]: "cancel_time",
  [STATUS.rtsInitiated]: "return_time",
};

export function isTerminal(order: EmulatorOrder): boolean {
  return TERMINAL_STATUSES.has(order.status);
}

/** A deterministic rider for an id, so callbacks for one rider always agree. */
export function riderFor(riderId: string | number): Rider {
  const id = String(riderId);
  let hash = 0;
  for (const ch of id) hash = (hash * 31 + ch.charCodeAt(0)) % 1_000_000_000;
  return { id, name: `Rider ${id}`, contact: `9${String(hash).padStart(9, "0")}` };
}

/** The field a callback (and the status answer's order_details) puts this status's time in. */
export function stepTimeField(status: string): string {
  return TIME_FIELD[status] ?? "event_time";
}

/** Every step-time field, in lifecycle order: the keys of the status answer's order_details. */
export const STEP_TIME_FIELDS: readonly string[] = [...new Set(Object.values(TIME_FIELD))];

/**
 * Moves an order to `status` at the emulator's now (a picked-up status sets `pickedUp`, for
 * good) and, unless `callback` is false, queues
 * the status callback (sent after the API answer) in the shape behaviour.ts selects.
 */
export function transition(
  ctx: EmulatorContext,
  order: EmulatorOrder,
  status: string,
  {
    extra = {},
    location = null,
    callback = true,
  }: { extra?: Record<string, unknown>; location?: Coordinates | null; callback?: boolean } = {},
): void {
  const at = ctx.clock.now();
  if (PICKED_UP_STATUSES.has(status)) order.pickedUp = true;
  order.status = status;
  order.updatedAt = at;
  order.history.push({ status, at });
  if (!callback) return;
  const payload = statusCallback(ctx, order, { status, at, timeField: stepTimeField(status), extra, location });
  ctx.callbacks.enqueue("status", payload, status);
}

/** The order as control endpoints show it (snake_case, times as ISO strings). */
export function orderView(ctx: EmulatorContext, order: EmulatorOrder): Record<string, unknown> {
  const iso = (t: number) => ctx.clock.iso(t);
  return {
    svc_order_id: order.svcOrderId,
    client_order_id: order.clientOrderId,
    store_code: order.storeCode,
    principal: order.principalId,
    status: order.status,
    track_url: order.trackUrl,
    rider: order.rider,
    picked_up: order.pickedUp,
    virtual_contact_number: order.virtualContactNumber,
    rts_order_id: order.rtsOrderId,
    dispatch_ready: order.dispatchReady
      ? { at: iso(order.dispatchReady.at), shipment_ready_timestamp: order.dispatchReady.shipmentReadyTimestamp }
      : null,
    reattempt: order.reattempt ? { scheduled_at: iso(order.reattempt.scheduledAt), enabled: order.reattempt.enabled } : null,
    cancel: order.cancel ? { reason: order.cancel.reason, user: order.cancel.user, at: iso(order.cancel.at) } : null,
    last_location: order.lastLocation ? { ...order.lastLocation, at: iso(order.lastLocation.at) } : null,
    history: order.history.map((h) => ({ status: h.status, at: iso(h.at) })),
    body: order.body,
    created_at: iso(order.createdAt),
    updated_at: iso(order.updatedAt),
  };
}
