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
    dedupe_key: text().notNull(),
    /** `provider` (a callback) or `tracklane` (recorded by tracklane itself). */
    source: text().notNull().default("provider"),
    /** `status` or `location`. */
    kind: text().notNull(),
    svc_order_id: text(),
    client_order_id: text(),
    /** The raw status string as sent; null for location events. */
    provider_status: text(),
    occurred_at: timestamp({ withTimezone: true }).notNull(),
    received_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    payload: jsonb().notNull(),
  },
  (t) => [
    // Exactly once, the dedupe check of every insert (ON CONFLICT DO NOTHING): a body (its
    // dedupe key) is stored once per order. The order's id comes first, so the index grows
    // where new orders land (provider ids grow with time): its hot part is the active
    // orders' pages, not random pages of the whole history. A duplicate carries the same
    // ids as its first copy, so it meets it here whenever it arrives.
    uniqueIndex("order_events_order_dedupe_idx").on(sql`coalesce(${t.svc_order_id}, ${t.client_order_id})`, t.dedupe_key),
    // Serve the projection's "all events of this order" lookups by either identifier.
    // An order's events by either id, in timeline order: a page's cursor is a range of
    // these indexes, so a deep page reads only its own rows.
    index("order_events_svc_order_id_idx").on(t.svc_order_id, t.occurred_at, t.id).where(sql`${t.svc_order_id} is not null`),
    index("order_events_client_order_id_idx").on(t.client_order_id, t.occurred_at, t.id).where(sql`${t.client_order_id} is not null`),
    check("order_events_has_order_id", sql`${t.svc_order_id} is not null or ${t.client_order_id} is not null`),
    check("order_events_kind", sql`${t.kind} in ('status', 'location')`),
  ],
);

/** Callbacks that passed the secret check but could not be stored as events. */
export const rejectedCallbacks = pgTable(
  "rejected_callbacks",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    received_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    reason: text().notNull(),
    content_type: text(),
    /** The body as text, cut to REJECTED_BODY_MAX characters (see `truncated`). */
    body: text().notNull(),
    body_bytes: integer().notNull(),
    truncated: boolean().notNull().default(false),
  },
  // Serves GET /v1/callbacks/rejected, newest first.
  (t) => [index("rejected_callbacks_received_at_idx").on(t.received_at.desc(), t.id.desc())],
);

/**
 * Events not yet projected: one row per event, written in the ingest flush's transaction
 * together with one `projection__drain` job. A drain takes rows oldest first (`FOR UPDATE
 * SKIP LOCKED`), merges their events into their orders and deletes the rows, all in one
 * transaction: each event is merged exactly once, and a crash mid-projection leaves the
 * rows for the next drain (src/projection/queue.ts). A row's presence also tells a full
 * re-derivation of an order which events some drain has still to merge
 * (src/projection/project.ts). No foreign key: order_events is append-only, so the event
 * always exists, and the check would cost every insert.
 */
export const projectionQueue = pgTable("projection_queue", {
  event_id: bigint({ mode: "number" }).primaryKey(),
  enqueued_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
});
