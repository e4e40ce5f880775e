/**
 * `npm run bench [-- options]`: tracklane's benchmark, in one run on one machine and one
 * database (see bench/README.md).
 *
 *   --connections N   concurrent HTTP connections / insert loops   (BENCH_CONNECTIONS, 64)
 *   --duration S      seconds of each baseline measurement         (BENCH_DURATION, 10)
 *   --warmup S        seconds of warm-up before each measurement   (BENCH_WARMUP, 2)
 *   --orders N        orders of the tracklane scenario             (BENCH_ORDERS, 10000)
 *   --events N        unique events of the tracklane scenario      (BENCH_EVENTS, 100000)
 *   --history N       events already in the database (over N/10     (BENCH_HISTORY, = events)
 *                     orders) before the measured load
 *   --history-months M  months those orders spread over: one status  (BENCH_HISTORY_MONTHS, 1)
 *                     partition a month, as a log kept that long has
 *   --dup-every N     every N-th request is a duplicate; 0 = none  (BENCH_DUP_EVERY, 101)
 *   --runs N          repeat everything N times, report medians    (BENCH_RUNS, 1)
 *   --cpu-prof        profile the web and worker processes (node --cpu-prof)
 *   --only-tracklane  skip the two baselines (quicker iterations; no ratios)
 *   --no-notify       skip phase (f), the same load with one subscribed notification endpoint
 *   --only-notify     only (c) (without its backlog) and (f): the quickest look at notifications
 *
 * PostgreSQL: the server of DATABASE_URL when set, else the embedded one under
 * .data/bench (the same resolveDatabase as `npm start`). Each run gets a fresh scratch
 * database `bench_*`, dropped afterwards. tracklane's own settings (INGEST_BATCH_MAX,
 * INGEST_BATCH_WAIT_MS, WORKER_CONCURRENCY, DB_POOL_MAX, ...) come from the environment as
 * for `npm run web` / `npm run worker`.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { loadConfig } from "../src/config.ts";
import { driverSql } from "../src/db/client.ts";
import { withDatabase } from "../src/db/url.ts";
import { createLogger } from "../src/logger.ts";
import { commandLine, refuseCommandLine } from "../src/runtime/cli.ts";
import { EX_CONFIG } from "../src/runtime/startup-errors.ts";
import { describeMachine } from "./lib/machine.ts";
import { CALLBACK_SECRET, ROOT, echoBaseline, insertBaseline, tracklanePhase } from "./lib/phases.ts";
import { SERVICE_NODE_ARGS, stopChildrenOnSignal } from "./lib/processes.ts";
import type { BenchOptions, HttpPhase, TracklanePhase } from "./lib/phases.ts";
import { formatProfile, summariseProfile } from "./lib/profile.ts";
import type { ProfileSummary } from "./lib/profile.ts";
import { formatReport } from "./lib/report.ts";
import { benchServer, scratchDatabase } from "./lib/scratch.ts";
import type { RunResult } from "./lib/report.ts";
import type { InsertResult } from "./insert-baseline.ts";

const USAGE = `usage: npm run bench [-- options]
  --connections N  --duration S  --warmup S  --orders N  --events N  --history N
  --history-months M  --dup-every N  --runs N  --cpu-prof  --only-tracklane  --no-notify
  --only-notify  --single-process      (bench/README.md: what each does, and its default)`;
const args = commandLine(
  USAGE,
  {
    connections: { type: "string" },
    duration: { type: "string" },
    warmup: { type: "string" },
    orders: { type: "string" },
    events: { type: "string" },
    "dup-every": { type: "string" },
    history: { type: "string" },
    "history-months": { type: "string" },
    runs: { type: "string" },
    "cpu-prof": { type: "boolean", default: false },
    "only-tracklane": { type: "boolean", default: false },
    "no-notify": { type: "boolean", default: false },
    "only-notify": { type: "boolean", default: false },
    "single-process": { type: "boolean", default: false },
  },
);

/**
 * A number from the flag `--name`, else the environment variable, else the fallback. A
 * flag's bad value is refused as the command line (exit 2, naming the flag), a variable's
 * as configuration (exit 78, naming the variable), before anything is set up.
 */
function num(name: keyof typeof args, env: string, fallback: number, min = 0): number {
  const flag = args[name];
  const raw = typeof flag === "string" ? flag : process.env[env];
  if (raw === undefined || (flag === undefined && raw === "")) return fallback;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < min) {
    const problem = `must be a number from ${min} (found "${raw}")`;
    if (flag !== undefined) refuseCommandLine(`--${String(name)} ${problem}`, USAGE);
    console.error(`bench: ${env} ${problem}`);
    process.exit(EX_CONFIG);
  }
  return n;
}

const stamp = new Date().toISOString().replace(/[:.]/g, "-");
const resultsDir = resolve(ROOT, "bench/results");
mkdirSync(resultsDir, { recursive: true });

