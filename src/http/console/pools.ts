/**
 * Which pool a console page reads. Pages read the read pool (DATABASE_READ_URL, maybe a
 * replica some milliseconds behind); actions, sign-in and sessions use the primary.
 */
import type { Context } from "hono";
import type { Sql } from "postgres";

export interface ConsolePools {
  /** The primary: every form post, the sessions, the console's marks. */
  sql: Sql;
  /** The pages' reads: the read pool, or the primary's pool itself without DATABASE_READ_URL. */
  readSql: Sql;
}

/**
 * The pool a page reads. Every action redirects to a page with `?done=` in its URL (the
 * order, the notifications, the AWB pool), which says what was just recorded: that page
 * is read from the primary, so it shows the command or the resend it announces, which a
 * replica may not have replayed yet. Its later views and live updates read the read pool.
 */
export function pagePool(c: Context, pools: ConsolePools): Sql {
  return c.req.query("done") === undefined ? pools.readSql : pools.sql;
}
