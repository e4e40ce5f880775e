/**
 * `npm run bench:export [-- --orders N]`: GET /v1/orders/export over N orders (default
 * 1,000,000), in both formats, against `src/web.ts` run as deployed, sampling the web
 * process's RSS every 100 ms. The export streams page by page, so its RSS should stay
 * flat whatever N is: this prints rows, bytes, seconds and RSS before, during (peak and
 * median) and after each download.
 *
 * PostgreSQL: the server of DATABASE_URL when set, else the embedded one under
 * .data/bench (as bench/run.ts). The orders go into a scratch database `bench_export_*`
 * with one INSERT … SELECT generate_series, dropped afterwards (BENCH_KEEP_DB keeps it).
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type postgres from "postgres";
import type { Sql } from "postgres";
import { createLogger } from "../src/logger.ts";
import { commandLine, refuseCommandLine } from "../src/runtime/cli.ts";
import { EX_CONFIG } from "../src/runtime/startup-errors.ts";
import { SERVICE_NODE_ARGS, procMemMiB, startService, stopChildrenOnSignal } from "./lib/processes.ts";
import type { ServiceProcess } from "./lib/processes.ts";
import { driverSql } from "../src/db/client.ts";
import { onScratchDatabase } from "./lib/scratch.ts";

const API_TOKEN = "bench-api-token-0123456789abcdef";
const CALLBACK_SECRET = "bench-callback-secret-0123456789";
const SAMPLE_MS = 100;

const USAGE = "usage: npm run bench:export [-- --orders N]   (default 1000000)";
const args = commandLine(USAGE, { orders: { type: "string" } });
const ordersText = args.orders ?? process.env.BENCH_EXPORT_ORDERS ?? "1000000";
const orders = ordersText.trim() === "" ? NaN : Number(ordersText);
if (!Number.isInteger(orders) || orders < 1) {
  // A flag's bad value is a command-line error (exit 2), a variable's a configuration one (78).
  const problem = `must be a whole number from 1 (found "${ordersText}")`;
  if (args.orders !== undefined) refuseCommandLine(`--orders ${problem}`, USAGE);
  console.error(`bench:export: BENCH_EXPORT_ORDERS ${problem}`);
  process.exit(EX_CONFIG);
}
const log = createLogger({ level: "warn" });

const mib = (n: number) => `${n.toFixed(1)} MiB`;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.floor(s.length / 2)]!;
};

/** Orders shaped like real ones (every column of the export filled), in one statement. */
async function seed(sql: postgres.Sql, n: number): Promise<number> {
  const started = performance.now();
  await sql`
    insert into orders (client_order_id, svc_order_id, svc_order_ids, store_code, status, provider_status, status_at,
                        track_url, awb_number, pickup_otp, rider_id, rider_name, rider_contact, rider_latitude,
                        rider_longitude, rider_location_at, placement_state, event_count, last_event_at, created_at, updated_at)
    select 'BENCH-' || g, (50000000 + g)::text, array[(50000000 + g)::text], 'STORE-' || (g % 50),
           s.status, s.status, t.at, 'https://track.example/t/' || md5(g::text), 'SF' || lpad(g::text, 11, '0') || 'BEN',
           lpad((g % 10000)::text, 4, '0'), (1000 + g % 700)::text, 'Rider ' || (g % 700), '+9198' || lpad((g % 100000000)::text, 8, '0'),
           12.9 + (g % 1000) / 10000.0, 77.5 + (g % 1000) / 10000.0, t.at, 'placed', 6, t.at, t.at - interval '40 minutes', t.at
    from generate_series(1, ${n}) g
    cross join lateral (select (array['DELIVERED','ALLOTTED','COLLECTED','CANCELLED'])[1 + g % 4] as status) s
    cross join lateral (select '2026-10-01T00:00:00Z'::timestamptz + g * interval '2 seconds' as at) t`;
  await sql`vacuum analyze orders`;
  return (performance.now() - started) / 1000;
}

interface Download {
  format: string;
  rows: number;
  bytes: number;
  seconds: number;
  rssBeforeMiB: number;
  rssPeakMiB: number;
  rssMedianMiB: number;
  rssAfterMiB: number;
}

