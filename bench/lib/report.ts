/** The printed table: every run, the medians, the ratios and the issue's targets. */
import type { InsertResult } from "../insert-baseline.ts";
import type { MachineInfo } from "./machine.ts";
import type { HttpPhase, TracklanePhase } from "./phases.ts";
import { median } from "./stats.ts";

export interface RunResult {
  insert: InsertResult | undefined;
  echo: HttpPhase | undefined;
  tracklane: TracklanePhase;
  /** (f): the same load as (c) on a fresh database, with one subscribed notification endpoint. */
  withEndpoint: TracklanePhase | undefined;
}

interface Row {
  label: string;
  key: string;
  pick: (r: RunResult) => number | undefined;
  digits: number;
  target?: { op: "<=" | ">="; value: number };
}

const ROWS: Row[] = [
  { label: "(a) raw INSERT+commit rows/s", key: "insertPerS", pick: (r) => r.insert?.rowsPerS, digits: 0 },
  { label: "    insert latency p99 ms", key: "insertP99Ms", pick: (r) => r.insert?.latency.p99, digits: 1 },
  { label: "(b) Hono echo req/s", key: "echoPerS", pick: (r) => r.echo?.requestsPerS, digits: 0 },
  { label: "    echo latency p99 ms", key: "echoP99Ms", pick: (r) => r.echo?.latencyP99Ms, digits: 1 },
  { label: "    CPU us/req: echo server", key: "echoCpuUs", pick: (r) => r.echo?.serverCpuUs, digits: 0 },
  { label: "    CPU us/req: load gen", key: "echoLoadCpuUs", pick: (r) => r.echo?.loadCpuUs, digits: 0 },
  { label: "(c) tracklane acked callbacks/s", key: "ackedPerS", pick: (r) => r.tracklane.requestsPerS, digits: 0 },
  { label: "    ack latency p50 ms", key: "ackP50Ms", pick: (r) => r.tracklane.latencyP50Ms, digits: 1 },
  { label: "    ack latency p99 ms", key: "ackP99Ms", pick: (r) => r.tracklane.latencyP99Ms, digits: 1, target: { op: "<=", value: 25 } },
  { label: "    mean events per flush", key: "meanBatch", pick: (r) => r.tracklane.meanBatchSize, digits: 1 },
  { label: "    ingestion time s", key: "ingestS", pick: (r) => r.tracklane.ingestS, digits: 1 },
  { label: "    CPU us/event: web", key: "cpuWebUs", pick: (r) => perEvent(r.tracklane, "web"), digits: 0, target: { op: "<=", value: 50 } },
  { label: "    CPU us/event: postgres", key: "cpuPgUs", pick: (r) => perEvent(r.tracklane, "postgres"), digits: 0, target: { op: "<=", value: 50 } },
  { label: "      of which web's queries", key: "cpuPgWebUs", pick: (r) => perEventPg(r.tracklane, "tracklane-web"), digits: 0 },
  { label: "      of which projection", key: "cpuPgWorkerUs", pick: (r) => perEventPg(r.tracklane, "tracklane-worker"), digits: 0 },
  { label: "      of which graphile-worker", key: "cpuPgGraphileUs", pick: (r) => perEventPg(r.tracklane, ""), digits: 0 },
  { label: "    CPU us/event: worker", key: "cpuWorkerUs", pick: (r) => perEvent(r.tracklane, "worker"), digits: 0, target: { op: "<=", value: 30 } },
  { label: "    CPU us/event: load gen", key: "cpuLoadUs", pick: (r) => perEvent(r.tracklane, "load"), digits: 0 },
  { label: "(d) projection lag p50 ms", key: "lagP50Ms", pick: (r) => r.tracklane.lagP50Ms, digits: 0 },
  { label: "    projection lag p99 ms", key: "lagP99Ms", pick: (r) => r.tracklane.lagP99Ms, digits: 0 },
  { label: "    drain after ingestion s", key: "drainS", pick: (r) => r.tracklane.drainS, digits: 2, target: { op: "<=", value: 15 } },
  { label: "    backlog: acked/s, no worker", key: "backlogAckedPerS", pick: (r) => r.tracklane.backlog?.ackedPerS, digits: 0 },
  { label: "    backlog: events queued", key: "backlogQueued", pick: (r) => r.tracklane.backlog?.queued, digits: 0 },
  { label: "    backlog: drained in s", key: "backlogDrainS", pick: (r) => r.tracklane.backlog?.drainS, digits: 2, target: { op: "<=", value: 15 } },
  { label: "      of which worker start s", key: "backlogStartS", pick: (r) => r.tracklane.backlog?.startS, digits: 2 },
  { label: "    backlog: CPU us/event worker", key: "backlogCpuWorkerUs", pick: (r) => backlogPerEvent(r, "worker"), digits: 0 },
  { label: "    backlog: CPU us/event postgres", key: "backlogCpuPgUs", pick: (r) => backlogPerEvent(r, "postgres"), digits: 0 },
  { label: "(e) peak RSS web MiB", key: "rssWebMiB", pick: (r) => r.tracklane.rssWebMiB, digits: 0 },
  { label: "    peak RSS worker MiB", key: "rssWorkerMiB", pick: (r) => r.tracklane.rssWorkerMiB, digits: 0 },
  {
    label: "    peak RSS web+worker MiB",
    key: "rssTotalMiB",
    pick: (r) => r.tracklane.rssWebMiB + r.tracklane.rssWorkerMiB,
    digits: 0,
    target: { op: "<=", value: 300 },
  },
  { label: "    peak PSS web+worker MiB", key: "pssTogetherMiB", pick: (r) => r.tracklane.together.pssMiB, digits: 0 },
  { label: "(f) with 1 endpoint: acked/s", key: "notifyAckedPerS", pick: (r) => r.withEndpoint?.requestsPerS, digits: 0 },
  { label: "    ack latency p50 ms", key: "notifyAckP50Ms", pick: (r) => r.withEndpoint?.latencyP50Ms, digits: 1 },
  { label: "    ack latency p99 ms", key: "notifyAckP99Ms", pick: (r) => r.withEndpoint?.latencyP99Ms, digits: 1 },
  {
    label: "    ingest with endpoint / without",
    key: "notifyIngestRatio",
    pick: (r) => (r.withEndpoint ? r.withEndpoint.requestsPerS / r.tracklane.requestsPerS : undefined),
    digits: 2,
    target: { op: ">=", value: 0.9 },
  },
  { label: "    messages (measured orders)", key: "notifyMessages", pick: (r) => r.withEndpoint?.notify?.messages, digits: 0 },
  { label: "    delivery lag p50 ms", key: "notifyLagP50Ms", pick: (r) => r.withEndpoint?.notify?.lagP50Ms, digits: 0 },
  { label: "    delivery lag p99 ms", key: "notifyLagP99Ms", pick: (r) => r.withEndpoint?.notify?.lagP99Ms, digits: 0 },
  { label: "      from tx start p50 ms", key: "notifyLagFromStartP50Ms", pick: (r) => r.withEndpoint?.notify?.lagFromStartP50Ms, digits: 0 },
  { label: "      from tx start p99 ms", key: "notifyLagFromStartP99Ms", pick: (r) => r.withEndpoint?.notify?.lagFromStartP99Ms, digits: 0 },
  { label: "    delivered msg/s", key: "notifyDeliveredPerS", pick: (r) => r.withEndpoint?.notify?.deliveredPerS, digits: 0 },
  { label: "    last received after last ack s", key: "notifyLastAfterAckS", pick: (r) => r.withEndpoint?.notify?.lastArrivalAfterAckS, digits: 2 },
  { label: "    projection lag p99 ms", key: "notifyProjectionLagP99Ms", pick: (r) => r.withEndpoint?.lagP99Ms, digits: 0 },
  { label: "    CPU us/event: web", key: "notifyCpuWebUs", pick: (r) => perEvent(r.withEndpoint, "web"), digits: 0 },
  { label: "    CPU us/event: postgres", key: "notifyCpuPgUs", pick: (r) => perEvent(r.withEndpoint, "postgres"), digits: 0 },
  { label: "      of which worker's queries", key: "notifyCpuPgWorkerUs", pick: (r) => perEventPg(r.withEndpoint, "tracklane-worker"), digits: 0 },
  { label: "      of which graphile-worker", key: "notifyCpuPgGraphileUs", pick: (r) => perEventPg(r.withEndpoint, ""), digits: 0 },
  { label: "    CPU us/event: worker", key: "notifyCpuWorkerUs", pick: (r) => perEvent(r.withEndpoint, "worker"), digits: 0 },
  {
    label: "    worker CPU with / without",
    key: "notifyWorkerCpuRatio",
    pick: (r) => ratio(perEvent(r.withEndpoint, "worker"), perEvent(r.tracklane, "worker")),
    digits: 2,
  },
  {
    label: "c/a",
    key: "cOverA",
    pick: (r) => (r.insert ? r.tracklane.requestsPerS / r.insert.rowsPerS : undefined),
    digits: 2,
    target: { op: ">=", value: 1.5 },
  },
  {
    label: "c/b",
    key: "cOverB",
    pick: (r) => (r.echo ? r.tracklane.requestsPerS / r.echo.requestsPerS : undefined),
    digits: 2,
    target: { op: ">=", value: 0.35 },
  },
];

