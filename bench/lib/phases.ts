/**
 * The measurements of one run: (a) raw single-row inserts, (b) a bare Hono echo server,
 * (c, d, e) tracklane itself as separate web and worker processes, projecting as it
 * ingests and then draining a backlog left while its worker was stopped, and (f) the same
 * load as (c) on a fresh database with one notification endpoint subscribed to every type.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Sql } from "postgres";
import type { InsertConfig, InsertResult } from "../insert-baseline.ts";
import type { LoadConfig, LoadResult } from "../load.ts";
import { ROOT, SERVICE_NODE_ARGS, cpuSeconds, interruption, procMemMiB, procPssMiB, runForked, startForkedServer, startService } from "./processes.ts";
import type { ForkedServer, ServiceProcess } from "./processes.ts";
import type { ReceiverReport } from "../receiver.ts";
import { clientOrderId, expectedStatus, totalRequests } from "./scenario.ts";
import { driverSql } from "../../src/db/client.ts";
import { partitionsSince } from "./scratch.ts";
import type { Scenario } from "./scenario.ts";
import { percentile } from "./stats.ts";

export const CALLBACK_SECRET = "bench-callback-secret-0123456789";
const API_TOKEN = "bench-api-token-0123456789abcdef";

export interface BenchOptions {
  connections: number;
  durationS: number;
  warmupS: number;
  /** Events (over a tenth as many orders) already in the database before tracklane starts. */
  historyEvents: number;
  /**
   * Months the history's orders spread over, one status partition each (location
   * partitions only for the last 30 days, as location retention leaves them): the
   * partitions a log kept that long has.
   */
  historyMonths: number;
  orders: number;
  eventsPerOrder: number;
  dupEvery: number;
  drainTimeoutS: number;
  /** Phase (f): how long the deliveries may take after the projection has drained. */
  deliveryTimeoutS: number;
  cpuProf: boolean;
  /** tracklane as `npm start` runs it (web and worker in one process) instead of two processes. */
  singleProcess: boolean;
  resultsDir: string;
  stamp: string;
}

export interface HttpPhase {
  requestsPerS: number;
  ok: number;
  non2xx: number;
  errors: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** CPU microseconds per request: the server process and the load generator. */
  serverCpuUs?: number;
  loadCpuUs: number;
}

/** (a): single-row INSERT + commit per row, `connections` at once, through postgres.js. */
export async function insertBaseline(url: string, o: BenchOptions): Promise<InsertResult> {
  const sql = driverSql(url, { max: 1 });
  try {
    await sql`drop table if exists bench_raw_events`;
    await sql`create table bench_raw_events (like order_events including all)`;
    const config: InsertConfig = {
      url,
      table: "bench_raw_events",
      connections: o.connections,
      warmupS: o.warmupS,
      durationS: o.durationS,
      // Enough distinct rows for any duration.
      scenario: { orders: 10_000, eventsPerOrder: 1000, prefix: "RAW", dupEvery: 0, svcBase: 1_000_000 },
    };
    return await runForked<InsertResult>("bench/insert-baseline.ts", config);
  } finally {
    await sql`drop table if exists bench_raw_events`;
    await sql.end();
  }
}

function httpSummary(r: LoadResult): HttpPhase {
  return {
    requestsPerS: r.ok / r.elapsedS,
    ok: r.ok,
    non2xx: r.non2xx,
    errors: r.errors + r.timeouts,
    latencyP50Ms: r.latency.p50,
    latencyP99Ms: r.latency.p99,
    loadCpuUs: (r.cpuS * 1e6) / r.ok,
  };
}

/** (b): the same load generator and bodies against a bare Hono JSON echo endpoint. */
export async function echoBaseline(o: BenchOptions): Promise<HttpPhase> {
  const server = await startForkedServer("bench/echo-server.ts");
  try {
    const scenario: Scenario = { orders: o.orders, eventsPerOrder: o.eventsPerOrder, prefix: "ECHO", dupEvery: o.dupEvery, svcBase: 2_000_000 };
    const base = { url: server.url, pathPrefix: `/callbacks/${CALLBACK_SECRET}`, connections: o.connections, scenario, record: false };
    if (o.warmupS > 0) await runForked<LoadResult>("bench/load.ts", { ...base, durationS: o.warmupS } satisfies LoadConfig);
    const cpu = cpuSeconds(server.pid);
    const result = await runForked<LoadResult>("bench/load.ts", { ...base, durationS: o.durationS } satisfies LoadConfig);
    return { ...httpSummary(result), serverCpuUs: ((cpuSeconds(server.pid) - cpu) * 1e6) / result.ok };
  } finally {
    await server.stop();
  }
}