async function download(url: string, format: "ndjson" | "csv", pid: number): Promise<Download> {
  const rssBefore = procMemMiB(pid, "VmRSS");
  const samples: number[] = [];
  const sampler = setInterval(() => {
    const rss = procMemMiB(pid, "VmRSS");
    if (Number.isFinite(rss)) samples.push(rss);
  }, SAMPLE_MS);
  const started = performance.now();
  let bytes = 0;
  let lines = 0;
  try {
    const res = await fetch(`${url}/v1/orders/export?format=${format}`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
    if (res.status !== 200 || !res.body) throw new Error(`export ${format}: HTTP ${res.status} ${await res.text()}`);
    for await (const chunk of res.body) {
      bytes += chunk.byteLength;
      // Line feeds: one per row (and the CSV header); the seeded text holds none of its own.
      for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
    }
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - started) / 1000;
  return {
    format,
    rows: format === "csv" ? lines - 1 : lines,
    bytes,
    seconds,
    rssBeforeMiB: rssBefore,
    rssPeakMiB: Math.max(rssBefore, ...samples),
    rssMedianMiB: median(samples),
    rssAfterMiB: procMemMiB(pid, "VmRSS"),
  };
}

async function main() {
  const name = `bench_export_${new Date().toISOString().slice(0, 19).replace(/[-:T]/g, "")}_${process.pid}`;
  await onScratchDatabase(name, log, async (url, server) => {
    const sql = driverSql(url, { max: 1 });
    let web: ServiceProcess | undefined;
    try {
      await run(url, sql, name, server.description, (started) => (web = started));
    } finally {
      await web?.stop();
      await sql.end();
    }
  });
}

/** Seeds, starts the web, downloads each format while sampling its memory. */
async function run(url: string, sql: Sql, name: string, serverDescription: string, started: (web: ServiceProcess) => void): Promise<void> {
  console.log(`bench:export: seeding ${orders} orders into ${name} (${serverDescription}) ...`);
  const seedS = await seed(sql, orders);
  const [size] = await sql<{ size: string }[]>`select pg_size_pretty(pg_total_relation_size('orders')) as size`;
  console.log(`seeded in ${seedS.toFixed(1)} s; orders table ${size!.size}`);

  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-bench-export-"));
  const web = await startService({
    name: "web",
    script: "src/web.ts",
    nodeArgs: SERVICE_NODE_ARGS,
    env: { ...(process.env as Record<string, string>), DATABASE_URL: url, PORT: "0", HOST: "127.0.0.1", API_TOKEN, CALLBACK_SECRET, LOG_LEVEL: "info", DATA_DIR: dataDir },
    logFile: join(dataDir, "web.log"),
    readyMsg: "web listening",
  });
  started(web);
  const webUrl = web.ready["url"] as string;
  // A request first, so "before" is a warm process (routes and the pool loaded), not a cold one.
  await fetch(`${webUrl}/v1/orders/export?status=CREATED`, { headers: { authorization: `Bearer ${API_TOKEN}` } }).then((r) => r.arrayBuffer());
  await new Promise((r) => setTimeout(r, 1000));
  console.log(`web ${web.pid} (node ${SERVICE_NODE_ARGS.join(" ")} src/web.ts) idle RSS ${mib(procMemMiB(web.pid, "VmRSS"))}; log ${join(dataDir, "web.log")}`);

  const results: Download[] = [];
  for (const format of ["ndjson", "csv"] as const) {
    const r = await download(webUrl, format, web.pid);
    results.push(r);
    console.log(
      `${format.padEnd(6)}  rows ${r.rows}  bytes ${r.bytes} (${(r.bytes / 2 ** 20).toFixed(1)} MiB)  ${r.seconds.toFixed(1)} s ` +
        `(${Math.round(r.rows / r.seconds)} rows/s, ${(r.bytes / 2 ** 20 / r.seconds).toFixed(1)} MiB/s)  ` +
        `RSS before ${mib(r.rssBeforeMiB)}, during peak ${mib(r.rssPeakMiB)} / median ${mib(r.rssMedianMiB)}, after ${mib(r.rssAfterMiB)}`,
    );
    if (r.rows !== orders) console.log(`  !! expected ${orders} rows`);
  }
  console.log(`web VmHWM (peak RSS over its whole life) ${mib(procMemMiB(web.pid, "VmHWM"))}`);
  console.log(JSON.stringify({ orders, seedSeconds: seedS, results }));
}

stopChildrenOnSignal("bench:export");

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
