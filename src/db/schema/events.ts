import { bigint, check, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex, boolean, sql } from "../drizzle.ts";

/**
 * The append-only log of everything the provider told us (and the few facts tracklane
 * records itself, such as "placed through tracklane"). A trigger (see migrations) makes
 * UPDATE, DELETE and TRUNCATE fail: orders are derived from this table, never the other
 * way round.
 */
export const orderEvents = pgTable(
  "order_events",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    /** sha256 of kind + the canonical JSON of the body: the provider sends no event id. */
    dedupeKey: text().notNull(),
    /** `provider` (a callback) or `tracklane` (recorded by tracklane itself). */
    source: text().notNull().default("provider"),
    /** `status` or `location`. */
    kind: text().notNull(),
    svcOrderId: text(),
    clientOrderId: text(),
    /** The raw status string as sent; null for location events. */
    providerStatus: text(),
    occurredAt: timestamp({ withTimezone: true }).notNull(),
    receivedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    payload: jsonb().notNull(),
  },
  (t) => [
    // Serves the dedupe check of every insert (ON CONFLICT DO NOTHING).
    uniqueIndex("order_events_dedupe_key_idx").on(t.dedupeKey),
    // Serve the projection's "all events of this order" lookups by either identifier.
    index("order_events_svc_order_id_idx").on(t.svcOrderId).where(sql`${t.svcOrderId} is not null`),
    index("order_events_client_order_id_idx").on(t.clientOrderId).where(sql`${t.clientOrderId} is not null`),
    check("order_events_has_order_id", sql`${t.svcOrderId} is not null or ${t.clientOrderId} is not null`),
    check("order_events_kind", sql`${t.kind} in ('status', 'location')`),
  ],
);

/** Callbacks that passed the secret check but could not be stored as events. */
export const rejectedCallbacks = pgTable(
  "rejected_callbacks",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    receivedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    reason: text().notNull(),
    contentType: text(),
    /** The body as text, cut to REJECTED_BODY_MAX characters (see `truncated`). */
    body: text().notNull(),
    bodyBytes: integer().notNull(),
    truncated: boolean().notNull().default(false),
  },
  // Serves GET /v1/callbacks/rejected, newest first.
  (t) => [index("rejected_callbacks_received_at_idx").on(t.receivedAt.desc(), t.id.desc())],
);

/**
 * Orders with events not yet projected: one row per order per ingest flush, written in the
 * flush's transaction together with one `projection__drain` job. Drain jobs take rows
 * oldest first (`FOR UPDATE SKIP LOCKED`), project their orders and delete the rows in one
 * transaction, so a crash mid-projection leaves the rows for the next drain. Many events
 * of many orders thus cost one job, not one job per order (src/projection/queue.ts).
 */
export const projectionQueue = pgTable("projection_queue", {
  id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
  svcOrderId: text(),
  clientOrderId: text(),
  enqueuedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
});
