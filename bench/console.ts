/**
 * `npm run bench:console [-- --orders N --requests N]`: how long the console's pages take
 * on the server with a realistic database (default 100,000 orders, ten events each, some of
 * every kind the "Needs attention" page lists). The web process runs as `npm run web`
 * does; each page is requested `--requests` times one after another (after a warm-up),
 * and the server's own time per page (`Server-Timing: page`, from the session check to the
 * rendered HTML) is reported as p50/p99 along with the time the client waited. Target:
 * every page under 100 ms server-side. Writes bench/results/<stamp>-console.json.
 *
 * PostgreSQL: DATABASE_URL's server, or the embedded one under .data/bench. A scratch
 * database is made and dropped (BENCH_KEEP_DB=1 keeps it).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Sql } from "postgres";
import { createLogger } from "../src/logger.ts";
import { commandLine, refuseCommandLine } from "../src/runtime/cli.ts";
import { describeMachine } from "./lib/machine.ts";
import { ROOT, SERVICE_NODE_ARGS, startService, stopChildrenOnSignal } from "./lib/processes.ts";
import type { ServiceProcess } from "./lib/processes.ts";
import { driverSql } from "../src/db/client.ts";
import { onScratchDatabase, partitionsSince } from "./lib/scratch.ts";
import { percentile } from "./lib/stats.ts";

const USAGE = "usage: npm run bench:console [-- --orders N --requests N]   (defaults 100000 and 50)";
const args = commandLine(USAGE, { orders: { type: "string" }, requests: { type: "string" } });
const ORDERS = Number(args.orders ?? process.env.BENCH_ORDERS ?? 100_000);
const REQUESTS = Number(args.requests ?? 50);
if (![ORDERS, REQUESTS].every((n) => Number.isInteger(n) && n >= 1)) refuseCommandLine("--orders and --requests must be whole numbers from 1", USAGE);
const API_TOKEN = "bench-console-token-0123456789";
const log = createLogger({ level: "warn" });

/**
 * Orders over the last 30 days, most delivered, the rest spread over the active statuses
 * and placements; ten events each (status and rider locations); commands, some failed; an
 * AWB pool below its watermark; rejected callbacks; a notification endpoint with
 * deliveries, some failed. Written in SQL (COPY-speed inserts, not HTTP), then ANALYZE.
 */
