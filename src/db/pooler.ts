/**
 * Whether DATABASE_URL reaches PostgreSQL through a pooler that hands out a server session
 * per transaction (PgBouncer's pool_mode = transaction, Supavisor's and most
 * managed poolers' "transaction" port). tracklane needs a connection to stay one session:
 * graphile-worker prepares its statements once per connection and waits on LISTEN, the
 * projection and migrate hold session advisory locks, migrate and the partition job set
 * lock_timeout for the session. Through such a pooler the worker failed every poll
 * ("prepared statement get_job9/graphile_worker does not exist"), then exited, and migrate's
 * lock could be left held by a pooled session for the next run to wait on for ever.
 *
 * The test: a connection reads its session's pid; a second connection opens a transaction
 * (a pooler hands it the session just let go: PgBouncer reuses them last in, first out)
 * and holds it while the first reads its pid again. Pooled per transaction, the second
 * reads the first's pid, or the first reads another. A connection that is its own session
 * can do neither: two connections are two server processes, and one process's pid does
 * not change. A slow answer proves nothing (a busy server is slow too) and passes.
 * Directly or through a session-mode pooler it cannot misfire; a pooler that lends
 * sessions some other way may go unnoticed.
 */
import type { Sql } from "postgres";
import { createPool } from "./client.ts";

/** How long the first connection's second read may take while the second holds its transaction. */
const WAIT_MS = 2_000;
/** A pooler out of sessions may keep the second waiting: then the test tells nothing. */
const GIVE_UP_MS = 10_000;

/** DATABASE_URL goes through a pooler in transaction mode (sharesSessions). */
export class TransactionPoolingError extends Error {
  constructor() {
    super("DATABASE_URL reaches PostgreSQL through a pooler in transaction mode");
    this.name = "TransactionPoolingError";
  }
}

/**
 * Throws TransactionPoolingError when the database goes through a pooler that lends a
 * session per transaction. `target`: a URL, or a pool of at least two connections that
 * holds no session state (a start-up check's: no pool of its own to open and close).
 */
export async function requireOwnSessions(target: string | Sql): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), GIVE_UP_MS)));
  try {
    if (await Promise.race([sharesSessions(target), gaveUp])) throw new TransactionPoolingError();
  } finally {
    clearTimeout(timer);
  }
}

export async function sharesSessions(target: string | Sql): Promise<boolean> {
  if (typeof target !== "string") return sharesSessionsOf(target);
  const sql = createPool(target, 2, "tracklane-startup-check");
  try {
    return await sharesSessionsOf(sql);
  } finally {
    await sql.end({ timeout: 1 });
  }
}

async function sharesSessionsOf(sql: Sql): Promise<boolean> {
  const first = await sql.reserve();
  try {
    const pid = async () => (await first<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid;
    const before = await pid();
    let timer: NodeJS.Timeout | undefined;
    return await sql.begin(async (tx) => {
      const [lent] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      if (lent?.pid === before) return true;
      const waited = new Promise<"waited">((resolve) => (timer = setTimeout(() => resolve("waited"), WAIT_MS)));
      const after = await Promise.race([pid(), waited]);
      clearTimeout(timer);
      return after !== "waited" && after !== before;
    });
  } finally {
    first.release();
  }
}
