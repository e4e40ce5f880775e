import { bigint, check, index, integer, jsonb, pgTable, text, timestamp, sql } from "../drizzle.ts";
import { orders } from "./orders.ts";

/**
 * Every call tracklane makes to the provider on a merchant's behalf (place, edit,
 * cancel, dispatch-ready, stop-reattempt): recorded first, then carried out by a job.
 */
export const commands = pgTable(
  "commands",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    orderId: bigint({ mode: "number" })
      .notNull()
      .references(() => orders.id),
    kind: text().notNull(),
    /** pending | succeeded | failed */
    state: text().notNull().default("pending"),
    /** The body sent to the provider (without identifiers added at send time). */
    request: jsonb().notNull(),
    /** sha256 of the canonical request: a repeated place with the same body is the same command. */
    requestHash: text().notNull(),
    response: jsonb(),
    attempts: integer().notNull().default(0),
    lastError: text(),
    createdAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp({ withTimezone: true }).notNull().defaultNow(),
    completedAt: timestamp({ withTimezone: true }),
  },
  (t) => [
    // Serves GET /v1/orders/{order}/commands.
    index("commands_order_id_idx").on(t.orderId, t.id),
    check("commands_kind", sql`${t.kind} in ('place', 'edit', 'cancel', 'dispatch_ready', 'stop_reattempt')`),
    check("commands_state", sql`${t.state} in ('pending', 'succeeded', 'failed')`),
  ],
);
