import { bigint, index, pgTable, text, timestamp } from "../drizzle.ts";

/** A signed-in console: the cookie's token is never stored, only its SHA-256. */
export const consoleSessions = pgTable(
  "console_sessions",
  {
    /** Hex SHA-256 of the session cookie's token. */
    id: text().primaryKey(),
    /** The token every state-changing form carries (CSRF). */
    csrf_token: text().notNull(),
    created_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
    expires_at: timestamp({ withTimezone: true }).notNull(),
  },
  (t) => [index("console_sessions_expires_at_idx").on(t.expires_at)],
);

/** What the console's people have seen (the last rejected callback looked at), by name. */
export const consoleMarks = pgTable("console_marks", {
  name: text().primaryKey(),
  value: bigint({ mode: "number" }).notNull(),
  updated_at: timestamp({ withTimezone: true }).notNull().defaultNow(),
});