export interface TracklanePhase extends HttpPhase {
  requests: number;
  acked: number;
  duplicatesAcked: number;
  ingestS: number;
  /** Mean events per group-commit flush during the measured load (web's own histogram). */
  meanBatchSize: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** Last acknowledgement -> every order's row reflects all its events. */
  drainS: number;
  drained: boolean;
  rssWebMiB: number;
  rssWorkerMiB: number;
  /** Peaks of the service processes' memory taken together (sampled at the same instants). */
  together: { rssMiB: number; pssMiB: number };
  /** The same load again with the worker stopped, then a fresh worker drains it (two-process runs only). */
  backlog: BacklogPhase | undefined;
  /** CPU seconds used while ingesting (load start to last ack) and while draining after it. */
  cpu: { ingest: CpuSplit; drain: CpuSplit };
  checks: { ordersProjected: number; wrongStatus: number; wrongCount: number; ackedButMissing: number; storedEvents: number };
  profiles: string[];
  /** The web and worker processes' output (kept only with BENCH_KEEP_LOGS=1). */
  logFile: string;
  /** pg_stat_user_tables over the measured load and drain: scans and row churn per table. */
  tables: Record<string, unknown>[];
  /** Phase (f) only: the notifications sent to the one subscribed endpoint. */
  notify: NotifyPhase | undefined;
}

/**
 * Phase (f): what one endpoint subscribed to every type received. "Measured" figures are
 * about the messages of the measured load's orders; the counts check every message of the
 * database (the warm-up's included).
 */
export interface NotifyPhase {
  /** Messages about the measured load's orders, and by type. */
  messages: number;
  messagesByType: Record<string, number>;
  /** Per acknowledged (non-duplicate) event. */
  messagesPerEvent: number;
  /**
   * Delivery lag of the measured messages, ms: from their transaction's commit (a deferred
   * trigger's clock_timestamp(), see installCommitLog) to the receiver holding the body.
   */
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** The same from notification_messages.created_at, the transaction's start (now()). */
  lagFromStartP50Ms: number;
  lagFromStartP99Ms: number;
  /** created_at to commit: how much the transaction's start understates the commit. */
  startToCommitP50Ms: number;
  startToCommitP99Ms: number;
  /** Measured messages whose commit time was not recorded (lag then from created_at). */
  withoutCommitTime: number;
  /** Last measured message received, seconds after the load's last acknowledgement. */
  lastArrivalAfterAckS: number;
  /** Measured messages received per second, first to last arrival. */
  deliveredPerS: number;
  /** Every delivery finished (delivered or failed) within deliveryTimeoutS. */
  settled: boolean;
  checks: {
    /** Every notification_messages row of the database (warm-up included). */
    allMessages: number;
    /** Of them received at least once (by webhook-id), and never received. */
    received: number;
    missing: number;
    /** POSTs that reached the receiver in all (repeats included), and without a webhook-id. */
    arrivals: number;
    withoutId: number;
    /** notification_deliveries by status, and their HTTP attempts in all. */
    delivered: number;
    failed: number;
    pending: number;
    attempts: number;
  };
  /** The receiver's own CPU per message received, µs (its own process: in no other figure). */
  receiverCpuUs: number;
}

export interface BacklogPhase {
  /** Callbacks acknowledged per second while no worker runs (nothing competes with ingestion). */
  ackedPerS: number;
  ackP99Ms: number;
  /** Events queued for projection when the worker starts. */
  queued: number;
  /** From starting the worker process to every queued event merged into its order. */
  drainS: number;
  /** Of which the worker's start (node, modules, connections) until it runs jobs. */
  startS: number;
  drained: boolean;
  cpu: CpuSplit;
  checks: { ordersProjected: number; wrongStatus: number; wrongCount: number };
}

