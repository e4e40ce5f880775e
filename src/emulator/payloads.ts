import { providerTime } from "./behaviour.ts";
import type { EmulatorOrder } from "./state.ts";
import type { EmulatorContext } from "./types.ts";

/**
 * Callback payloads in the layout `behaviour.callback_shape` selects, built when the event
 * happens. spec: flat, as PRODUCT.md §4 shows (`sfx_order_id` as a number, `order_status`,
 * rider fields at the top, one step-time field). nested: the same ids and status with the
 * rider under `rider_details` and coordinates as strings. unified: one `order_id` whose
 * meaning differs by kind (the client's id in status callbacks, the provider's beside
 * `client_order_id` in location callbacks), as the real provider is reported to send.
 * sparse: the leanest layouts reported (PRODUCT.md §10): the provider's id alone as
 * `order_id`, the rider's fields at the top with `rider_phone`, string coordinates, the
 * masked number as `masked_rider_contact.contact`, the time as `event_timestamp`.
 */

export interface Coordinates {
  latitude: number;
  longitude: number;
  accuracy: number | null;
}

/** A status change as lifecycle.ts reports it. */
export interface StatusEvent {
  status: string;
  at: number;
  /** The step-time field of this status (allot_time, …). */
  timeField: string;
  /** Step-specific fields (cancel reason, virtual contact number, …): spec and nested carry them, unified and sparse only their own. */
  extra: Record<string, unknown>;
  /** Where the rider was at this step, if the step says (doorstep arrival). */
  location: Coordinates | null;
}

function riderId(order: EmulatorOrder): string | number | null {
  if (!order.rider) return null;
  return /^\d+$/.test(order.rider.id) ? Number(order.rider.id) : order.rider.id;
}

function flatRider(order: EmulatorOrder): Record<string, unknown> {
  if (!order.rider) return {};
  return { rider_id: riderId(order), rider_name: order.rider.name, rider_contact: order.rider.contact };
}

/** `rider_details` of nested and unified payloads and of the status answer; undefined before a rider exists. */
export function riderDetails(order: EmulatorOrder, location: Coordinates | null): Record<string, unknown> | undefined {
  if (!order.rider) return undefined;
  return {
    rider_id: riderId(order),
    rider_name: order.rider.name,
    rider_phone: order.rider.contact,
    ...(location ? { rider_location: { latitude: String(location.latitude), longitude: String(location.longitude) } } : {}),
  };
}

function withRider(order: EmulatorOrder, location: Coordinates | null): Record<string, unknown> {
  const details = riderDetails(order, location);
  return details ? { rider_details: details } : {};
}

export function statusCallback(ctx: EmulatorContext, order: EmulatorOrder, event: StatusEvent): Record<string, unknown> {
  const { status, timeField, extra, location: stepLocation } = event;
  const time = providerTime(ctx.behaviour, event.at);
  const location = stepLocation ?? order.lastLocation;
  switch (ctx.behaviour.callback_shape) {
    case "spec":
      return {
        sfx_order_id: Number(order.svcOrderId),
        client_order_id: order.clientOrderId,
        store_code: order.storeCode,
        order_status: status,
        ...flatRider(order),
        track_url: order.trackUrl,
        [timeField]: time,
        ...(stepLocation
          ? {
              rider_latitude: stepLocation.latitude,
              rider_longitude: stepLocation.longitude,
              ...(stepLocation.accuracy === null ? {} : { location_accuracy: stepLocation.accuracy }),
            }
          : {}),
        ...extra,
      };
    case "nested":
      return {
        sfx_order_id: Number(order.svcOrderId),
        client_order_id: order.clientOrderId,
        store_code: order.storeCode,
        order_status: status,
        track_url: order.trackUrl,
        ...withRider(order, location),
        [timeField]: time,
        ...extra,
      };
    case "unified": {
      // The masked number is the virtual one once collect issued it, else the rider's own.
      const contact = order.virtualContactNumber ?? order.rider?.contact;
      return {
        order_id: order.clientOrderId,
        status,
        event_timestamp: time,
        ...withRider(order, location),
        ...(order.rider && contact ? { masked_rider_contact: { number: contact } } : {}),
        track_url: order.trackUrl,
      };
    }
    case "sparse": {
      const contact = order.virtualContactNumber ?? order.rider?.contact;
      return {
        order_id: order.svcOrderId,
        status,
        event_timestamp: time,
        ...(order.rider ? { rider_id: riderId(order), rider_name: order.rider.name } : {}),
        ...(order.rider && contact ? { masked_rider_contact: { contact } } : {}),
        ...(stepLocation ? stringCoordinates(stepLocation) : {}),
      };
    }
  }
}

/** `rider_latitude` / `rider_longitude` as numeric strings, as some real payloads carry them. */
function stringCoordinates(at: Coordinates): Record<string, string> {
  return { rider_latitude: String(at.latitude), rider_longitude: String(at.longitude) };
}

/** Sent on a rider-location update; there is always a rider and a location by then. */
export function locationCallback(ctx: EmulatorContext, order: EmulatorOrder, at: number): Record<string, unknown> {
  const time = providerTime(ctx.behaviour, at);
  const loc = order.lastLocation;
  switch (ctx.behaviour.callback_shape) {
    case "spec":
      return {
        sfx_order_id: Number(order.svcOrderId),
        client_order_id: order.clientOrderId,
        ...flatRider(order),
        rider_latitude: loc?.latitude ?? null,
        rider_longitude: loc?.longitude ?? null,
        location_accuracy: loc?.accuracy ?? null,
        timestamp: time,
      };
    case "nested":
      return {
        sfx_order_id: Number(order.svcOrderId),
        client_order_id: order.clientOrderId,
        ...withRider(order, loc),
        event_timestamp: time,
      };
    case "unified":
      return {
        order_id: order.svcOrderId,
        client_order_id: order.clientOrderId,
        ...withRider(order, loc),
        event_timestamp: time,
      };
    case "sparse":
      return {
        order_id: order.svcOrderId,
        ...(order.rider ? { rider_id: riderId(order), rider_phone: order.rider.contact } : {}),
        ...(loc ? stringCoordinates(loc) : {}),
        event_timestamp: time,
      };
  }
}