async function seed(sql: Sql, orders: number): Promise<void> {
  const active = ["CREATED", "ALLOTTED", "ARRIVED", "COLLECTED", "CUSTOMER_DOOR_STEP"];
  await sql`
    insert into orders (client_order_id, svc_order_id, svc_order_ids, store_code, status, provider_status, status_at, rider_id, rider_name,
                        rider_contact, rider_latitude, rider_longitude, rider_location_at, placement_state, placement_error,
                        event_count, last_event_at, created_at, updated_at)
    select 'C-' || o, (6000000 + o)::text, array[(6000000 + o)::text], 'S' || (o % 40),
           s.status, s.status, t.at, (2000 + o % 700)::text, 'Rider ' || (2000 + o % 700), '98' || lpad((o % 100000000)::text, 8, '0'),
           12.9 + (o % 997) / 10000.0, 77.5 + (o % 991) / 10000.0, t.at,
           case when o % 1000 = 7 then 'unconfirmed' when o % 500 = 3 then 'placed' else 'external' end,
           case when o % 1000 = 7 then 'provider did not answer in time' end,
           10, t.at, t.at - interval '40 minutes', t.at
    from generate_series(1, ${orders}) as o
    cross join lateral (select now() - (${orders} - o) * (interval '30 days' / ${orders}) as at) t
    cross join lateral (select case when o % 20 = 0 then (${active}::text[])[1 + (o / 20) % 5] when o % 50 = 1 then 'CANCELLED' else 'DELIVERED' end as status) s`;
  // Ten events per order: four statuses, six rider locations, in their orders' periods.
  await partitionsSince(sql, new Date(Date.now() - 31 * 86_400_000));
  await sql`
    insert into order_periods (order_key, period)
    select (6000000 + o)::text, ((now() - (${orders} - o) * (interval '30 days' / ${orders}) - interval '36 minutes') at time zone 'UTC')::date
    from generate_series(1, ${orders}) as o`;
  await sql`
    insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload, period)
    select md5('console' || o || '-' || e), 'provider', case when e in (0, 3, 6, 9) then 'status' else 'location' end,
           (6000000 + o)::text, 'C-' || o,
           case e when 0 then 'ALLOTTED' when 3 then 'ARRIVED' when 6 then 'DISPATCHED' when 9 then 'DELIVERED' end,
           at, at,
           jsonb_build_object('sfx_order_id', 6000000 + o, 'client_order_id', 'C-' || o, 'rider_id', 2000 + o % 700,
             'rider_latitude', 12.9 + (o % 997) / 10000.0 + e / 1000.0, 'rider_longitude', 77.5 + (o % 991) / 10000.0 + e / 1500.0),
           p.period
    from generate_series(1, ${orders}) as o, generate_series(0, 9) as e,
         lateral (select now() - (${orders} - o) * (interval '30 days' / ${orders}) - (9 - e) * interval '4 minutes' as at) t,
         lateral (select period from order_periods where order_key = (6000000 + o)::text) p`;
  await sql`
    insert into commands (order_id, kind, state, request, request_hash, response, attempts, last_error, created_at, updated_at, completed_at)
    select id, case when id % 3 = 0 then 'cancel' else 'dispatch_ready' end,
           case when id % 40 = 0 then 'failed' else 'succeeded' end, '{}'::jsonb, md5(id::text),
           case when id % 40 = 0 then null else '{"message":"ok"}'::jsonb end, 1,
           case when id % 40 = 0 then 'HTTP 422: order cannot be cancelled now' end, created_at, updated_at, updated_at
    from orders where id % 4 = 0`;
  await sql`
    insert into awb_numbers (awb_number, state, client_order_id, allocated_at, source, created_at)
    select 'AWB' || i, case when i <= 950 then 'allocated' else 'available' end, case when i <= 950 then 'C-' || i end,
           case when i <= 950 then now() - (1000 - i) * interval '1 minute' end, 'pool', now() - interval '1 day'
    from generate_series(1, 1000) as i`;
  await sql`
    insert into rejected_callbacks (received_at, reason, content_type, body, body_bytes)
    select now() - i * interval '1 minute', 'invalid_json', 'application/json', '{"order_status": ', 17 from generate_series(1, 200) as i`;
  await sql`
    insert into notification_endpoints (id, url, events, secret, enabled)
    values ('ep_BENCH', 'https://hooks.example.com/tracklane', '{}', 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3', true)`;
  await sql`
    with m as (
      insert into notification_messages (id, type, order_id, client_order_id, svc_order_id, sequence, body, created_at)
      select 'msg_BENCH' || lpad(id::text, 17, '0'), 'order.status_changed', id, client_order_id, svc_order_id, 1,
             '{"type":"order.status_changed"}', updated_at
      from orders where id % 2 = 0
      returning id, order_id, created_at)
    insert into notification_deliveries (message_id, endpoint_id, status, attempts, last_status_code, last_error, next_attempt_at, created_at, delivered_at)
    select id, 'ep_BENCH', case when order_id % 100 = 0 then 'failed' else 'delivered' end, case when order_id % 100 = 0 then 8 else 1 end,
           case when order_id % 100 = 0 then 503 else 200 end, case when order_id % 100 = 0 then 'HTTP 503' end, created_at, created_at,
           case when order_id % 100 = 0 then null else created_at end
    from m`;
  await sql`analyze`;
}

interface PageFigure {
  page: string;
  status: number;
  bytes: number;
  serverP50: number;
  serverP99: number;
  clientP50: number;
  clientP99: number;
}

async function measure(base: string, cookie: string, path: string): Promise<PageFigure> {
  const get = async () => {
    const started = performance.now();
    const res = await fetch(`${base}${path}`, { headers: { cookie }, redirect: "manual" });
    const body = await res.text();
    const client = performance.now() - started;
    const timing = /page;dur=([\d.]+)/.exec(res.headers.get("server-timing") ?? "");
    return { status: res.status, bytes: body.length, client, server: timing ? Number(timing[1]) : NaN };
  };
  for (let i = 0; i < 5; i++) await get();
  const samples = [];
  for (let i = 0; i < REQUESTS; i++) samples.push(await get());
  const server = samples.map((s) => s.server).sort((a, b) => a - b);
  const client = samples.map((s) => s.client).sort((a, b) => a - b);
  return {
    page: path,
    status: samples[0]!.status,
    bytes: samples[0]!.bytes,
    serverP50: percentile(server, 50),
    serverP99: percentile(server, 99),
    clientP50: percentile(client, 50),
    clientP99: percentile(client, 99),
  };
}

