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
    client_order_id: text(),
    svc_order_id: text(),
    store_code: text(),
    status: text(),
    provider_status: text(),
    status_at: timestamp({ withTimezone: true }),
    /**
     * When tracklane recorded that the order finished (its own clock, the projection's
     * write that first made the status terminal); null while it has not. Personal data is
     * kept PII_RETENTION_DAYS from this, not from status_at: that is the provider's time,
     * which a clock far off or a late callback would make too early or never.
     */
    finished_at: timestamp({ withTimezone: true }),
    track_url: text(),
    awb_number: text(),
    pickup_otp: text(),
    rider_id: text(),
    rider_name: text(),
    rider_contact: text(),
    rider_latitude: doublePrecision(),
    rider_longitude: doublePrecision(),
    rider_location_at: timestamp({ withTimezone: true }),
    /**
     * pending | placed | unconfirmed | failed (placed through tracklane) or external (seen
     * only in callbacks). unconfirmed: the provider may have created the order but its
     * answer was lost; a callback naming both ids or a confirmation by hand makes it placed.
     */
    placement_state: text().notNull().default("external"),
    placement_error: text(),
    event_count: integer().notNull().default(0),
    last_event_at: timestamp({ withTimezone: true }),
    /**
     * The fold of the order's merged events (src/domain/projection.ts FoldState, compact
     * JSON text as src/projection/state.ts writes it): each winner with what decides its
     * ties, so a new event is merged without re-reading the order's history. Null until
     * the projection has derived it from the log (rows placed through tracklane, rows
     * from before it).
     */
    projection_state: text(),
    /**
     * Every provider id seen for this order, sorted. More than one means the provider
     * created a second order for the same client_order_id: both stay visible.
     */
    svc_order_ids: text().array().notNull().default(sql`'{}'::text[]`),
    /** When the reconciliation job last asked the provider for this order's status. */
    reconciled_at: timestamp({ withTimezone: true }),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updated_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    /**
     * When the order's personal data was redacted (PII_RETENTION_DAYS after it finished);
     * null: not yet, or due again (a projection write that added events to it).
     */
    redacted_at: timestamp({ withTimezone: true }),
    /**
     * updated_at to the hour (UTC), for `?updated_after=`. Indexed instead of updated_at:
     * within an hour an order's writes leave it as it is, so they can be HOT updates (no
     * new index entries), which a column that changes on every write would prevent.
     */
    updated_hour: timestamp({ withTimezone: false })
      .notNull()
      .generatedAlwaysAs(sql`date_trunc('hour', updated_at at time zone 'UTC')`),
  },
  (t) => [
    // Serve GET /v1/orders/{client_order_id} and the projection's lookups.
    uniqueIndex("orders_client_order_id_idx").on(t.client_order_id),
    uniqueIndex("orders_svc_order_id_idx").on(t.svc_order_id),
    // The list is newest first by id (keyset cursor on id); these serve its filters. The
    // order must be the query's, NULLS included (`ORDER BY id DESC` is NULLS FIRST): with
    // NULLS LAST PostgreSQL cannot read the index in the list's order and sorts instead.
    index("orders_status_idx").on(t.status, t.id.desc().nullsFirst()),
    index("orders_store_code_idx").on(t.store_code, t.id.desc().nullsFirst()).where(sql`${t.store_code} is not null`),
    index("orders_updated_hour_idx").on(t.updated_hour),
    // Finished orders whose personal data is still there, by when tracklane learned they
    // finished: what the daily redaction takes, oldest first. finished_at is set once.
    index("orders_pii_due_idx")
      .on(t.finished_at)
      .where(sql`${t.redacted_at} is null and ${t.status} in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')`),
    // Serves GET /v1/orders?placement= for every state, and the placement gauge. A partial
    // index of the states that need a person left `placed` and `external` to a walk of the
    // primary key: a filter matching none of them read the whole table. The state seldom
    // changes, so order writes stay HOT (docs/scale.md).
    index("orders_placement_idx").on(t.placement_state, t.id.desc().nullsFirst()),
    // Orders with more than one provider id (the provider made a second order for one
    // client_order_id): rare, so a small index, which intake asks whether a bare `order_id`
    // is one of them (orders/read.ts knownClientIds).
    index("orders_other_svc_ids_idx")
      .using("gin", t.svc_order_ids)
      .where(sql`cardinality(${t.svc_order_ids}) > 1`),
  ],
);
