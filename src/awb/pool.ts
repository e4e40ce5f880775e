/**
 * The AWB pool in the database: allocation (one row picked FOR UPDATE SKIP LOCKED), the
 * set-based insert of numbers from the provider (ON CONFLICT DO NOTHING), and the figures
 * the API, the metrics and top-up planning read. A number goes available -> allocated
 * once and never back.
 */
import type { Sql, TransactionSql } from "postgres";
import type { Tx } from "../db/client.ts";
import type { awbRequests } from "../db/schema/index.ts";
import { recordMessage } from "../notify/outbox.ts";
import { assignAwb, lockAwbOfClientOrder } from "../orders/store.ts";
import { enqueueAutoReplenish } from "./jobs.ts";
import { MAX_POLL_AGE_MS } from "./plan.ts";
import type { PoolSnapshot } from "./plan.ts";

export interface Allocation {
  awbNumber: string;
}

const UNIQUE_VIOLATION = "23505";

/**
 * Hands out one AWB, or null when none is available (a top-up is then enqueued in the
 * same transaction). With a client_order_id: the same id always gets the same number, and
 * the order row with that id (if any) gets it as awb_number in the same transaction.
 * When the allocation leaves fewer than `lowWatermark` available, it enqueues the
 * automatic top-up in the same transaction (at most one waits: see enqueueAutoReplenish).
 */
export async function allocateAwb(sql: Sql, input: { clientOrderId?: string | undefined; lowWatermark: number }): Promise<Allocation | null> {
  const clientOrderId = input.clientOrderId ?? null;
  for (let attempt = 0; ; attempt++) {
    try {
      return await sql.begin((tx) => allocateIn(tx, clientOrderId, input.lowWatermark));
    } catch (err) {
      // Belt and braces: the advisory lock already serialises allocations of one
      // client_order_id, so the unique index should never fire; if it does, the other
      // transaction committed the number this one must return: read it again.
      if ((err as { code?: string }).code === UNIQUE_VIOLATION && clientOrderId !== null && attempt < 3) continue;
      throw err;
    }
  }
}

async function allocateIn(tx: TransactionSql, clientOrderId: string | null, lowWatermark: number): Promise<Allocation | null> {
  if (clientOrderId !== null) {
    // Concurrent calls for one client_order_id queue here, so the second sees the first's
    // committed row instead of taking a second number.
    await lockAwbOfClientOrder(tx, clientOrderId);
    const [held] = await tx<{ awb_number: string }[]>`
      select awb_number from awb_numbers where client_order_id = ${clientOrderId}`;
    if (held) {
      await assignAwb(tx, clientOrderId, held.awb_number);
      return { awbNumber: held.awb_number };
    }
  }
  // Oldest first (awb_numbers_available_idx); SKIP LOCKED lets concurrent allocators take
  // different rows instead of queueing on the same one.
  const [row] = await tx<{ awb_number: string }[]>`
    with picked as (
      select awb_number from awb_numbers
      where state = 'available'
      order by created_at, awb_number
      limit 1
      for update skip locked)
    update awb_numbers a
    set state = 'allocated', client_order_id = ${clientOrderId}, allocated_at = now()
    from picked
    where a.awb_number = picked.awb_number
    returning a.awb_number`;
  if (!row) {
    if (await enqueueAutoReplenish(tx, "empty", { available: 0, lowWatermark })) {
      await recordMessage(tx, { type: "awb.pool_low", data: { pool: { available: 0, low_watermark: lowWatermark } } });
    }
    return null;
  }
  if (clientOrderId !== null) await assignAwb(tx, clientOrderId, row.awb_number);
  // Counting stops at the watermark: a bounded index-only scan, not a count of the pool.
  const limit = Math.max(1, lowWatermark);
  const [level] = await tx<{ n: number }[]>`
    select count(*)::int as n from (
      select 1 from awb_numbers where state = 'available' limit ${limit}) s`;
  const left = level?.n ?? 0;
  if (left < lowWatermark || left === 0) {
    // The first allocation below the watermark queues the top-up; it tells the merchant once.
    if (await enqueueAutoReplenish(tx, "allocation", { available: left, lowWatermark })) {
      await recordMessage(tx, { type: "awb.pool_low", data: { pool: { available: left, low_watermark: lowWatermark } } });
    }
  }
  return { awbNumber: row.awb_number };
}

/**
 * Adds numbers in one statement whatever their count (the list travels as one JSON
 * parameter); numbers already held, allocated or not, are left as they are. Returns how
 * many were new.
 */
export async function insertAwbNumbers(
  tx: Tx,
  numbers: readonly string[],
  origin: { source: "pool" | "fresh"; requestId: string | null },
): Promise<number> {
  if (numbers.length === 0) return 0;
  const [row] = await tx<{ added: number }[]>`
    with ins as (
      insert into awb_numbers (awb_number, source, request_id)
      select n, ${origin.source}, ${origin.requestId}::text
      from json_array_elements_text(${JSON.stringify(numbers)}::text::json) as t(n)
      where n <> ''
      on conflict (awb_number) do nothing
      returning 1)
    select count(*)::int as added from ins`;
  return row?.added ?? 0;
}

/**
 * How many of these numbers the pool already held from another origin than this fresh
 * request (a replenishment call, or another request): newly minted numbers should never
 * be among them, so the request names them.
 */
