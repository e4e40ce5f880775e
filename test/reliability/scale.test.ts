/**
 * Scale-out (issue #6): any number of web and worker processes may run on one database.
 * The same callbacks sent to 1 web + 1 worker and to 2 web + 2 worker processes (load
 * spread over both web processes, each on its own port) leave the same events and the
 * same order rows.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { assertAcknowledgedStored, assertProjected, planCallbacks, readEvents, readOrders, startLoad, waitProjectionsDrained, waitReady } from "../helpers/load.ts";
import type { LoadPlan } from "../helpers/load.ts";
import { listeningUrl, startProcess } from "../helpers/process.ts";
import type { Proc } from "../helpers/process.ts";

const API_TOKEN = "scale-test-token-0123456789";
const CALLBACK_SECRET = "scale-test-secret-0123456789";

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

interface RunResult {
  events: unknown[];
  orders: unknown[];
  okByWeb: number[];
  jobsByWorker: number[];
  acknowledged: number;
}

/** Runs `webs` web and `workers` worker processes on a fresh database and sends the plan. */
async function run(plan: LoadPlan, webs: number, workers: number): Promise<RunResult> {
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  const sql = driverSql(db.url, { max: 2 });
  cleanups.push(() => sql.end());
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-scale-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  // Small pools: the test server is shared (max_connections 100); 2 + 2 processes use at
  // most 2 × 6 + 2 × 12 connections (docs/reliability.md, "Connection budget").
  const env = { DATABASE_URL: db.url, HOST: "127.0.0.1", API_TOKEN, CALLBACK_SECRET, LOG_LEVEL: "warn", DATA_DIR: dataDir, DB_POOL_MAX: "4", WORKER_CONCURRENCY: "3" };
  const procs: Proc[] = [];
  const bases: string[] = [];
  // PORT=0: each web process binds a free port itself and names it in its "web listening"
  // line (at info for that line); a port picked here and released could be taken by another
  // test file's process before this one listens.
  const webProcs = Array.from({ length: webs }, () => startProcess("src/web.ts", { ...env, PORT: "0", LOG_LEVEL: "info" }));
  procs.push(...webProcs);
  // Workers log each completed job at info: that shows every worker took part.
  const workerProcs = Array.from({ length: workers }, () => startProcess("src/worker.ts", { ...env, PORT: "0", LOG_LEVEL: "debug" }));
  procs.push(...workerProcs);
  cleanups.push(async () => void (await Promise.all(procs.map((p) => p.kill("SIGKILL")))));
  bases.push(...(await Promise.all(webProcs.map((w) => listeningUrl(w, "web listening")))));
  await Promise.all([...bases.map((b) => waitReady(b)), ...workerProcs.map((w) => w.waitFor(/"msg":"worker running"/, 30_000))]);

  const t0 = Date.now();
  const load = startLoad(plan.callbacks, { targets: () => bases, secret: CALLBACK_SECRET, concurrency: 16, ratePerSecond: 400, deadlineMs: 90_000 });
  await load.done;
  const t1 = Date.now();
  assert.equal(load.remaining(), 0, `callbacks never acknowledged: ${JSON.stringify({ ...load.stats, okByTarget: undefined })}`);
  assert.deepEqual(load.stats.unexpected, []);
  await waitProjectionsDrained(sql, 20_000);
  console.log(`scale-out ${webs} web + ${workers} worker: callbacks all acknowledged in ${t1 - t0} ms, projections done ${Date.now() - t1} ms later`);

  const { acknowledged } = await assertAcknowledgedStored(sql, load.acked, plan.unique);
  await assertProjected(sql, plan);
  const events = (await readEvents(sql)).map(({ dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload }) => ({
    dedupe_key,
    kind,
    svc_order_id,
    client_order_id,
    provider_status,
    occurred_at,
    payload,
  }));
  events.sort((a, b) => a.dedupe_key.localeCompare(b.dedupe_key));
  const orders = await readOrders(sql);
  for (const p of procs) assert.equal(await p.kill("SIGTERM"), 0, p.output().slice(-2000));
  return {
    events,
    orders,
    okByWeb: bases.map((b) => load.stats.okByTarget.get(b) ?? 0),
    jobsByWorker: workerProcs.map((w) => w.output().match(/Completed task \d+ \(projection__drain/g)?.length ?? 0),
    acknowledged,
  };
}

describe("scale-out", () => {
  it("2 web + 2 worker processes on one database store the same events and project the same orders as 1 + 1", async () => {
    const started = Date.now();
    const plan = planCallbacks({ prefix: "SCALE", orders: 150, svcBase: 7_400_000, duplicateRate: 0.1, seed: 12 });
    const single = await run(plan, 1, 1);
    const scaled = await run(plan, 2, 2);

    assert.ok(scaled.okByWeb.every((n) => n > 100), `load reached both web processes: ${scaled.okByWeb.join(", ")}`);
    // Drain jobs per worker are reported, not asserted: while one loop keeps up, appends add
    // no jobs (src/projection/backlog.ts, DRAIN_GATE) and the other worker's loop may stay idle.
    assert.equal(scaled.events.length, plan.unique);
    assert.deepEqual(scaled.events, single.events, "the same events, with the same content");
    assert.equal(scaled.orders.length, plan.orders.size);
    assert.deepEqual(scaled.orders, single.orders, "the same order rows (ids and wall-clock timestamps aside)");
    console.log(
      `scale-out: ${plan.callbacks.length} callbacks (${plan.unique} distinct) for ${plan.orders.size} orders; ` +
        `1+1: ${single.acknowledged} events stored, ${single.orders.length} orders (${single.jobsByWorker.join("")} projection jobs); ` +
        `2+2: 200s per web ${scaled.okByWeb.join(" / ")}, projection jobs per worker ${scaled.jobsByWorker.join(" / ")}, ` +
        `${scaled.acknowledged} events stored, ${scaled.orders.length} orders; events and order rows identical ` +
        `[${((Date.now() - started) / 1000).toFixed(1)} s]`,
    );
  });
});