export interface CpuSplit {
  web: number;
  worker: number;
  /** PostgreSQL backends serving the bench database. */
  postgres: number;
  /** The same, by the client's application_name ("" for graphile-worker's own pool). */
  postgresBy: Record<string, number>;
  load: number;
}

/** CPU seconds so far of web, worker and this database's backends, by pid. */
interface CpuSnapshot {
  web: number;
  worker: number;
  backends: Map<number, { app: string; s: number }>;
}

async function cpuSnapshot(sql: Sql, web: number, worker: number | undefined): Promise<CpuSnapshot> {
  const rows = await sql<{ pid: number; app: string }[]>`
    select pid, application_name as app from pg_stat_activity
    where datname = current_database() and pid <> pg_backend_pid() and application_name <> ${BENCH_APP}`;
  return { web: cpuSeconds(web), worker: worker === undefined ? 0 : cpuSeconds(worker), backends: new Map(rows.map(({ pid, app }) => [pid, { app, s: cpuSeconds(pid) }])) };
}

function cpuBetween(a: CpuSnapshot, b: CpuSnapshot, load: number): CpuSplit {
  let postgres = 0;
  const postgresBy: Record<string, number> = {};
  for (const [pid, { app, s }] of b.backends) {
    const used = s - (a.backends.get(pid)?.s ?? 0);
    postgres += used;
    postgresBy[app] = (postgresBy[app] ?? 0) + used;
  }
  return { web: b.web - a.web, worker: b.worker - a.worker, postgres, postgresBy, load };
}

/** application_name of the bench's own connections: their backends are not tracklane's CPU. */
const BENCH_APP = "tracklane-bench";

/**
 * Records every write of an order row (insert or update) with the time it happened. One
 * trigger call per statement, reading the statement's rows from its transition table: as
 * a row trigger it cost PostgreSQL about 20 µs per order row written (`EXPLAIN ANALYZE` of
 * the projection's write), which the bench counted as tracklane's.
 */
async function installUpdateLog(sql: Sql): Promise<void> {
  await sql.unsafe(`
    create unlogged table if not exists bench_order_updates (
      client_order_id text, event_count int, at timestamptz not null default clock_timestamp());
    create or replace function bench_log_order_write() returns trigger language plpgsql as $$
    begin
      insert into bench_order_updates (client_order_id, event_count) select client_order_id, event_count from written;
      return null;
    end $$;
    drop trigger if exists bench_order_writes on orders;
    drop trigger if exists bench_order_inserts on orders;
    drop trigger if exists bench_order_updates on orders;
    create trigger bench_order_inserts after insert on orders referencing new table as written
      for each statement execute function bench_log_order_write();
    create trigger bench_order_updates after update on orders referencing new table as written
      for each statement execute function bench_log_order_write();`);
}

/**
 * Phase (f): the commit time of every transaction that writes notification messages.
 * notification_messages.created_at is `now()`, the transaction's start; a deferred
 * constraint trigger runs at COMMIT, after the transaction's last statement and just
 * before its commit record is flushed, so its clock_timestamp() is the commit less the
 * flush. It fires for each message row but writes once per transaction (a transaction-
 * local flag), keyed by the transaction's start time, which is every one of its messages'
 * created_at (a savepoint's rows included, unlike xmin). (track_commit_timestamp would
 * give the commit itself, but needs a server restart.)
 */
async function installCommitLog(sql: Sql): Promise<void> {
  await sql.unsafe(`
    create unlogged table if not exists bench_message_commits (
      started_at timestamptz primary key, committed_at timestamptz not null);
    create or replace function bench_log_message_commit() returns trigger language plpgsql as $$
    begin
      if current_setting('bench.commit_logged', true) = 'y' then return null; end if;
      perform set_config('bench.commit_logged', 'y', true);
      insert into bench_message_commits (started_at, committed_at) values (now(), clock_timestamp())
        on conflict (started_at) do nothing;
      return null;
    end $$;
    drop trigger if exists bench_message_commits on notification_messages;
    create constraint trigger bench_message_commits after insert on notification_messages
      deferrable initially deferred for each row execute function bench_log_message_commit();`);
}

