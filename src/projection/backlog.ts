/**
 * The `projection_queue` table: events stored but not yet merged into their orders. Rows
 * are written by the event log's append, in the statement that stores their events
 * (src/events/log.ts); every other statement on the table is here.
 */
import type { PendingQuery, Row, TransactionSql } from "postgres";
import { createPool } from "../db/client.ts";
import type { Tx } from "../db/client.ts";
import type { orderEvents } from "../db/schema/index.ts";

/** The job that drains the queue: an append that writes rows adds one unless a drain loop runs. */
export const DRAIN_TASK = "projection__drain";

/**
 * The drain's gate: two advisory locks, in the two-integer key space under a class of their
 * own (the projection's locks take one bigint; the worker's liveness locks, class 7305).
 *
 * - `running` is held (shared, on a connection of its own) by every drain loop while it
 *   runs. An append that queued events tries it exclusively: if no loop holds it, the
 *   append adds a drain job; if one does, the append adds none, because that loop will
 *   see its events (below).
 * - `closing` is held shared by every such append, from before it tries `running` until
 *   it commits. A loop that found the queue empty gives up `running`, then takes
 *   `closing` exclusively, which waits for every append that may have seen it running to
 *   commit, and only then takes its last batch. So no queued event is left without a
 *   drain job or a loop that will take it.
 *
 * Under load a loop runs all the time and appends add no jobs: before this gate every
 * flush added one, and graphile-worker's fetch, completion and notification of ~100 jobs
 * a second cost PostgreSQL about 25 µs per event (`npm run bench`). The append's side is in
 * its statement (src/events/log.ts insertRows).
 */
export const DRAIN_GATE = { space: 0x74726b6c, running: 1, closing: 2 } as const;

/** A drain loop's hold of `running` (DRAIN_GATE), on a connection of its own. */
export interface DrainHold {
  /** Holds `running` (again): appends stop adding jobs. */
  hold(): Promise<void>;
  /**
   * Lets go of `running` and waits until every append that may have found it held has
   * committed: a batch taken after this sees their events.
   */
  close(): Promise<void>;
  /** Lets go of everything and closes the connection. */
  release(): void;
}

/**
 * A hold on a one-connection pool of its own: a session lock needs one connection for the
 * whole run, and a postgres.js connection reserved from the main pool cannot be used after
 * the server dropped it (the driver writes to a socket it already let go). The pool
 * reconnects instead; the new session holds nothing, so appends add jobs meanwhile, which
 * is safe. Closing waits on the server, so it is right on any session.
 */
export function openDrainHold(databaseUrl: string): DrainHold {
  const sql = createPool(databaseUrl, 1, "tracklane-drain-gate", { idle_timeout: 0, max_lifetime: 0 });
  const { space, running, closing } = DRAIN_GATE;
  let held = false;
  return {
    async hold() {
      if (held) return;
      await sql`select pg_advisory_lock_shared(${space}::int, ${running}::int)`;
      held = true;
    },
    async close() {
      if (held) await sql`select pg_advisory_unlock_shared(${space}::int, ${running}::int)`;
      held = false;
      await sql`select pg_advisory_lock(${space}::int, ${closing}::int)`;
      await sql`select pg_advisory_unlock(${space}::int, ${closing}::int)`;
    },
    release() {
      held = false;
      // The session's end lets go of its locks; nothing waits for the socket to close.
      void sql.end({ timeout: 5 });
    },
  };
}

/**
 * A drain job, if anything is queued: what a loop that is behind adds, to start another
 * process's loop, and what a stopping loop leaves for the next worker.
 */
export async function addDrainJobIfQueued(sql: Tx): Promise<void> {
  await sql`select graphile_worker.add_job(${DRAIN_TASK}) where exists (select from projection_queue)`;
}

export type TakenRow = Pick<
  typeof orderEvents.$inferSelect,
  "id" | "dedupe_key" | "kind" | "svc_order_id" | "client_order_id" | "provider_status" | "occurred_at" | "received_at" | "payload"
>;

/**
 * Takes (deletes) the oldest `limit` queued rows no other drain holds, returning their
 * events. The rows are chosen once, in a materialised CTE: as `id in (select … limit …
 * skip locked)` PostgreSQL may rescan the subquery once per row it deletes, each rescan
 * skipping the rows already locked and returning new ones, so a "batch of 500" grew to
 * thousands of rows and its transaction to seconds. They are deleted by tuple id, whatever
 * the queue's statistics say (claimAndRead).
 */
export async function takeOldest(tx: TransactionSql, limit: number): Promise<TakenRow[]> {
  return await tx<TakenRow[]>`
    with chosen as materialized (
      select ctid from projection_queue order by event_id limit ${limit} for update skip locked
    ),
    taken as (
      delete from projection_queue q where q.ctid = any(array(select ctid from chosen)) returning q.event_id, q.kind, q.period
    )
    select e.id, e.dedupe_key, e.kind, e.svc_order_id, e.client_order_id, e.provider_status,
           e.occurred_at, e.received_at, e.payload
    from order_events e join taken t on t.event_id = e.id and t.kind = e.kind and t.period = e.period`;
}

/** Takes these events' rows, those no other drain holds; the ids taken. */
export async function takeEvents(tx: TransactionSql, eventIds: readonly number[]): Promise<Set<number>> {
  const rows = await tx<{ event_id: number }[]>`
    with chosen as materialized (
      select ctid from projection_queue where event_id = any(${eventIds as number[]}::bigint[]) for update skip locked
    )
    delete from projection_queue q where q.ctid = any(array(select ctid from chosen))
    returning q.event_id`;
  return new Set(rows.map((r) => r.event_id));
}