async function main(): Promise<void> {
  stopChildrenOnSignal("bench:console");
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  await onScratchDatabase(`bench_console_${Date.now()}`, log, async (url) => {
    const sql = driverSql(url, { max: 2 });
    let web: ServiceProcess | undefined;
    try {
      await run(url, sql, stamp, (started) => (web = started));
    } finally {
      await web?.stop();
      await sql.end();
    }
  });
}

/** Seeds, starts the web, measures every page, reports. */
async function run(url: string, sql: Sql, stamp: string, started: (web: ServiceProcess) => void): Promise<void> {
  const seeding = performance.now();
  console.log(`seeding ${ORDERS} orders, ${ORDERS * 10} events ...`);
  await seed(sql, ORDERS);
  const seededS = (performance.now() - seeding) / 1000;
  const [counts] = await sql<{ orders: number; events: number }[]>`select (select count(*) from orders)::int as orders, (select count(*) from order_events)::int as events`;
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-bench-console-"));
  const web = await startService({
    name: "web",
    script: "src/web.ts",
    env: { ...(process.env as Record<string, string>), DATABASE_URL: url, PORT: "0", HOST: "127.0.0.1", API_TOKEN, LOG_LEVEL: "info", DATA_DIR: dataDir, AWB_POOL_LOW_WATERMARK: "100" },
    nodeArgs: SERVICE_NODE_ARGS,
    logFile: join(dataDir, "web.log"),
    readyMsg: "web listening",
  });
  started(web);
  const base = web.ready["url"] as string;
  const signIn = await fetch(`${base}/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
    body: new URLSearchParams({ token: API_TOKEN }),
  });
  const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0]!;
  if (signIn.status !== 303 || !cookie) throw new Error(`sign-in failed: ${signIn.status}`);
  const [busy] = await sql<{ id: string }[]>`select id from orders where status = 'ARRIVED' order by id desc limit 1`;
  const pages = [
    "/",
    "/orders",
    "/orders?status=ARRIVED",
    "/orders?placement=unconfirmed",
    "/orders?store=S7",
    "/orders?status=RETURNED_TO_SELLER",
    "/orders?updated=1h",
    `/orders?q=C-${Math.floor(ORDERS / 2)}`,
    `/orders/${busy?.id ?? 1}`,
    `/orders/${busy?.id ?? 1}/live`,
    "/orders/rows",
    "/awb",
    "/notifications",
    "/system",
  ];
  const figures: PageFigure[] = [];
  for (const page of pages) figures.push(await measure(base, cookie, page));
  const machine = await describeMachine(sql);
  console.log(`\ntracklane console bench ${stamp}: ${counts!.orders} orders, ${counts!.events} events (seeded in ${seededS.toFixed(0)} s); ${REQUESTS} requests per page after 5 warm-up requests, one at a time`);
  console.log(`machine: ${machine.cpus} x ${machine.cpuModel}, Node ${machine.node}, ${machine.postgres.version}\n`);
  console.log(`${"page".padEnd(38)} ${"status".padStart(6)} ${"KiB".padStart(6)} ${"server p50".padStart(11)} ${"p99".padStart(7)} ${"client p50".padStart(11)} ${"p99".padStart(7)}  target`);
  for (const f of figures) {
    const met = f.serverP99 < 100 ? "< 100 met" : "< 100 MISSED";
    console.log(
      `${f.page.padEnd(38)} ${String(f.status).padStart(6)} ${(f.bytes / 1024).toFixed(1).padStart(6)} ${f.serverP50.toFixed(1).padStart(11)} ${f.serverP99.toFixed(1).padStart(7)} ${f.clientP50.toFixed(1).padStart(11)} ${f.clientP99.toFixed(1).padStart(7)}  ${met}`,
    );
  }
  const resultsDir = resolve(ROOT, "bench/results");
  mkdirSync(resultsDir, { recursive: true });
  const file = resolve(resultsDir, `${stamp}-console.json`);
  writeFileSync(file, `${JSON.stringify({ stamp, orders: counts!.orders, events: counts!.events, requests: REQUESTS, machine, figures }, null, 2)}\n`);
  console.log(`\nresults: ${file}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
