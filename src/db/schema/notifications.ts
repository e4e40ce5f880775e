import { NOTIFICATION_TYPES } from "../../notify/types.ts";
import { bigint, boolean, check, index, integer, pgTable, text, timestamp, uniqueIndex, sql } from "../drizzle.ts";

/** Where notifications go: a URL, the types it wants (none listed: all) and its signing secrets. */
export const notificationEndpoints = pgTable("notification_endpoints", {
  /** `ep_` + a 26-character time-ordered id. */
  id: text().primaryKey(),
  url: text().notNull(),
  /** Types sent to this endpoint; empty: every type. */
  events: text().array().notNull().default(sql`'{}'::text[]`),
  description: text(),
  enabled: boolean().notNull().default(true),
  /** Why tracklane disabled the endpoint itself (null: enabled, or disabled by hand). */
  disabled_reason: text(),
  /** `whsec_` + base64 of 24 random bytes. */
  secret: text().notNull(),
  /** The secret before the last rotation: it signs too until previous_secret_until. */
  previous_secret: text(),
  previous_secret_until: timestamp({ withTimezone: true }),
  created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
  updated_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
});

/**
 * The outbox: one row per change worth telling, whoever listens. No foreign key to orders:
 * merged order rows are deleted, and a message stays what was sent.
 */
export const notificationMessages = pgTable(
  "notification_messages",
  {
    /** `msg_…`: the Standard Webhooks `webhook-id`. */
    id: text().primaryKey(),
    type: text().notNull(),
    order_id: bigint({ mode: "number" }),
    client_order_id: text(),
    svc_order_id: text(),
    /** The order's message sequence, so receivers can put them in order. */
    sequence: integer(),
    /** The exact JSON sent (signed as these bytes). */
    body: text().notNull(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // An order's messages: its last sequence, and (filtered by type) its last rider location.
    // No second index for the latter: every message pays each index in the projection's transaction.
    index("notification_messages_order_sequence_idx").on(t.order_id, t.sequence).where(sql`${t.order_id} is not null`),
    check("notification_messages_type", sql`${t.type} in (${sql.raw(NOTIFICATION_TYPES.map((n) => `'${n}'`).join(", "))})`),
  ],
);

/**
 * The last `sequence` of orders whose messages retention purged: an order's next message
 * continues above it, not from 1 again, when none of its messages is left to read it from.
 * Written by the purge (the highest it deleted per order) and by merges (the survivor
 * keeps the highest of its rows'), never by the messages' own writes: at most one row per
 * order that had messages purged. No foreign key to orders, as for the messages.
 */
export const notificationSequences = pgTable("notification_sequences", {
  order_id: bigint({ mode: "number" }).primaryKey(),
  last_sequence: integer().notNull(),
});

/** One message to one endpoint: its state and retry schedule. */
export const notificationDeliveries = pgTable(
  "notification_deliveries",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    // No foreign key: the statement that writes a message writes its deliveries, and the
    // check would cost a lookup per delivery inside the projection's transaction.
    message_id: text().notNull(),
    endpoint_id: text()
      .notNull()
      .references(() => notificationEndpoints.id, { onDelete: "cascade" }),
    /** pending | delivered | failed */
    status: text().notNull().default("pending"),
    attempts: integer().notNull().default(0),
    next_attempt_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    /** A sender holds the delivery until then; past it, another may take it. */
    leased_until: timestamp({ withTimezone: true }),
    last_status_code: integer(),
    last_error: text(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    delivered_at: timestamp({ withTimezone: true }),
  },
  (t) => [
    uniqueIndex("notification_deliveries_message_endpoint_idx").on(t.message_id, t.endpoint_id),
    // Serves the sender's claim of due deliveries, per endpoint.
    index("notification_deliveries_due_idx").on(t.endpoint_id, t.next_attempt_at).where(sql`${t.status} = 'pending'`),
    index("notification_deliveries_endpoint_idx").on(t.endpoint_id, t.id),
    // Failed deliveries, newest first (the console's list of what to resend): few among millions.
    index("notification_deliveries_failed_idx").on(t.id.desc().nullsFirst()).where(sql`${t.status} = 'failed'`),
    check("notification_deliveries_status", sql`${t.status} in ('pending', 'delivered', 'failed')`),
  ],
);

/** Every HTTP attempt of a delivery, for diagnosis. */
export const notificationAttempts = pgTable(
  "notification_attempts",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    delivery_id: bigint({ mode: "number" })
      .notNull()
      .references(() => notificationDeliveries.id, { onDelete: "cascade" }),
    at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    status_code: integer(),
    duration_ms: integer().notNull(),
    response_excerpt: text(),
    error: text(),
  },
  (t) => [index("notification_attempts_delivery_idx").on(t.delivery_id, t.id)],
);