/** Phase (f): one endpoint for the receiver, subscribed to every type, through the API. */
async function subscribe(webUrl: string, receiverUrl: string): Promise<string> {
  const res = await fetch(`${webUrl}/v1/notifications/endpoints`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ url: `${receiverUrl}/hooks`, description: "bench receiver" }),
  });
  const body = (await res.json()) as { id?: string };
  if (res.status !== 201 || !body.id) throw new Error(`creating the bench's notification endpoint: ${res.status} ${JSON.stringify(body)}`);
  return body.id;
}

/** Phase (f): delivery lag and counts, from the receiver's arrivals and the database. */
async function notifyFigures(
  sql: Sql,
  prefix: string,
  receiver: ReceiverReport,
  load: LoadResult,
  events: number,
  settled: boolean,
): Promise<NotifyPhase> {
  const arrived = new Map<string, number>();
  receiver.ids.forEach((id, i) => arrived.set(id, receiver.firstAt[i]!));
  const measured = await sql<{ id: string; type: string; started: number; committed: number | null }[]>`
    select m.id, m.type, (extract(epoch from m.created_at) * 1000)::float8 as started,
           (extract(epoch from c.committed_at) * 1000)::float8 as committed
    from notification_messages m left join bench_message_commits c on c.started_at = m.created_at
    where m.client_order_id like ${`${prefix}-%`}`;
  const lags: number[] = [];
  const fromStart: number[] = [];
  const startToCommit: number[] = [];
  const byType: Record<string, number> = {};
  let withoutCommitTime = 0;
  let firstArrival = Infinity;
  let lastArrival = 0;
  for (const m of measured) {
    byType[m.type] = (byType[m.type] ?? 0) + 1;
    if (m.committed === null) withoutCommitTime++;
    else startToCommit.push(m.committed - m.started);
    const at = arrived.get(m.id);
    if (at === undefined) {
      lags.push(Infinity);
      fromStart.push(Infinity);
      continue;
    }
    firstArrival = Math.min(firstArrival, at);
    lastArrival = Math.max(lastArrival, at);
    lags.push(at - (m.committed ?? m.started));
    fromStart.push(at - m.started);
  }
  for (const list of [lags, fromStart, startToCommit]) list.sort((x, y) => x - y);

  const all = await sql<{ id: string }[]>`select id from notification_messages`;
  const missing = all.filter((m) => !arrived.has(m.id)).length;
  const [d] = await sql<{ delivered: number; failed: number; pending: number; attempts: number }[]>`
    select count(*) filter (where status = 'delivered')::int as delivered, count(*) filter (where status = 'failed')::int as failed,
           count(*) filter (where status = 'pending')::int as pending, coalesce(sum(attempts), 0)::int as attempts
    from notification_deliveries`;
  return {
    messages: measured.length,
    messagesByType: byType,
    messagesPerEvent: measured.length / events,
    lagP50Ms: percentile(lags, 50),
    lagP99Ms: percentile(lags, 99),
    lagMaxMs: lags.at(-1) ?? NaN,
    lagFromStartP50Ms: percentile(fromStart, 50),
    lagFromStartP99Ms: percentile(fromStart, 99),
    startToCommitP50Ms: percentile(startToCommit, 50),
    startToCommitP99Ms: percentile(startToCommit, 99),
    withoutCommitTime,
    lastArrivalAfterAckS: lastArrival > 0 ? (lastArrival - load.endedAt) / 1000 : NaN,
    deliveredPerS: lastArrival > firstArrival ? measured.length / ((lastArrival - firstArrival) / 1000) : NaN,
    settled,
    checks: {
      allMessages: all.length,
      received: all.length - missing,
      missing,
      arrivals: receiver.arrivals,
      withoutId: receiver.withoutId,
      delivered: d!.delivered,
      failed: d!.failed,
      pending: d!.pending,
      attempts: d!.attempts,
    },
    receiverCpuUs: receiver.ids.length > 0 ? (receiver.cpuS * 1e6) / receiver.arrivals : NaN,
  };
}

/**
 * A database that has served orders before: `events` events over `events / 10` orders,
 * written straight in SQL (they stand for history; their projections are plain rows),
 * then ANALYZE. A fresh, empty database would make PostgreSQL plan every query for tiny
 * tables and keep those plans while the measured load grows them a hundredfold.
 *
 * The orders' first events spread evenly over the last `months` × 30 days, each order's
 * ten events a minute apart. Status partitions cover the whole stretch; location ones only
 * the last 30 days, and the location events of older orders are left out, as location
 * retention (LOCATION_RETENTION_DAYS, 30) would have dropped them.
 */
