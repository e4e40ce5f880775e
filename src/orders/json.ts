/**
 * An order as the API and the notifications show it (GET /v1/orders/{order}): one shape,
 * built from the row in one place.
 */
import { isoOrNull } from "../domain/iso-time.ts";
import { canonicalStatus } from "../domain/statuses.ts";
import type { CanonicalStatus } from "../domain/statuses.ts";
import type { OrderRow } from "./read.ts";

export const PLACEMENT_STATES = ["pending", "placed", "unconfirmed", "failed", "external"] as const;
export type PlacementState = (typeof PLACEMENT_STATES)[number];

export interface RiderJson {
  id: string | null;
  name: string | null;
  contact: string | null;
  latitude: number | null;
  longitude: number | null;
  location_at: string | null;
}

export interface OrderJson {
  client_order_id: string | null;
  svc_order_id: string | null;
  store_code: string | null;
  status: CanonicalStatus | null;
  provider_status: string | null;
  status_at: string | null;
  track_url: string | null;
  awb_number: string | null;
  pickup_otp: string | null;
  rider: RiderJson | null;
  svc_order_ids: string[];
  placement: { state: PlacementState; error: string | null };
  event_count: number;
  last_event_at: string | null;
  created_at: string;
  updated_at: string;
}

/** The columns orderJson reads (what the projection's write returns, so its messages need no second read). */
export const ORDER_JSON_COLUMNS = [
  "id", "client_order_id", "svc_order_id", "store_code", "status", "provider_status", "status_at", "track_url", "awb_number",
  "pickup_otp", "rider_id", "rider_name", "rider_contact", "rider_latitude", "rider_longitude", "rider_location_at",
  "svc_order_ids", "placement_state", "placement_error", "event_count", "last_event_at", "created_at", "updated_at",
] as const satisfies readonly (keyof OrderRow)[];
export type OrderJsonRow = Pick<OrderRow, (typeof ORDER_JSON_COLUMNS)[number]>;

const isPlacementState = (s: string): s is PlacementState => (PLACEMENT_STATES as readonly string[]).includes(s);

export function orderJson(row: OrderJsonRow): OrderJson {
  const hasRider = row.rider_id !== null || row.rider_name !== null || row.rider_contact !== null || row.rider_latitude !== null;
  return {
    client_order_id: row.client_order_id,
    svc_order_id: row.svc_order_id,
    store_code: row.store_code,
    status: canonicalStatus(row.status),
    provider_status: row.provider_status,
    status_at: isoOrNull(row.status_at),
    track_url: row.track_url,
    awb_number: row.awb_number,
    pickup_otp: row.pickup_otp,
    rider: hasRider
      ? {
          id: row.rider_id,
          name: row.rider_name,
          contact: row.rider_contact,
          latitude: row.rider_latitude,
          longitude: row.rider_longitude,
          location_at: isoOrNull(row.rider_location_at),
        }
      : null,
    svc_order_ids: row.svc_order_ids.length > 0 ? row.svc_order_ids : row.svc_order_id === null ? [] : [row.svc_order_id],
    placement: { state: isPlacementState(row.placement_state) ? row.placement_state : "external", error: row.placement_error },
    event_count: row.event_count,
    last_event_at: isoOrNull(row.last_event_at),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
