import { bigint, check, date, index, integer, jsonb, pgTable, primaryKey, text, timestamp, uniqueIndex, boolean, sql } from "../drizzle.ts";

/**
 * The append-only log of everything the provider told us (and the few facts tracklane
 * records itself, such as "placed through tracklane"). A trigger (see migrations) makes
 * UPDATE, DELETE and TRUNCATE fail: orders are derived from this table, never the other
 * way round.
 *
 * Partitioned by RANGE (kind, period), one partition per kind and stretch of days
 * (EVENTS_PARTITION), created ahead and dropped by retention (src/events/partitions.ts).
 * drizzle-kit knows no partitioning: migration 0011 creates the table by hand, and this
 * definition describes its columns and indexes for queries and later migrations.
 */
export const orderEvents = pgTable(
  "order_events",
  {
    /** Unique (an identity), but not a primary key: that would have to include the partition key. */
    id: bigint({ mode: "number" }).notNull().generatedAlwaysAsIdentity(),
    /**
     * sha256 of kind + the canonical JSON of the body, in hex: the provider sends no event
     * id. Its first 32 digits in periods from order_events_short_keys_from() on (migration
     * 0013, src/events/log.ts), all 64 before.
     */
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
    /**
     * The partition key with kind: the UTC day on which the event's order key (its provider
     * id, else the merchant's) was first seen (order_periods), so that every copy of a body
     * carries the same period, and an order's events share partitions.
     */
    period: date({ mode: "string" }).notNull(),
  },
  (t) => [
    // Exactly once, the dedupe check of every insert (ON CONFLICT DO NOTHING): a body (its
    // dedupe key) is stored once per order. The order's id comes first, so the index grows
    // where new orders land (provider ids grow with time): its hot part is the active
    // orders' pages, not random pages of the whole history. A duplicate carries the same
    // ids, so the same kind and period, as its first copy: it meets it here whenever it
    // arrives (a partitioned unique index must hold the partition key).
    uniqueIndex("order_events_order_dedupe_idx").on(sql`coalesce(${t.svc_order_id}, ${t.client_order_id})`, t.dedupe_key, t.kind, t.period),
    // Lookups by event id (payloads, the projection queue's join, a rebuild's slices).
    index("order_events_id_idx").on(t.id),
    // Serve the projection's "all events of this order" lookups by either identifier.
    // An order's events by either id, in timeline order: a page's cursor is a range of
    // these indexes, so a deep page reads only its own rows.
    index("order_events_svc_order_id_idx").on(t.svc_order_id, t.occurred_at, t.id).where(sql`${t.svc_order_id} is not null`),
    index("order_events_client_order_id_idx").on(t.client_order_id, t.occurred_at, t.id).where(sql`${t.client_order_id} is not null`),
    check("order_events_has_order_id", sql`${t.svc_order_id} is not null or ${t.client_order_id} is not null`),
    check("order_events_kind", sql`${t.kind} in ('status', 'location')`),
  ],
);

/**
 * The period of each order key (coalesce(svc_order_id, client_order_id)): the UTC day its
 * first event arrived. Every later event of that key, and every copy of one, is stored
 * with this period, so the dedupe index (which must hold the partition key) sees them
 * together. One row per key, written by the append that first sees it.
 */
export const orderPeriods = pgTable("order_periods", {
  order_key: text().primaryKey(),
  period: date({ mode: "string" }).notNull(),
});

/**
 * The partitions of order_events, as src/events/partitions.ts made them: written in the
 * transaction that attaches or drops one. The append routes an event of a period whose
 * partition retention dropped to the oldest partition of its kind left.
 */
export const eventPartitions = pgTable(
  "event_partitions",
  {
    kind: text().notNull(),
    /** First day in the partition, and the day after its last. */
    starts: date({ mode: "string" }).notNull(),
    ends: date({ mode: "string" }).notNull(),
    name: text().notNull().unique(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.starts] }), check("event_partitions_range", sql`${t.starts} < ${t.ends}`)],
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
  /**
   * The event's partition key: a drain's join to its event then reads one partition's id
   * index instead of every partition's.
   */
  kind: text().notNull(),
  period: date({ mode: "string" }).notNull(),
});