const orders = num("orders", "BENCH_ORDERS", 10_000, 1);
const events = num("events", "BENCH_EVENTS", 100_000, 1);
const options: BenchOptions = {
  connections: num("connections", "BENCH_CONNECTIONS", 64, 1),
  durationS: num("duration", "BENCH_DURATION", 10),
  warmupS: num("warmup", "BENCH_WARMUP", 2),
  historyEvents: num("history", "BENCH_HISTORY", events),
  historyMonths: Math.max(1, Math.round(num("history-months", "BENCH_HISTORY_MONTHS", 1))),
  orders,
  eventsPerOrder: Math.max(1, Math.round(events / orders)),
  dupEvery: num("dup-every", "BENCH_DUP_EVERY", 101),
  drainTimeoutS: 180,
  deliveryTimeoutS: 600,
  cpuProf: args["cpu-prof"] === true,
  singleProcess: args["single-process"] || process.env.BENCH_SINGLE_PROCESS === "1",
  resultsDir,
  stamp,
};
const runs = Math.max(1, num("runs", "BENCH_RUNS", 1));
if (args["only-notify"] && args["no-notify"]) refuseCommandLine("--only-notify and --no-notify exclude each other", USAGE);
const baselines = !args["only-tracklane"] && !args["only-notify"];
const backlog = !args["only-notify"];
const notify = !args["no-notify"];
const log = createLogger({ level: "warn" });

/** tracklane's effective settings, as its processes will read them. */
function serviceSettings(): Record<string, unknown> {
  const c = loadConfig({ ...process.env, API_TOKEN: "x".repeat(16), CALLBACK_SECRET, DATA_DIR: resolve(ROOT, ".data/bench") });
  return {
    INGEST_BATCH_MAX: c.ingest.batchMax,
    INGEST_BATCH_WAIT_MS: c.ingest.batchWaitMs,
    WORKER_CONCURRENCY: c.worker.concurrency,
    DB_POOL_MAX: c.db.poolMax,
    LOG_LEVEL: "info",
    processes: options.singleProcess ? `one (npm start: ${SERVICE_NODE_ARGS.join(" ")} src/main.ts)` : `web + worker (${SERVICE_NODE_ARGS.join(" ")})`,
  };
}

async function main() {
  const server = await benchServer(log);
  const admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
  const results: RunResult[] = [];
  const profiles: ProfileSummary[] = [];
  try {
    const machine = await describeMachine(admin);
    const settings = {
      ...serviceSettings(),
      connections: options.connections,
      baselineDurationS: options.durationS,
      warmupS: options.warmupS,
      historyEvents: options.historyEvents,
      historyMonths: options.historyMonths,
      orders: options.orders,
      events: options.orders * options.eventsPerOrder,
      dupEvery: options.dupEvery,
      runs,
      phases: [...(baselines ? ["a", "b"] : []), backlog ? "c-e" : "c-e without the backlog", ...(notify ? ["f"] : [])].join(", "),
      // DATABASE_URL with where it connects (a host and port, or a Unix socket), or the embedded server.
      database: server.description,
    };
    console.log(`tracklane bench ${stamp}: ${JSON.stringify(settings)}`);
    for (let run = 1; run <= runs; run++) {
      const name = `bench_${stamp.slice(0, 19).replace(/[-T]/g, "").toLowerCase()}_${process.pid}_${run}`;
      let insert: InsertResult | undefined;
      let echo: HttpPhase | undefined;
      let tracklane: TracklanePhase | undefined;
      await scratchDatabase(admin, server.url, name, log, async (url) => {
        if (baselines) {
          console.log(`run ${run}/${runs}: (a) raw single-row INSERT + commit, ${options.connections} at once ...`);
          insert = await insertBaseline(url, options);
          console.log(`run ${run}/${runs}: (b) bare Hono JSON echo ...`);
          echo = await echoBaseline(options);
        }
        console.log(`run ${run}/${runs}: (c-e) tracklane, ${options.orders * options.eventsPerOrder} events over ${options.orders} orders ...`);
        tracklane = await tracklanePhase(url, options, run, { notify: false, backlog });
      });
      // (f) on a database of its own, seeded like (c)'s: the same events, the same tables.
      let withEndpoint: TracklanePhase | undefined;
      if (notify) {
        await scratchDatabase(admin, server.url, `${name}_f`, log, async (url) => {
          console.log(`run ${run}/${runs}: (f) tracklane with one subscribed notification endpoint, the same load ...`);
          withEndpoint = await tracklanePhase(url, options, run, { notify: true, backlog: false });
        });
      }
      results.push({ insert, echo, tracklane: tracklane!, withEndpoint });
      for (const phase of [tracklane, withEndpoint]) for (const file of phase?.profiles ?? []) profiles.push(summariseProfile(file));
    }
    const report = formatReport(results, settings, machine);
    console.log(`\n${report.text}`);
    for (const p of profiles) console.log(`\n${formatProfile(p)}`);
    const file = resolve(resultsDir, `${stamp}.json`);
    writeFileSync(file, `${JSON.stringify({ stamp, machine, settings, runs: results, median: report.median, targets: report.targets, profiles }, null, 2)}\n`);
    console.log(`\nresults: ${file}`);
  } finally {
    await admin.end();
    await server.release();
  }
}

// Ctrl-C: stop the children; the run then fails, drops its database and exits.
stopChildrenOnSignal("bench");

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