/**
 * CPU per acknowledged callback over ingestion and drain together, in microseconds (for
 * (f) the drain includes the deliveries).
 */
function perEvent(t: TracklanePhase | undefined, who: "web" | "postgres" | "worker" | "load"): number | undefined {
  return t ? ((t.cpu.ingest[who] + t.cpu.drain[who]) * 1e6) / t.acked : undefined;
}

function ratio(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined || b === undefined || b === 0 ? undefined : a / b;
}

/** CPU per queued event while the fresh worker drained the backlog, in microseconds. */
function backlogPerEvent(r: RunResult, who: "postgres" | "worker"): number | undefined {
  const b = r.tracklane.backlog;
  return b && b.queued > 0 ? (b.cpu[who] * 1e6) / b.queued : undefined;
}

/** PostgreSQL CPU per acknowledged callback spent for one client (by application_name). */
function perEventPg(t: TracklanePhase | undefined, app: string): number | undefined {
  return t ? (((t.cpu.ingest.postgresBy[app] ?? 0) + (t.cpu.drain.postgresBy[app] ?? 0)) * 1e6) / t.acked : undefined;
}

const cell = (v: number | undefined, digits: number) => (v === undefined || Number.isNaN(v) ? "-" : v.toFixed(digits)).padStart(10);

