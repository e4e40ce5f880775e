import { bigint, check, index, integer, pgTable, text, timestamp, uniqueIndex, sql } from "../drizzle.ts";

/** One row per AWB number the provider gave us: available, or allocated to an order. */
export const awbNumbers = pgTable(
  "awb_numbers",
  {
    awb_number: text().primaryKey(),
    /** available | allocated */
    state: text().notNull().default("available"),
    client_order_id: text(),
    allocated_at: timestamp({ withTimezone: true }),
    /** pool (replenishment endpoint) or fresh (async request) */
    source: text().notNull(),
    request_id: text(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    // Serves allocation: the oldest available number, skipping locked rows.
    index("awb_numbers_available_idx").on(t.created_at, t.awb_number).where(sql`${t.state} = 'available'`),
    // Serve the console's 24-hour chart of the pool's level: what was added and allocated since.
    index("awb_numbers_created_at_idx").on(t.created_at),
    index("awb_numbers_allocated_at_idx").on(t.allocated_at).where(sql`${t.allocated_at} is not null`),
    // One AWB per order: allocation is idempotent per client_order_id.
    uniqueIndex("awb_numbers_client_order_id_idx").on(t.client_order_id),
    check("awb_numbers_state", sql`${t.state} in ('available', 'allocated')`),
    check("awb_numbers_allocated", sql`(${t.state} = 'allocated') = (${t.allocated_at} is not null)`),
    // A number that names an order is allocated (migration 0018): allocation answers an
    // order with the number naming it whatever its state, and hands the oldest available
    // one to the next caller, so an available number naming an order would go to two.
    // An allocated number may name none (POST /v1/awb/allocate without client_order_id).
    check("awb_numbers_order_allocated", sql`${t.state} = 'allocated' or ${t.client_order_id} is null`),
  ],
);

/** Top-up requests to the provider, both modes; fresh ones are polled until done. */
export const awbRequests = pgTable(
  "awb_requests",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    mode: text().notNull(),
    /** The provider's request_id (fresh mode). */
    request_id: text(),
    /** pending | completed | failed */
    status: text().notNull().default("pending"),
    count: integer().notNull(),
    /** Numbers received, and of those, new to the pool. */
    received: integer().notNull().default(0),
    added: integer().notNull().default(0),
    polls: integer().notNull().default(0),
    next_poll_at: timestamp({ withTimezone: true }),
    last_error: text(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    completed_at: timestamp({ withTimezone: true }),
  },
  (t) => [
    uniqueIndex("awb_requests_request_id_idx").on(t.request_id),
    // Serves GET /v1/awb/pool (pending and recent requests).
    index("awb_requests_created_at_idx").on(t.created_at.desc()),
    check("awb_requests_mode", sql`${t.mode} in ('pool', 'fresh')`),
    check("awb_requests_status", sql`${t.status} in ('pending', 'completed', 'failed')`),
  ],
);