async function seedHistory(sql: Sql, events: number, months: number): Promise<void> {
  if (events <= 0) return;
  const orders = Math.max(1, Math.floor(events / 10));
  const days = Math.max(1, months) * 30;
  const span = `${days} days`;
  const locationSince = new Date(Date.now() - 31 * 86_400_000);
  await partitionsSince(sql, new Date(Date.now() - (days + 1) * 86_400_000), ["status"]);
  await partitionsSince(sql, locationSince, ["location"]);
  // Order k's first event: its period is that event's UTC day.
  const first = sql`now() - ${span}::interval + k * (${span}::interval / ${orders})`;
  await sql`
    insert into order_periods (order_key, period)
    select (5000000 + k)::text, ((${first}) at time zone 'UTC')::date
    from generate_series(0, ${orders - 1}) as k`;
  await sql`
    insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload, period)
    select md5('history' || i), 'provider', kind,
           (5000000 + k)::text, 'H-' || k, case when kind = 'status' then 'DELIVERED' end, at, at,
           jsonb_build_object('sfx_order_id', 5000000 + k, 'client_order_id', 'H-' || k,
             'rider_id', 1000 + i % 500, 'rider_name', 'Rider ' || (1000 + i % 500), 'rider_contact', '9800000000',
             'rider_latitude', 12.9 + (i % 1000) / 10000.0, 'rider_longitude', 77.5 + (i % 1000) / 10000.0,
             'timestamp', at),
           (t0 at time zone 'UTC')::date
    from generate_series(0, ${events - 1}) as i,
         lateral (select i % ${orders} as k, i / ${orders} as step) o,
         lateral (select ${first} as t0) f,
         lateral (select t0 + step * interval '1 minute' as at,
                         case when i % 10 in (0, 3, 6, 9) then 'status' else 'location' end as kind) e
    where kind = 'status' or t0 >= ${locationSince}`;
  await sql`
    insert into orders (client_order_id, svc_order_id, status, provider_status, status_at, rider_id, rider_name,
                        event_count, last_event_at, created_at, updated_at)
    select 'H-' || k, (5000000 + k)::text, 'DELIVERED', 'DELIVERED', t0 + interval '9 minutes', (1000 + k % 500)::text,
           'Rider ' || (1000 + k % 500), case when t0 >= ${locationSince} then 10 else 4 end, t0 + interval '9 minutes', t0, t0 + interval '9 minutes'
    from generate_series(0, ${orders - 1}) as k, lateral (select ${first} as t0) f`;
  await sql`analyze`;
}

/**
 * Projection work not yet done: queued events or single-order retry jobs. Asked every
 * 100 ms while a backlog drains: `exists`, not a count of a queue of 100,000 rows, so that
 * the poll takes next to nothing from the processors the drain runs on.
 */
async function projectionsPending(sql: Sql): Promise<boolean> {
  const [row] = await sql<{ pending: boolean }[]>`
    select exists (select from projection_queue)
        or exists (select from graphile_worker.jobs where task_identifier = 'order__project' and attempts < max_attempts) as pending`;
  return row!.pending;
}

