/**
 * `npm run bench:scale [-- --sizes 1000000,10000000 --ingest-s 15 --connections 64 --samples 200]`:
 * how tracklane holds up as the event log grows (bench/README.md, "At scale").
 *
 * For the empty log and then each size (events in the log), ascending:
 *   1. the log is filled up to the size in SQL (INSERT … SELECT, server-side: no HTTP), as
 *      orders of 40 events (4 statuses, 36 rider locations) over the days that many events
 *      take at 4 million a day, plus one order of 3,000 events; its bytes per event on disk
 *      (table and indexes) and in WAL are measured; then VACUUM (ANALYZE), as autovacuum
 *      would have run on a log that old;
 *   2. `npm run rebuild` re-derives every order (time per million events);
 *   3. web and worker start as `npm run web` / `npm run worker` do, and are measured warm
 *      (after a warm-up of every request): callbacks for new orders for `--ingest-s` seconds
 *      (acknowledged/s, ack p99), order lookups by either id, each list filter (one that
 *      matches nothing among them), a timeline's first and last page;
 *   4. then cold: services stopped, PostgreSQL restarted (the embedded server, or the
 *      command in BENCH_RESTART_PG for DATABASE_URL's), the OS page cache dropped
 *      (/proc/sys/vm/drop_caches, as root), services started, the same measured again.
 *      When either cannot be done the report says so.
 *
 * Prints one table and writes bench/results/<stamp>-scale.json.
 */
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Sql } from "postgres";
import { runMigrations } from "../src/db/migrate.ts";
import { createLogger } from "../src/logger.ts";
import { commandLine, refuseCommandLine } from "../src/runtime/cli.ts";
import type { LoadConfig, LoadResult } from "./load.ts";
import { describeMachine } from "./lib/machine.ts";
import { ROOT, SERVICE_NODE_ARGS, runForked, startService, stopChildrenOnSignal } from "./lib/processes.ts";
import type { ServiceProcess } from "./lib/processes.ts";
import { driverSql } from "../src/db/client.ts";
import { withDatabase } from "../src/db/url.ts";
import { benchServer, logSize, partitionsSince } from "./lib/scratch.ts";
import { percentile } from "./lib/stats.ts";

const USAGE = "usage: npm run bench:scale [-- --sizes 1000000,10000000 --ingest-s 15 --connections 64 --samples 200]\n  (bench/README.md, \"At scale\")";
const args = commandLine(
  USAGE,
  { sizes: { type: "string" }, "ingest-s": { type: "string" }, connections: { type: "string" }, samples: { type: "string" } },
);
const SIZES = (args.sizes ?? process.env.BENCH_SIZES ?? "1000000").split(",").map((s) => Number(s.trim()));
const INGEST_S = Number(args["ingest-s"] ?? 15);
const CONNECTIONS = Number(args.connections ?? 64);
/**
 * Requests per read measured. A p99 needs a few hundred: of 50 requests it is the slowest
 * one, which with a cold cache is the first (whatever the log's size).
 */
const SAMPLES = Number(args.samples ?? 200);
const EVENTS_PER_ORDER = 40;
const BIG_ORDER_EVENTS = 3000;
const API_TOKEN = "bench-scale-token-0123456789ab";
const CALLBACK_SECRET = "bench-scale-secret-0123456789ab";
const log = createLogger({ level: "warn" });

if (SIZES.some((s) => !Number.isInteger(s) || s < 0)) refuseCommandLine("--sizes must be whole numbers of events, comma-separated", USAGE);
for (const [flag, n] of [["--ingest-s", INGEST_S], ["--connections", CONNECTIONS], ["--samples", SAMPLES]] as const) {
  if (!Number.isInteger(n) || n < 1) refuseCommandLine(`${flag} must be a whole number from 1`, USAGE);
}

