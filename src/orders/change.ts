/**
 * What a write did to an order (OrderChange), as the orders table's owner reports it to
 * the projection and to the notifications' outbox.
 */
import type { OrderJsonRow } from "./json.ts";
import type { OrderRow } from "./read.ts";

/** The columns an OrderChange compares, as a row was before a write. */
export type OrderSnapshot = Pick<OrderRow, "status" | "placement_state" | "rider_id" | "rider_location_at" | "svc_order_ids">;

/** How a row that did not exist looks "before" its first write. */
export const NEW_ORDER: OrderSnapshot = { status: null, placement_state: "external", rider_id: null, rider_location_at: null, svc_order_ids: [] };

export interface Change<T> {
  before: T;
  after: T;
}

/** What one write did to one order: each field before and after (equal when it did not move). */
export interface OrderChange {
  orderId: number;
  /** The row was inserted by this transaction. */
  created: boolean;
  status: Change<string | null>;
  placement: Change<string>;
  riderId: Change<string | null>;
  /** When the rider's latest location was taken. */
  locationAt: Change<Date | null>;
  svcOrderIds: Change<string[]>;
  /** The row as written, when the writer returned it (the projection's write does): what its messages show. */
  row?: OrderJsonRow | undefined;
}