/** How many events wait in the projection queue (counted once, when a backlog starts). */
async function queuedEvents(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from projection_queue`;
  return row!.n;
}

async function waitForDrain(sql: Sql, timeoutS: number): Promise<boolean> {
  return await waitUntil(timeoutS, async () => !(await projectionsPending(sql)));
}

/** Every notification delivery delivered or failed for good (the partial index of due ones answers). */
async function waitForDeliveries(sql: Sql, timeoutS: number): Promise<boolean> {
  return await waitUntil(timeoutS, async () => {
    const [row] = await sql<{ waiting: boolean }[]>`select exists (select from notification_deliveries where status = 'pending') as waiting`;
    return !row!.waiting;
  });
}

async function waitUntil(timeoutS: number, done: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + timeoutS * 1000;
  while (Date.now() < deadline) {
    if (interruption.signal.aborted) throw new Error("interrupted");
    if (await done()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** Sum and count of the web process's ingest batch-size histogram. */
async function batchStats(webUrl: string): Promise<{ sum: number; count: number }> {
  const text = await (await fetch(`${webUrl}/metrics`)).text();
  const pick = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? NaN);
  return { sum: pick("tracklane_ingest_batch_size_sum"), count: pick("tracklane_ingest_batch_size_count") };
}

interface Lag {
  lags: number[];
  allProjectedAt: number;
}

/**
 * Projection lag per acknowledged event: from its 200 to the first write of its order's
 * row whose event_count covers it. An order's events are ~`orders` requests apart, so
 * they commit in id order and "the k-th event is in" is "event_count >= k".
 */
async function projectionLag(sql: Sql, prefix: string, acks: Map<string, number>): Promise<Lag> {
  const events = await sql<{ id: string; coid: string; rank: number }[]>`
    select id::text, client_order_id as coid,
           (row_number() over (partition by client_order_id order by id))::int as rank
    from order_events where client_order_id like ${`${prefix}-%`}`;
  const writes = await sql<{ coid: string; n: number; at: number }[]>`
    select client_order_id as coid, event_count as n, (extract(epoch from at) * 1000)::float8 as at
    from bench_order_updates where client_order_id like ${`${prefix}-%`} order by at`;
  const byOrder = new Map<string, { n: number; at: number }[]>();
  for (const w of writes) {
    let list = byOrder.get(w.coid);
    if (!list) byOrder.set(w.coid, (list = []));
    list.push({ n: w.n, at: w.at });
  }
  const finalCount = new Map<string, number>();
  for (const e of events) finalCount.set(e.coid, Math.max(finalCount.get(e.coid) ?? 0, e.rank));
  const lags: number[] = [];
  for (const e of events) {
    const acked = acks.get(e.id);
    if (acked === undefined) continue;
    const covering = byOrder.get(e.coid)?.find((w) => w.n >= e.rank);
    lags.push(covering ? Math.max(0, covering.at - acked) : Infinity);
  }
  let allProjectedAt = 0;
  for (const [coid, n] of finalCount) {
    const done = byOrder.get(coid)?.find((w) => w.n >= n);
    allProjectedAt = Math.max(allProjectedAt, done ? done.at : Infinity);
  }
  lags.sort((x, y) => x - y);
  return { lags, allProjectedAt };
}

/** Peak memory of the service processes together: RSS and PSS summed at the same instants. */
function sampleTogether(processes: () => readonly ServiceProcess[]) {
  const peak = { rssMiB: 0, pssMiB: 0 };
  const timer = setInterval(() => {
    let rss = 0;
    let pss = 0;
    for (const p of processes()) {
      const r = procMemMiB(p.pid, "VmRSS");
      const q = procPssMiB(p.pid);
      if (Number.isFinite(r)) rss += r;
      if (Number.isFinite(q)) pss += q;
    }
    peak.rssMiB = Math.max(peak.rssMiB, rss);
    peak.pssMiB = Math.max(peak.pssMiB, pss);
  }, 250);
  timer.unref();
  return () => {
    clearInterval(timer);
    return peak;
  };
}

/** Orders of a scenario in their expected end state, and how many are not. */
async function checkOrders(sql: Sql, scenario: Scenario, eventsPerOrder: number) {
  const orders = await sql<{ coid: string; status: string | null; event_count: number }[]>`
    select client_order_id as coid, status, event_count from orders where client_order_id like ${`${scenario.prefix}-%`}`;
  let wrongStatus = 0;
  let wrongCount = 0;
  for (const row of orders) {
    const n = Number(row.coid.slice(scenario.prefix.length + 1));
    if (row.coid !== clientOrderId(scenario, n) || row.status !== expectedStatus(n)) wrongStatus++;
    if (row.event_count !== eventsPerOrder) wrongCount++;
  }
  return { ordersProjected: orders.length, wrongStatus, wrongCount };
}

export interface TracklaneVariant {
  /** Phase (f): one notification endpoint, subscribed to every type, at a receiver of its own. */
  notify: boolean;
  /** The backlog measurement after the load (two-process runs). */
  backlog: boolean;
}

/**
 * (c, d, e): tracklane's web and worker processes under the scenario's load; with
 * `variant.notify`, phase (f): the same with one subscribed endpoint.
 */
export async function tracklanePhase(url: string, o: BenchOptions, run: number, variant: TracklaneVariant): Promise<TracklanePhase> {
  const sql = driverSql(url, { max: 2, connection: { application_name: BENCH_APP } });
  const services: ServiceProcess[] = [];
  let receiver: ForkedServer | undefined;
  // The services' data directory and logs (info level, as deployed: one line per job).
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-bench-"));
  let succeeded = false;
  const profiles: string[] = [];
  try {
    await seedHistory(sql, o.historyEvents, o.historyMonths);
    await installUpdateLog(sql);
    if (variant.notify) {
      await installCommitLog(sql);
      receiver = await startForkedServer("bench/receiver.ts");
    }
    const env: Record<string, string> = {
      ...(process.env as Record<string, string>),
      DATABASE_URL: url,
      PORT: "0",
      // npm start's built-in emulator (single-process runs): any free port.
      EMULATOR_PORT: "0",
      HOST: "127.0.0.1",
      CALLBACK_SECRET,
      API_TOKEN,
      LOG_LEVEL: "info",
      DATA_DIR: dataDir,
      // (f): the receiver is on loopback.
      ...(variant.notify ? { NOTIFY_ALLOW_PRIVATE_URLS: "true" } : {}),
    };
    const prof = (name: string) => {
      if (!o.cpuProf) return [];
      const file = `${o.stamp}-run${run}${variant.notify ? "-notify" : ""}-${name}.cpuprofile`;
      profiles.push(resolve(o.resultsDir, file));
      return ["--cpu-prof", "--cpu-prof-dir", o.resultsDir, "--cpu-prof-name", file];
    };
    const logFile = join(dataDir, "services.log");
    // Started with the node flags of the package's scripts (`npm run web`, …), as deployed.
    const start = (name: string, script: string, readyMsg: string) =>
      startService({ name, script, env, nodeArgs: [...SERVICE_NODE_ARGS, ...prof(name)], logFile, readyMsg });
    // In one process (npm start) the "web" figures are the whole service's, the worker's 0.
    const worker = o.singleProcess ? undefined : await start("worker", "src/worker.ts", "worker running");
    if (worker) services.push(worker);
    const web = o.singleProcess ? await start("tracklane", "src/main.ts", "tracklane running") : await start("web", "src/web.ts", "web listening");
    services.push(web);
    const stopSampling = sampleTogether(() => services);
    const webUrl = web.ready["url"] as string;
    const base = { url: webUrl, pathPrefix: `/callbacks/${CALLBACK_SECRET}`, connections: o.connections };
    if (receiver) await subscribe(webUrl, receiver.url);

    // Warm-up on orders of their own, projected and analysed before the clock starts
    // (a running service has statistics and warm code).
    if (o.warmupS > 0) {
      const warm: Scenario = { orders: 1000, eventsPerOrder: o.eventsPerOrder, prefix: "WARM", dupEvery: o.dupEvery, svcBase: 3_000_000 };
      await runForked<LoadResult>("bench/load.ts", { ...base, durationS: o.warmupS, scenario: warm, record: false } satisfies LoadConfig);
      await waitForDrain(sql, o.drainTimeoutS);
      if (variant.notify) await waitForDeliveries(sql, o.deliveryTimeoutS);
      await sql`analyze`;
    }

    const scenario: Scenario = { orders: o.orders, eventsPerOrder: o.eventsPerOrder, prefix: "B", dupEvery: o.dupEvery, svcBase: 7_000_000 };
    const before = await batchStats(webUrl);
    // Table statistics of this run only (needs the right to reset them; best effort).
    await sql`select pg_stat_reset()`.catch(() => undefined);
    const cpu0 = await cpuSnapshot(sql, web.pid, worker?.pid);
    const load = await runForked<LoadResult>("bench/load.ts", {
      ...base,
      amount: totalRequests(scenario),
      scenario,
      record: true,
    } satisfies LoadConfig);
    const cpu1 = await cpuSnapshot(sql, web.pid, worker?.pid);
    const after = await batchStats(webUrl);
    const drained = await waitForDrain(sql, o.drainTimeoutS);
    // (f): the drain includes the deliveries (the worker's CPU for them counts).
    const settled = variant.notify ? await waitForDeliveries(sql, o.deliveryTimeoutS) : true;
    const cpu2 = await cpuSnapshot(sql, web.pid, worker?.pid);
    const received = receiver ? await receiver.request<ReceiverReport>("report") : undefined;

    const acks = new Map<string, number>();
    for (const a of load.acks) if (!a.duplicate) acks.set(a.eventId, a.at);
    const lag = await projectionLag(sql, scenario.prefix, acks);

    const projected = await checkOrders(sql, scenario, o.eventsPerOrder);
    const ackedIds = [...acks.keys()];
    const [found] = await sql<{ n: number }[]>`select count(*)::int as n from order_events where id = any(${ackedIds}::bigint[])`;
    const [stored] = await sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id like ${`${scenario.prefix}-%`}`;

    const tables = await sql`
      select relname, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
             n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
      from pg_stat_user_tables where relname not like 'bench_%' order by relname`;
    const notify = received ? await notifyFigures(sql, scenario.prefix, received, load, acks.size, settled) : undefined;

    // A backlog: the same load again while no worker runs, then a fresh worker process
    // drains it (what a worker outage, a deploy or a burst beyond the projection's pace
    // leaves behind).
    let backlog: BacklogPhase | undefined;
    let rssWorkerMiB = worker?.peakRssMiB() ?? 0;
    if (worker && variant.backlog) {
      await worker.stop();
      const backlogScenario: Scenario = { ...scenario, prefix: "K", svcBase: 8_000_000 };
      const ingested = await runForked<LoadResult>("bench/load.ts", {
        ...base,
        amount: totalRequests(backlogScenario),
        scenario: backlogScenario,
        record: false,
      } satisfies LoadConfig);
      const queued = await queuedEvents(sql);
      const before = await cpuSnapshot(sql, web.pid, undefined);
      const startedAt = Date.now();
      const fresh = await start("backlog-worker", "src/worker.ts", "worker running");
      services.push(fresh);
      const readyAt = Date.now();
      const backlogDrained = await waitForDrain(sql, o.drainTimeoutS);
      const doneAt = Date.now();
      const after = await cpuSnapshot(sql, web.pid, fresh.pid);
      backlog = {
        ackedPerS: ingested.ok / ingested.elapsedS,
        ackP99Ms: ingested.latency.p99,
        queued,
        drainS: (doneAt - startedAt) / 1000,
        startS: (readyAt - startedAt) / 1000,
        drained: backlogDrained,
        cpu: cpuBetween(before, after, 0),
        checks: await checkOrders(sql, backlogScenario, o.eventsPerOrder),
      };
      rssWorkerMiB = Math.max(rssWorkerMiB, fresh.peakRssMiB());
    }
    succeeded = true;
    const rssWebMiB = web.peakRssMiB();
    const together = stopSampling();
    return {
      ...httpSummary(load),
      requests: load.requests,
      acked: load.ok,
      duplicatesAcked: load.acks.filter((a) => a.duplicate).length,
      ingestS: load.elapsedS,
      meanBatchSize: (after.sum - before.sum) / (after.count - before.count),
      lagP50Ms: percentile(lag.lags, 50),
      lagP99Ms: percentile(lag.lags, 99),
      lagMaxMs: lag.lags.at(-1) ?? NaN,
      drainS: Math.max(0, lag.allProjectedAt - load.endedAt) / 1000,
      drained,
      rssWebMiB,
      rssWorkerMiB,
      together,
      backlog,
      cpu: { ingest: cpuBetween(cpu0, cpu1, load.cpuS), drain: cpuBetween(cpu1, cpu2, 0) },
      checks: {
        ...projected,
        ackedButMissing: ackedIds.length - found!.n,
        storedEvents: stored!.n,
      },
      profiles,
      logFile,
      tables: tables.map((t) => ({ ...t })),
      notify,
    };
  } catch (err) {
    console.error(`tracklane phase failed; the services' logs are in ${dataDir}`);
    throw err;
  } finally {
    // Web first (stop taking callbacks), then the worker; profiles are written on exit.
    for (const s of services.reverse()) await s.stop();
    await receiver?.stop();
    await sql.end();
    if (succeeded && !process.env.BENCH_KEEP_LOGS) rmSync(dataDir, { recursive: true, force: true });
  }
}

export { ROOT };
