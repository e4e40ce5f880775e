/**
 * The `projection_queue` table: events stored but not yet merged into their orders. Rows
 * are written by the event log's append, in the statement that stores their events
 * (src/events/log.ts); every other statement on the table is here.
 */
import type { PendingQuery, Row, TransactionSql } from "postgres";
import type { Tx } from "../db/client.ts";
import type { orderEvents } from "../db/schema/index.ts";

/** The job that drains the queue: the append that writes rows adds one. */
export const DRAIN_TASK = "projection__drain";

export type TakenRow = Pick<
  typeof orderEvents.$inferSelect,
  "id" | "dedupe_key" | "kind" | "svc_order_id" | "client_order_id" | "provider_status" | "occurred_at" | "received_at" | "payload"
>;

/**
 * Takes (deletes) the oldest `limit` queued rows no other drain holds, returning their
 * events. The rows are chosen once, in a materialised CTE: as `id in (select … limit …
 * skip locked)` PostgreSQL may rescan the subquery once per row it deletes, each rescan
 * skipping the rows already locked and returning new ones, so a "batch of 500" grew to
 * thousands of rows and its transaction to seconds.
 */
export async function takeOldest(tx: TransactionSql, limit: number): Promise<TakenRow[]> {
  return await tx<TakenRow[]>`
    with chosen as materialized (
      select event_id from projection_queue order by event_id limit ${limit} for update skip locked
    ),
    taken as (
      delete from projection_queue q using chosen where q.event_id = chosen.event_id returning q.event_id, q.kind, q.period
    )
    select e.id, e.dedupe_key, e.kind, e.svc_order_id, e.client_order_id, e.provider_status,
           e.occurred_at, e.received_at, e.payload
    from order_events e join taken t on t.event_id = e.id and t.kind = e.kind and t.period = e.period`;
}

/** Takes these events' rows, those no other drain holds; the ids taken. */
export async function takeEvents(tx: TransactionSql, eventIds: readonly number[]): Promise<Set<number>> {
  const rows = await tx<{ event_id: number }[]>`
    with chosen as materialized (
      select event_id from projection_queue where event_id = any(${eventIds as number[]}::bigint[]) for update skip locked
    )
    delete from projection_queue q using chosen where q.event_id = chosen.event_id
    returning q.event_id`;
  return new Set(rows.map((r) => r.event_id));
}

/**
 * Claims the queued events of a round (src/events/log.ts roundBranches: exactly what
 * eventsOf then reads) that no other drain holds: deleting their rows makes them this
 * transaction's to fold, so a full derivation (a rebuild above all) folds the whole log.
 * Never waits: rows another drain holds stay with it.
 */
export async function claimQueued(tx: TransactionSql, branches: { bySvc: PendingQuery<Row[]>; byClient: PendingQuery<Row[]> }): Promise<void> {
  await tx`
    with chosen as materialized (
      select q.event_id from projection_queue q join order_events e on e.id = q.event_id and e.kind = q.kind and e.period = q.period
      where ${branches.bySvc}
      union
      select q.event_id from projection_queue q join order_events e on e.id = q.event_id and e.kind = q.kind and e.period = q.period
      where ${branches.byClient}
    ),
    locked as materialized (
      select q.event_id from projection_queue q join chosen using (event_id) for update of q skip locked
    )
    delete from projection_queue q using locked where q.event_id = locked.event_id`;
}

/** How many events wait, and for how long the oldest has (seconds), for /metrics. */
export async function backlogFigures(sql: Tx): Promise<{ waiting: number; oldestSeconds: number }> {
  const [row] = await sql<{ waiting: number; oldest: number | null }[]>`
    select count(*)::int as waiting, extract(epoch from now() - min(enqueued_at))::float8 as oldest
    from projection_queue`;
  return { waiting: row?.waiting ?? 0, oldestSeconds: Math.max(0, row?.oldest ?? 0) };
}