export function formatReport(
  results: RunResult[],
  settings: Record<string, unknown>,
  machine: MachineInfo,
): { text: string; median: Record<string, number>; targets: Record<string, { target: string; met: boolean }> } {
  const med: Record<string, number> = {};
  const targets: Record<string, { target: string; met: boolean }> = {};
  const many = results.length > 1;
  const header = `${"".padEnd(32)}${results.map((_, i) => `run ${i + 1}`.padStart(10)).join("")}${many ? "median".padStart(10) : ""}  target`;
  const lines = [
    `machine: ${machine.cpus} x ${machine.cpuModel}, ${machine.memoryGiB} GiB, Linux ${machine.kernel}, Node ${machine.node}, load average at start ${machine.loadAverageAtStart.join(" ")}`,
    `postgres: ${machine.postgres.version.split(" on ")[0]} (${settings["database"]}); ${Object.entries(machine.postgres.settings).map(([k, v]) => `${k}=${v}`).join(", ")}`,
    `tracklane: ${["INGEST_BATCH_MAX", "INGEST_BATCH_WAIT_MS", "WORKER_CONCURRENCY", "DB_POOL_MAX", "LOG_LEVEL"].map((k) => `${k}=${settings[k]}`).join(" ")}; processes: ${settings["processes"]}`,
    `load: ${settings["connections"]} connections (autocannon in its own process), ${settings["events"]} events over ${settings["orders"]} orders + every ${settings["dupEvery"]}th request a duplicate, ` +
      `on a database holding ${settings["historyEvents"]} earlier events${Number(settings["historyMonths"] ?? 1) > 1 ? ` over ${settings["historyMonths"]} months (location events of the last 30 days only)` : ""}; baselines ${settings["baselineDurationS"]} s each; warm-up ${settings["warmupS"]} s`,
    "",
    header,
  ];
  for (const row of ROWS) {
    const values = results.map(row.pick);
    const m = median(values.filter((v): v is number => v !== undefined));
    if (!Number.isNaN(m)) med[row.key] = m;
    let verdict = "";
    if (row.target && !Number.isNaN(m)) {
      const met = row.target.op === "<=" ? m <= row.target.value : m >= row.target.value;
      targets[row.key] = { target: `${row.target.op} ${row.target.value}`, met };
      verdict = `${row.target.op} ${row.target.value} ${met ? "met" : "MISSED"}`;
    }
    lines.push(`${row.label.padEnd(32)}${values.map((v) => cell(v, row.digits)).join("")}${many ? cell(m, row.digits) : ""}  ${verdict}`);
  }
  lines.push("");
  results.forEach((r, i) => {
    const t = r.tracklane;
    lines.push(
      `run ${i + 1} checks: ${t.requests} requests, ${t.acked} acknowledged (${t.duplicatesAcked} as duplicates), ${t.non2xx} non-2xx, ${t.errors} errors; ` +
        `${t.checks.storedEvents} events stored, ${t.checks.ackedButMissing} acknowledged but missing; ` +
        `${t.checks.ordersProjected} orders projected, ${t.checks.wrongStatus} with a wrong status, ${t.checks.wrongCount} with a wrong event_count; ` +
        `${t.drained ? "drained" : "NOT DRAINED within the timeout"}` +
        (t.backlog
          ? `; backlog: ${t.backlog.checks.ordersProjected} orders projected, ${t.backlog.checks.wrongStatus} with a wrong status, ` +
            `${t.backlog.checks.wrongCount} with a wrong event_count, ${t.backlog.drained ? "drained" : "NOT DRAINED within the timeout"}`
          : ""),
    );
    const f = r.withEndpoint;
    const n = f?.notify;
    if (f && n) {
      lines.push(
        `run ${i + 1} (f) checks: ${f.requests} requests, ${f.acked} acknowledged, ${f.non2xx} non-2xx, ${f.errors} errors; ` +
          `${f.checks.storedEvents} events stored, ${f.checks.ackedButMissing} acknowledged but missing; ` +
          `${f.checks.ordersProjected} orders projected, ${f.checks.wrongStatus} with a wrong status, ${f.checks.wrongCount} with a wrong event_count; ` +
          `${f.drained ? "drained" : "NOT DRAINED within the timeout"}; ` +
          `notifications: ${n.checks.allMessages} messages in the database (${n.messages} about the measured orders: ` +
          `${Object.entries(n.messagesByType).map(([type, count]) => `${count} ${type}`).join(", ")}; ${n.messagesPerEvent.toFixed(2)} per event), ` +
          `${n.checks.received} received at least once, ${n.checks.missing} never received, ${n.checks.arrivals} POSTs received in all; ` +
          `deliveries ${n.checks.delivered} delivered, ${n.checks.failed} failed, ${n.checks.pending} pending, ${n.checks.attempts} attempts; ` +
          `${n.settled ? "all settled" : "NOT SETTLED within the timeout"}; ` +
          `tx start to commit p50/p99 ${n.startToCommitP50Ms.toFixed(1)}/${n.startToCommitP99Ms.toFixed(1)} ms` +
          (n.withoutCommitTime > 0 ? ` (${n.withoutCommitTime} messages without a commit time: lag from tx start)` : "") +
          `; receiver CPU ${n.receiverCpuUs.toFixed(0)} us/message`,
      );
    }
  });
  return { text: lines.join("\n"), median: med, targets };
}