/** Events `from` … `to`-1 of the synthetic log: order `i / 40`, step `i % 40`, 4 million a day ending now. */
async function fillLog(sql: Sql, from: number, to: number, total: number): Promise<void> {
  const CHUNK = 500_000;
  // The UTC day of an order's first event: its period (order_periods), as the append records it.
  await sql.unsafe(`
    create or replace function pg_temp.first_day(o bigint) returns date language sql stable
    as $$ select ((now() - (${Number(total)} - o * ${EVENTS_PER_ORDER}) * (interval '1 day' / 4000000)) at time zone 'UTC')::date $$`);
  await partitionsSince(sql, new Date(Date.now() - (total / 4_000_000) * 86_400_000 - 86_400_000));
  for (let start = from; start < to; start += CHUNK) {
    const end = Math.min(to, start + CHUNK);
    await sql`
      insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload, period)
      select md5('scale' || i), 'provider', case when s in (0, 12, 24, 39) then 'status' else 'location' end,
             (10000000 + o)::text, 'L-' || o,
             case s when 0 then 'ALLOTTED' when 12 then 'ARRIVED' when 24 then 'DISPATCHED' when 39 then 'DELIVERED' end,
             at, at,
             jsonb_build_object('sfx_order_id', 10000000 + o, 'client_order_id', 'L-' || o, 'rider_id', 3000 + o % 900,
               'rider_name', 'Rider ' || (3000 + o % 900), 'rider_contact', '98' || lpad((o % 100000000)::text, 8, '0'),
               'rider_latitude', 12.9 + (o % 997) / 10000.0 + s / 2000.0, 'rider_longitude', 77.5 + (o % 991) / 10000.0 + s / 3000.0,
               'timestamp', at),
             pg_temp.first_day(o)
      from generate_series(${start}::bigint, ${end - 1}::bigint) as i,
           lateral (select i / ${EVENTS_PER_ORDER} as o, i % ${EVENTS_PER_ORDER} as s) k,
           lateral (select now() - (${total} - i) * (interval '1 day' / 4000000) as at) t`;
    await sql`
      insert into order_periods (order_key, period)
      select (10000000 + o)::text, pg_temp.first_day(o) from generate_series(${Math.floor(start / EVENTS_PER_ORDER)}::bigint, ${Math.floor((end - 1) / EVENTS_PER_ORDER)}::bigint) as o
      on conflict do nothing`;
    process.stdout.write(`\r  log: ${end.toLocaleString("en")} events`);
  }
  process.stdout.write("\n");
}

/** The one long order: 3,000 events (statuses first, then locations) over the last two hours. */
async function bigOrder(sql: Sql): Promise<void> {
  await sql`
    insert into order_periods (order_key, period) values ('9999999', (now() at time zone 'UTC')::date)`;
  await sql`
    insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload, period)
    select md5('big' || s), 'provider', case when s < 3 then 'status' else 'location' end, '9999999', 'BIG-1',
           case s when 0 then 'ALLOTTED' when 1 then 'ARRIVED' when 2 then 'DISPATCHED' end, at, at,
           jsonb_build_object('sfx_order_id', 9999999, 'client_order_id', 'BIG-1', 'rider_id', 42,
             'rider_latitude', 12.9 + s / 100000.0, 'rider_longitude', 77.5 + s / 120000.0, 'timestamp', at),
           (now() at time zone 'UTC')::date
    from generate_series(0, ${BIG_ORDER_EVENTS - 1}) as s, lateral (select now() - interval '2 hours' + s * interval '2 seconds' as at) t`;
}

interface Latency {
  p50: number;
  p99: number;
  /** The first request's: with a cold cache, the one that reads from disk. */
  first: number;
}