/**
 * The events of a round (src/events/log.ts roundBranches), claimed and read in one
 * statement: each event's columns as `columns` makes them (log.ts foldColumns), for the
 * events already merged (no queue row) and those whose queue rows this transaction claims
 * now, by deleting the rows no other drain holds. A full derivation (a rebuild above all)
 * so folds the whole log, and never waits: an event another drain holds stays with it and
 * is left out, as is one stored after this statement's snapshot, which stays queued for
 * its drain. Claimed rows still show in the snapshot (a data-modifying CTE's changes do
 * not), hence the check against what was claimed. The round's ids are looked up in each
 * partition once; a claim of its own, before the read, looked them all up twice.
 *
 * Each event's queue row is one probe of the queue's primary key (LATERAL, and OFFSET 0 on
 * the last check), whatever the queue's statistics say. As a join the planner put the
 * queue on the outside whenever its statistics were stale: the drain's own vacuum keeps
 * the queue's pages (TRUNCATE false), so a vacuum of a nearly empty queue records a few
 * rows in thousands of pages, and a backlog of 100,000 rows then reads as a few. Each
 * claim scanned the whole queue and probed every partition per row: 0.4–1.4 s a round,
 * and a backlog that did not drain within three minutes (`npm run bench`). The rows are
 * deleted by their tuple ids (a TID scan), which they keep while this transaction holds
 * them locked. While the queue is empty (a rebuild on a quiet service) nothing is probed:
 * asked once per statement. As an anti join, the last check rescanned the nearly empty
 * queue once per event, about 2 µs each: a fifth of PostgreSQL's time in a rebuild.
 */
export async function claimAndRead<E extends { id: number }>(
  tx: TransactionSql,
  branches: { bySvc: PendingQuery<Row[]>; byClient: PendingQuery<Row[]> },
  columns: PendingQuery<Row[]>,
): Promise<E[]> {
  return await tx<E[]>`
    with found as materialized (
      select ${columns} from ${branches.bySvc}
      union all
      select ${columns} from ${branches.byClient}
    ),
    locked as materialized (
      select l.ctid from found cross join lateral (
        select q.ctid from projection_queue q where q.event_id = found.id for update skip locked) as l
      where (select exists (select from projection_queue))
    ),
    claimed as (
      delete from projection_queue q where q.ctid = any(array(select ctid from locked)) returning q.event_id
    )
    select * from found f
    where (select not exists (select from projection_queue))
       or f.id in (select event_id from claimed)
       or not exists (select from projection_queue q where q.event_id = f.id offset 0)`;
}

/**
 * Runs `reads` (a derivation's rounds of locks and reads, then its payloads: project.ts
 * readOrders) with two planner settings, for those statements alone:
 *
 * - `enable_seqscan = off` keeps the queue's probes in them (claimAndRead) index probes
 *   whatever the statistics say; it only prices sequential scans out where an index can
 *   serve. The statistics lie right after the drain's own vacuum of a nearly empty queue:
 *   a few rows in many kept pages, the queue's primary key counted the same. A probe by
 *   key is then estimated at about the price of reading the whole table, and which one
 *   PostgreSQL picks turned on a handful of pages: under load,
 *   test/integration/queue-vacuum.test.ts found a sequential scan of the whole queue per
 *   event in about a third of its runs (four scans of 20,003 rows for an order of two
 *   events), where the LATERAL probes and OFFSET 0 alone had kept the plan's shape but not
 *   its scans. A backlog would pay that per event.
 * - `plan_cache_mode = force_generic_plan` plans each of these statements once per
 *   session. A custom plan (PostgreSQL's choice for a prepared statement's first five runs
 *   on each connection) estimates every id of the round's arrays against every partition's
 *   statistics: with 24 months of status partitions a derivation of 500 orders spent 6 s
 *   planning its claim and 12 s its read (two statements then), and 30 and 94 ms with
 *   generic plans (`npm run bench -- --history-months 24`: the projection had fallen a
 *   minute behind). A generic plan makes the same index probes per partition.
 *
 * Both go back to their defaults before the transaction's writes. The session keeps plans
 * made meanwhile (prepared statements, PL/pgSQL such as graphile-worker's add_job) and
 * reuses them later: for the reads above that is what is wanted, but `enable_seqscan` left
 * off for the whole transaction raised PostgreSQL's CPU per event by half with a
 * notification endpoint subscribed.
 */
export async function withQueueProbes<T>(tx: TransactionSql, reads: () => Promise<T>): Promise<T> {
  // Each pair in one round trip (the simple protocol takes several statements).
  await tx`set local enable_seqscan = off; set local plan_cache_mode = force_generic_plan`.simple();
  const result = await reads();
  await tx`set local enable_seqscan to default; set local plan_cache_mode to default`.simple();
  return result;
}

/** How many events wait, and for how long the oldest has (seconds), for /metrics. */
export async function backlogFigures(sql: Tx): Promise<{ waiting: number; oldestSeconds: number }> {
  const [row] = await sql<{ waiting: number; oldest: number | null }[]>`
    select count(*)::int as waiting, extract(epoch from now() - min(enqueued_at))::float8 as oldest
    from projection_queue`;
  return { waiting: row?.waiting ?? 0, oldestSeconds: Math.max(0, row?.oldest ?? 0) };
}