export async function heldFromElsewhere(tx: Tx, numbers: readonly string[], requestId: string): Promise<number> {
  if (numbers.length === 0) return 0;
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n
    from json_array_elements_text(${JSON.stringify(numbers)}::text::json) as t(n)
    join awb_numbers a on a.awb_number = t.n
    where a.request_id is distinct from ${requestId}::text`;
  return row?.n ?? 0;
}

/**
 * What top-up planning needs (see plan.ts). A pending fresh request counts as numbers on
 * the way only within the poll give-up window (MAX_POLL_AGE_MS): one whose polling died
 * without an outcome must not hold every later top-up back.
 */
export async function poolSnapshot(sql: Tx): Promise<PoolSnapshot> {
  const [row] = await sql<{ available: number; available_pool: number; pending_fresh: number }[]>`
    select
      count(*)::int as available,
      count(*) filter (where source = 'pool')::int as available_pool,
      (select coalesce(sum(count), 0)::int from awb_requests
       where mode = 'fresh' and status = 'pending'
         and created_at > now() - ${MAX_POLL_AGE_MS}::int * interval '1 millisecond') as pending_fresh
    from awb_numbers
    -- The available numbers only (awb_numbers_available_idx): the table keeps every number
    -- ever allocated, one per order, and counting through them read it all at every top-up.
    where state = 'available'`;
  return {
    available: row?.available ?? 0,
    availablePool: row?.available_pool ?? 0,
    pendingFresh: row?.pending_fresh ?? 0,
  };
}

/**
 * How many numbers the provider counted as our unused pool right after the last
 * replenishment call that minted numbers (it returns every unused number before minting,
 * so that call's answer was the whole unused pool); null when there is none. See plan.ts.
 */
export async function lastKnownUnused(sql: Tx): Promise<number | null> {
  const [row] = await sql<{ received: number }[]>`
    select received from awb_requests
    where mode = 'pool' and status = 'completed' and added > 0
    order by id desc limit 1`;
  return row?.received ?? null;
}

export async function poolCounts(sql: Tx): Promise<{ available: number; allocated: number }> {
  const [row] = await sql<{ available: number; allocated: number }[]>`
    select count(*) filter (where state = 'available')::int as available,
           count(*) filter (where state = 'allocated')::int as allocated
    from awb_numbers`;
  return { available: row?.available ?? 0, allocated: row?.allocated ?? 0 };
}

export type AwbRequestRow = typeof awbRequests.$inferSelect;

/** Every pending request plus the `recent` latest ones, newest first. */
export async function listAwbRequests(sql: Tx, recent = 10): Promise<AwbRequestRow[]> {
  return await sql<AwbRequestRow[]>`
    select * from awb_requests
    where status = 'pending' or id in (select id from awb_requests order by created_at desc, id desc limit ${recent})
    order by created_at desc, id desc`;
}

/** When numbers were last added to the pool (a request that completed with new numbers). */
export async function lastReplenishedAt(sql: Tx): Promise<Date | null> {
  const [row] = await sql<{ at: Date | null }[]>`
    select max(completed_at) as at from awb_requests where status = 'completed' and added > 0`;
  return row?.at ?? null;
}

/** The available level at a time. */
export interface PoolLevel {
  at: Date;
  level: number;
}

/**
 * The available level over the last `hours`: the level at its start, then one point per
 * `stepS`-second bucket in which numbers were added or allocated (the level at the end of
 * that bucket), so at most hours * 3600 / stepS + 1 points. One statement: the level now
 * (an index-only scan of awb_numbers_available_idx), and the changes since the start
 * (+1 at each number's created_at, -1 at each allocated_at) summed per bucket and run
 * backwards from now. The changes since the start come from the indexes on created_at
 * and allocated_at: only the window's rows are read, however many numbers were ever used.
 */
export async function poolLevels(sql: Tx, o: { hours: number; stepS: number }): Promise<{ from: Date; to: Date; points: PoolLevel[] }> {
  const rows = await sql<{ at: Date; level: number; t0: Date; t1: Date }[]>`
    with bounds as materialized (
      select now() as t1, now() - make_interval(hours => ${o.hours}) as t0
    ),
    changes as (
      select a.created_at as at, 1 as d from awb_numbers a, bounds b where a.created_at > b.t0
      union all
      select a.allocated_at, -1 from awb_numbers a, bounds b where a.allocated_at > b.t0
    ),
    buckets as materialized (
      select date_bin(make_interval(secs => ${o.stepS}), at, timestamptz '2000-01-01 00:00:00+00') as at, sum(d)::int as delta
      from changes group by 1
    ),
    now_level as materialized (
      select count(*)::int as n from awb_numbers where state = 'available'
    )
    select 0 as k, b.t0 as at, (n.n - coalesce((select sum(delta) from buckets), 0))::int as level, b.t0, b.t1
    from bounds b cross join now_level n
    union all
    -- The level at the end of each bucket: the level now, less what changed after it.
    select 1, greatest(s.at, b.t0), (n.n - coalesce(sum(s.delta) over (order by s.at desc rows between unbounded preceding and 1 preceding), 0))::int,
           b.t0, b.t1
    from buckets s cross join bounds b cross join now_level n
    order by k, at`;
  const first = rows[0]!;
  return { from: first.t0, to: first.t1, points: rows.map((r) => ({ at: r.at, level: r.level })) };
}

/** How many numbers are available, counting no further than `cap` (a bounded index-only scan of awb_numbers_available_idx). */
export async function availableUpTo(sql: Tx, cap: number): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from (select 1 from awb_numbers where state = 'available' limit ${Math.max(1, cap)}) s`;
  return row?.n ?? 0;
}