async function timed(samples: number, request: (i: number) => Promise<Response>): Promise<Latency> {
  const times: number[] = [];
  for (let i = 0; i < samples; i++) {
    const started = performance.now();
    const res = await request(i);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${res.url}: HTTP ${res.status}`);
    times.push(performance.now() - started);
  }
  const first = times[0] ?? NaN;
  times.sort((a, b) => a - b);
  return { p50: percentile(times, 50), p99: percentile(times, 99), first };
}

interface Measured {
  ingestPerS: number;
  ackP99: number;
  lookupClient: Latency;
  lookupSvc: Latency;
  lists: Record<string, Latency>;
  timelineFirst: Latency;
  timelineLast: Latency;
}

const LIST_FILTERS: Record<string, string> = {
  "no filter": "",
  "status=DELIVERED": "status=DELIVERED",
  "status=ARRIVED": "status=ARRIVED",
  "store_code (none match)": "store_code=NO-SUCH-STORE",
  "status (none match)": "status=RETURNED_TO_SELLER",
  "placement=unconfirmed (none)": "placement=unconfirmed",
  "placement=placed (none)": "placement=placed",
  "updated_after=1h ago": `updated_after=${encodeURIComponent(new Date(Date.now() - 3_600_000).toISOString())}`,
};

async function measure(base: string, orders: number, run: string, samples: number, ingest: boolean): Promise<Measured> {
  const auth = { authorization: `Bearer ${API_TOKEN}` };
  const get = (path: string) => fetch(`${base}${path}`, { headers: auth });
  const pick = (i: number) => (i * 7919) % Math.max(1, orders - 1);
  const none: Latency = { p50: NaN, p99: NaN, first: NaN };
  const lists: Record<string, Latency> = {};
  let [lookupClient, lookupSvc, timelineFirst, timelineLast] = [none, none, none, none];
  // The empty log has nothing to read: only its ingest is measured.
  if (orders > 0) {
    lookupClient = await timed(samples, (i) => get(`/v1/orders/L-${pick(i)}`));
    lookupSvc = await timed(samples, (i) => get(`/v1/orders/by-svc-id/${10000000 + pick(i + 1)}`));
    for (const [name, query] of Object.entries(LIST_FILTERS)) lists[name] = await timed(samples, () => get(`/v1/orders?limit=50${query ? `&${query}` : ""}`));
    timelineFirst = await timed(Math.ceil(samples / 2), () => get("/v1/orders/BIG-1/events?limit=500"));
    // The last page: follow the cursors once, then time that page.
    let cursor: string | null = null;
    for (;;) {
      const page = (await (await get(`/v1/orders/BIG-1/events?limit=500${cursor ? `&cursor=${cursor}` : ""}`)).json()) as { next_cursor: string | null };
      if (page.next_cursor === null) break;
      cursor = page.next_cursor;
    }
    const last = cursor;
    timelineLast = await timed(Math.ceil(samples / 2), () => get(`/v1/orders/BIG-1/events?limit=500${last ? `&cursor=${last}` : ""}`));
  }
  let ingestPerS = NaN;
  let ackP99 = NaN;
  if (ingest) {
    const load = await runForked<LoadResult>("bench/load.ts", {
      url: base,
      pathPrefix: `/callbacks/${CALLBACK_SECRET}`,
      connections: CONNECTIONS,
      durationS: INGEST_S,
      scenario: { orders: 20_000, eventsPerOrder: 40, prefix: `IN${run}`, dupEvery: 101, svcBase: 30_000_000 + Number(run.replace(/\D/g, "") || 0) * 100_000 },
      record: false,
    } satisfies LoadConfig);
    ingestPerS = load.ok / load.elapsedS;
    ackP99 = load.latency.p99;
  }
  return { ingestPerS, ackP99, lookupClient, lookupSvc, lists, timelineFirst, timelineLast };
}

async function main(): Promise<void> {
  stopChildrenOnSignal("bench:scale");
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const embedded = !process.env.DATABASE_URL;
  let server = await benchServer(log);
  const name = `bench_scale_${Date.now()}`;
  let admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
  await admin.unsafe(`create database ${name}`);
  const url = () => withDatabase(server.url, name);
  let sql = driverSql(url(), { max: 2 });
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-bench-scale-"));
  const services: ServiceProcess[] = [];
  const env = () => ({
    ...(process.env as Record<string, string>),
    DATABASE_URL: url(),
    PORT: "0",
    HOST: "127.0.0.1",
    API_TOKEN,
    CALLBACK_SECRET,
    LOG_LEVEL: "info",
    DATA_DIR: dataDir,
    RECONCILE_AFTER_MIN: "0",
  });
  const startServices = async () => {
    services.push(await startService({ name: "worker", script: "src/worker.ts", env: env(), nodeArgs: SERVICE_NODE_ARGS, logFile: join(dataDir, "services.log"), readyMsg: "worker running" }));
    const web = await startService({ name: "web", script: "src/web.ts", env: env(), nodeArgs: SERVICE_NODE_ARGS, logFile: join(dataDir, "services.log"), readyMsg: "web listening" });
    services.push(web);
    return web.ready["url"] as string;
  };
  const stopServices = async () => {
    for (const s of services.splice(0)) await s.stop();
  };
  /** Restarts PostgreSQL and drops the OS page cache; what could not be done. */
  const coldCache = async (): Promise<string[]> => {
    const missing: string[] = [];
    await sql.end();
    await admin.end();
    if (embedded) {
      await server.release();
      server = await benchServer(log);
    } else if (process.env.BENCH_RESTART_PG) {
      execSync(process.env.BENCH_RESTART_PG, { stdio: "ignore" });
    } else missing.push("PostgreSQL not restarted (set BENCH_RESTART_PG)");
    try {
      execSync("sync && echo 3 > /proc/sys/vm/drop_caches", { stdio: "ignore", shell: "/bin/sh" });
    } catch {
      missing.push("OS page cache not dropped (needs root)");
    }
    for (let i = 0; i < 60; i++) {
      try {
        admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
        await admin`select 1`;
        break;
      } catch {
        await admin.end().catch(() => undefined);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    sql = driverSql(url(), { max: 2 });
    return missing;
  };

  const rows: ScaleRow[] = [];
  try {
    await runMigrations(url(), log);
    const machine = await describeMachine(sql);
    let filled = 0;
    for (const size of [0, ...SIZES.filter((s) => s > 0)].sort((a, b) => a - b)) {
      console.log(`size ${size.toLocaleString("en")}:`);
      const [w0] = await sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`;
      if (size > filled) {
        await fillLog(sql, filled, size, Math.max(...SIZES));
        if (filled === 0) await bigOrder(sql);
      }
      const [w1] = await sql<{ bytes: number }[]>`select pg_wal_lsn_diff(pg_current_wal_lsn(), ${w0!.lsn}::pg_lsn)::float8 as bytes`;
      const added = Math.max(0, size - filled);
      filled = Math.max(filled, size);
      // The log as a live server holds it: autovacuum (on by default; since PostgreSQL 13
      // inserts alone start it) has set hint bits and the visibility map of pages this old,
      // so index-only scans skip the heap. This bench's own server may run without it.
      await sql`vacuum (analyze)`;
      const stats = await logSize(sql);
      let rebuildS = 0;
      if (stats.events > 0) {
        const started = performance.now();
        execSync(`node ${SERVICE_NODE_ARGS.join(" ")} src/rebuild.ts`, { cwd: ROOT, env: { ...env(), LOG_LEVEL: "warn" }, stdio: "ignore" });
        rebuildS = (performance.now() - started) / 1000;
        await sql`analyze`;
      }
      const [{ orders } = { orders: 0 }] = await sql<{ orders: number }[]>`select count(*)::int as orders from orders`;
      // The log's own orders (L-0 …), not those the ingest runs added.
      const logOrders = Math.floor(filled / EVENTS_PER_ORDER);
      const base = await startServices();
      await measure(base, logOrders, `w${size}`, 10, false); // warm-up
      const [hot0] = await sql<{ upd: number; hot: number }[]>`
        select n_tup_upd::float8 as upd, n_tup_hot_upd::float8 as hot from pg_stat_user_tables where relname = 'orders'`;
      const warm = await measure(base, logOrders, `W${rows.length}`, SAMPLES, true);
      await stopServices();
      // The services' backends have exited, so their counts have reached the statistics.
      await new Promise((r) => setTimeout(r, 1500));
      const [hot1] = await sql<{ upd: number; hot: number; dead: number; bytes: number; live: number }[]>`
        select n_tup_upd::float8 as upd, n_tup_hot_upd::float8 as hot, n_dead_tup::float8 as dead, n_live_tup::float8 as live,
               pg_relation_size('orders')::float8 as bytes
        from pg_stat_user_tables where relname = 'orders'`;
      const ordersTable = {
        hotRatio: hot1!.upd - hot0!.upd > 0 ? (hot1!.hot - hot0!.hot) / (hot1!.upd - hot0!.upd) : NaN,
        deadRows: hot1!.dead,
        liveRows: hot1!.live,
        bytesPerRow: hot1!.live > 0 ? hot1!.bytes / hot1!.live : NaN,
      };
      let cold: Measured | undefined;
      let coldNotes: string[] | undefined;
      if (size > 0) {
        coldNotes = await coldCache();
        const coldBase = await startServices();
        cold = await measure(coldBase, logOrders, `C${rows.length}`, SAMPLES, true);
        await stopServices();
      }
      rows.push({
        size,
        events: stats.events,
        orders,
        diskBytesPerEvent: stats.events > 0 ? stats.bytes / stats.events : NaN,
        walBytesPerEvent: added > 0 ? w1!.bytes / added : NaN,
        rebuildSPerMillion: stats.events > 0 ? rebuildS / (stats.events / 1e6) : NaN,
        warm,
        ordersTable,
        ...(cold ? { cold } : {}),
        ...(coldNotes ? { coldNotes } : {}),
      });
    }
    printTable(rows);
    const resultsDir = resolve(ROOT, "bench/results");
    mkdirSync(resultsDir, { recursive: true });
    const file = resolve(resultsDir, `${stamp}-scale.json`);
    writeFileSync(file, `${JSON.stringify({ stamp, machine, sizes: SIZES, ingestS: INGEST_S, connections: CONNECTIONS, samples: SAMPLES, rows }, null, 2)}\n`);
    console.log(`\nresults: ${file}`);
  } finally {
    await stopServices();
    await sql.end();
    if (process.env.BENCH_KEEP_DB) console.log(`kept database ${name} (BENCH_KEEP_DB)`);
    else await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
    await server.release();
  }
}

