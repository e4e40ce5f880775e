import { bigint, doublePrecision, index, integer, pgTable, text, timestamp, uniqueIndex, sql } from "../drizzle.ts";

/**
 * One row per order. Status, rider and event columns are a projection of order_events
 * (rebuildable at any time); placement columns and pickup data come from the place
 * command. An order may first be known by only one of its two identifiers; the
 * projection merges rows when an event links both.
 */
export const orders = pgTable(
  "orders",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    clientOrderId: text(),
    svcOrderId: text(),
    storeCode: text(),
    status: text(),
    providerStatus: text(),
    statusAt: timestamp({ withTimezone: true }),
    trackUrl: text(),
    awbNumber: text(),
    pickupOtp: text(),
    riderId: text(),
    riderName: text(),
    riderContact: text(),
    riderLatitude: doublePrecision(),
    riderLongitude: doublePrecision(),
    riderLocationAt: timestamp({ withTimezone: true }),
    /**
     * pending | placed | unconfirmed | failed (placed through tracklane) or external (seen
     * only in callbacks). unconfirmed: the provider may have created the order but its
     * answer was lost; a callback naming both ids or a confirmation by hand makes it placed.
     */
    placementState: text().notNull().default("external"),
    placementError: text(),
    eventCount: integer().notNull().default(0),
    lastEventAt: timestamp({ withTimezone: true }),
    /**
     * The fold of the order's merged events (src/domain/projection.ts FoldState, compact
     * JSON text as src/projection/state.ts writes it): each winner with what decides its
     * ties, so a new event is merged without re-reading the order's history. Null until
     * the projection has derived it from the log (rows placed through tracklane, rows
     * from before it).
     */
    projectionState: text(),
    /**
     * Every provider id seen for this order, sorted. More than one means the provider
     * created a second order for the same client_order_id: both stay visible.
     */
    svcOrderIds: text().array().notNull().default(sql`'{}'::text[]`),
    /** When the reconciliation job last asked the provider for this order's status. */
    reconciledAt: timestamp({ withTimezone: true }),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // Serve GET /v1/orders/{client_order_id} and the projection's lookups.
    uniqueIndex("orders_client_order_id_idx").on(t.clientOrderId),
    uniqueIndex("orders_svc_order_id_idx").on(t.svcOrderId),
    // The list is newest first by id (keyset cursor on id); these serve its filters.
    index("orders_status_idx").on(t.status, t.id.desc()),
    index("orders_store_code_idx").on(t.storeCode, t.id.desc()).where(sql`${t.storeCode} is not null`),
    index("orders_updated_at_idx").on(t.updatedAt),
    // Serves GET /v1/orders?placement= for the states that need a person, and the placement
    // gauge. Only those few rows are in it: order rows are rewritten at every event (no HOT
    // update while updated_at is indexed), and each index they are in costs every write.
    index("orders_placement_attention_idx")
      .on(t.placementState, t.id.desc().nullsFirst())
      .where(sql`${t.placementState} in ('pending', 'unconfirmed', 'failed')`),
  ],
);
