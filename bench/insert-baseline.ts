/**
 * Baseline (a): what PostgreSQL does with one single-row INSERT per commit, in its own
 * process. `connections` loops, each on its own postgres.js connection, insert the
 * scenario's events one at a time (autocommit: every statement is a transaction with its
 * own commit and WAL flush) into a table shaped like order_events (`LIKE ... INCLUDING
 * ALL`: same columns, unique dedupe key, partial indexes, checks), with the same ON
 * CONFLICT and RETURNING as the real insert.
 */
import { createHash } from "node:crypto";
import { driverSql } from "../src/db/client.ts";
import { RequestSequence, scenarioEvent } from "./lib/scenario.ts";
import type { Scenario } from "./lib/scenario.ts";
import { percentile } from "./lib/stats.ts";

export interface InsertConfig {
  url: string;
  table: string;
  connections: number;
  warmupS: number;
  durationS: number;
  scenario: Scenario;
}

export interface InsertResult {
  rows: number;
  elapsedS: number;
  rowsPerS: number;
  latency: { p50: number; p99: number };
}

async function runInserts(config: InsertConfig): Promise<InsertResult> {
  const sql = driverSql(config.url, { max: config.connections, connection: { application_name: "bench-insert" } });
  // No duplicates here: every insert is a new row.
  const sequence = new RequestSequence({ ...config.scenario, dupEvery: 0 });
  const table = sql(config.table);
  let measuring = false;
  let stop = false;
  let rows = 0;
  const latencies: number[] = [];
  const loop = async () => {
    while (!stop) {
      const next = sequence.next();
      if (next === null) break;
      const e = scenarioEvent(config.scenario, next.u);
      const b = e.body;
      const text = JSON.stringify(b);
      const started = performance.now();
      await sql`
        insert into ${table} (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload, period)
        values (${createHash("sha256").update(text).digest("hex").slice(0, 32)}, 'provider', ${e.kind}, ${String(b["sfx_order_id"])},
                ${b["client_order_id"] as string}, ${(b["order_status"] as string | undefined) ?? null},
                ${new Date()}, ${text}::jsonb, (now() at time zone 'UTC')::date)
        on conflict ((coalesce(svc_order_id, client_order_id)), dedupe_key, kind, period) do nothing
        returning id`;
      if (measuring) {
        rows++;
        latencies.push(performance.now() - started);
      }
    }
  };
  try {
    // Open every connection before the clock starts.
    await Promise.all(Array.from({ length: config.connections }, () => sql`select 1`));
    const loops = Array.from({ length: config.connections }, loop);
    await new Promise((r) => setTimeout(r, config.warmupS * 1000));
    measuring = true;
    const started = performance.now();
    await new Promise((r) => setTimeout(r, config.durationS * 1000));
    measuring = false;
    const elapsedS = (performance.now() - started) / 1000;
    stop = true;
    await Promise.all(loops);
    latencies.sort((x, y) => x - y);
    return { rows, elapsedS, rowsPerS: rows / elapsedS, latency: { p50: percentile(latencies, 50), p99: percentile(latencies, 99) } };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const config = JSON.parse(process.argv[2] ?? "{}") as InsertConfig;
runInserts(config).then(
  (result) => process.send!(result, () => process.exit(0)),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