interface ScaleRow {
  size: number;
  events: number;
  orders: number;
  diskBytesPerEvent: number;
  walBytesPerEvent: number;
  rebuildSPerMillion: number;
  warm: Measured;
  /** The orders table after the warm ingest: the share of its updates that were HOT, its dead rows, its bytes per live row. */
  ordersTable: { hotRatio: number; deadRows: number; liveRows: number; bytesPerRow: number };
  cold?: Measured;
  coldNotes?: string[];
}

function printTable(rows: readonly ScaleRow[]): void {
  const fmt = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : "-");
  const lat = (l: Latency | undefined) => (l ? `${fmt(l.p50)}/${fmt(l.p99)}/${fmt(l.first)}` : "-");
  const empty = rows.find((r) => r.size === 0)?.warm.ingestPerS ?? NaN;
  const header = ["", ...rows.flatMap((r) => (r.size === 0 ? ["empty warm"] : [`${(r.events / 1e6).toFixed(2)} M warm`, "cold"]))];
  const lines: string[][] = [header];
  const add = (label: string, f: (m: Measured, r: (typeof rows)[number]) => string, once?: (r: (typeof rows)[number]) => string) =>
    lines.push([label, ...rows.flatMap((r) => (r.size === 0 ? [f(r.warm, r)] : [once ? once(r) : f(r.warm, r), once ? "" : r.cold ? f(r.cold, r) : "-"]))]);
  add("ingest acknowledged/s", (m) => fmt(m.ingestPerS, 0));
  add("  ratio to the empty log", (m) => fmt(m.ingestPerS / empty, 2));
  add("  ack p99 ms", (m) => fmt(m.ackP99, 0));
  add("lookup by client id p50/p99/first ms", (m) => lat(m.lookupClient));
  add("lookup by svc id p50/p99/first ms", (m) => lat(m.lookupSvc));
  for (const name of Object.keys(LIST_FILTERS)) add(`list ${name} p50/p99/first ms`, (m) => lat(m.lists[name]));
  add("timeline first page p50/p99/first ms", (m) => lat(m.timelineFirst));
  add("timeline last page p50/p99/first ms", (m) => lat(m.timelineLast));
  add("rebuild s per million events", () => "", (r) => fmt(r.rebuildSPerMillion, 1));
  add("bytes per event on disk", () => "", (r) => fmt(r.diskBytesPerEvent, 0));
  add("WAL bytes per event loaded", () => "", (r) => fmt(r.walBytesPerEvent, 0));
  add("orders: HOT share of updates (ingest)", () => "", (r) => fmt(r.ordersTable.hotRatio, 2));
  add("orders: dead rows / live rows", () => "", (r) => `${fmt(r.ordersTable.deadRows, 0)} / ${fmt(r.ordersTable.liveRows, 0)}`);
  const widths = header.map((_, i) => Math.max(...lines.map((l) => (l[i] ?? "").length)));
  console.log("");
  for (const l of lines) console.log(l.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]! + 2))).join(""));
  for (const r of rows) if (r.coldNotes?.length) console.log(`cold at ${r.events}: ${r.coldNotes.join("; ")}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
