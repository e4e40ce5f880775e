import { bigint, boolean, check, index, integer, jsonb, pgTable, text, timestamp, sql } from "../drizzle.ts";
import { orders } from "./orders.ts";

/**
 * Every call tracklane makes to the provider on a merchant's behalf (place, edit,
 * cancel, dispatch-ready, stop-reattempt): recorded first, then carried out by a job.
 * A placement confirmed by hand (`confirm_placement`) is recorded here too, as a command
 * that succeeds when it is made: every decision about an order has one audit trail.
 */
export const commands = pgTable(
  "commands",
  {
    id: bigint({ mode: "number" }).primaryKey().generatedAlwaysAsIdentity(),
    order_id: bigint({ mode: "number" })
      .notNull()
      .references(() => orders.id),
    kind: text().notNull(),
    /** pending | succeeded | failed */
    state: text().notNull().default("pending"),
    /** The body sent to the provider (without identifiers added at send time). */
    request: jsonb().notNull(),
    /** sha256 of the canonical request: a repeated place with the same body is the same command. */
    request_hash: text().notNull(),
    response: jsonb(),
    attempts: integer().notNull().default(0),
    /**
     * An attempt may have reached the provider without our learning its outcome (a
     * timeout, a dropped connection, a 5xx, a run that died mid-call). For a place this
     * decides between `failed` and `unconfirmed` when the command ends.
     */
    outcome_unknown: boolean().notNull().default(false),
    last_error: text(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    updated_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    completed_at: timestamp({ withTimezone: true }),
    /** When the customer's details in `request` were replaced by "[redacted]"; null: not yet. */
    redacted_at: timestamp({ withTimezone: true }),
  },
  (t) => [
    // Serves GET /v1/orders/{order}/commands.
    index("commands_order_id_idx").on(t.order_id, t.id),
    // Serves the console's failed commands, newest first: few rows among millions.
    index("commands_failed_idx").on(t.id.desc().nullsFirst()).where(sql`${t.state} = 'failed'`),
    // Serves retention: finished commands by age. Place commands stay (their request's hash
    // is how a repeated place is recognised), so they are not in it.
    index("commands_finished_idx").on(t.completed_at).where(sql`${t.state} <> 'pending' and ${t.kind} <> 'place'`),
    // Serves the sweep of stranded commands (pending with no job left): few rows.
    index("commands_pending_idx").on(t.id).where(sql`${t.state} = 'pending'`),
    check("commands_kind", sql`${t.kind} in ('place', 'edit', 'cancel', 'dispatch_ready', 'stop_reattempt', 'confirm_placement')`),
    check("commands_state", sql`${t.state} in ('pending', 'succeeded', 'failed')`),
  ],
);
