/**
 * Crash safety under load (issue #6): real `web` and `worker` processes, callbacks sent
 * like the provider sends them (retried until a 200), processes killed with SIGKILL and
 * PostgreSQL stopped underneath them. Whatever happens, every 200 names an event that is
 * stored with the content that was sent, and every order converges to the fold of its
 * events.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { startEmbeddedPostgres } from "../../src/db/embedded.ts";
import type { EmbeddedServer } from "../../src/db/embedded.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { assertAcknowledgedStored, assertProjected, planCallbacks, startLoad, waitProjectionsDrained, waitReady, waitUntil } from "../helpers/load.ts";
import { cleanupsAfterAll, listeningUrl, startService } from "../helpers/process.ts";
import type { Proc } from "../helpers/process.ts";

const API_TOKEN = "crash-test-token-0123456789";
const CALLBACK_SECRET = "crash-test-secret-0123456789";

const cleanups = cleanupsAfterAll();
const start = (entry: "web" | "worker", env: Record<string, string>): Proc => startService(cleanups, entry, env);

/**
 * A web process on a port it binds itself (PORT=0), and its base URL read back from its
 * "web listening" line (so at info: the rest of its output stays quiet). A port picked here
 * and released could be taken by another test file's process before this one listens.
 */
async function startWeb(env: Record<string, string>, alongside?: () => void): Promise<{ web: Proc; base: string }> {
  const web = start("web", { ...env, LOG_LEVEL: "info" });
  alongside?.(); // started at the same moment as the web process, as before the port is known
  return { web, base: await listeningUrl(web, "web listening") };
}

/**
 * Small pools: the test server is shared (max_connections 100). A web process then uses at
 * most 6 connections, a worker 12 (see docs/reliability.md, "Connection budget").
 */
function processEnv(databaseUrl: string): Record<string, string> {
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-crash-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  return {
    DATABASE_URL: databaseUrl,
    PORT: "0",
    HOST: "127.0.0.1",
    API_TOKEN,
    CALLBACK_SECRET,
    LOG_LEVEL: "warn",
    DATA_DIR: dataDir,
    DB_POOL_MAX: "4",
    WORKER_CONCURRENCY: "3",
  };
}

/** Ids of the job runners (graphile-worker pools) holding a job lock right now. */
async function lockingWorkers(sql: postgres.Sql): Promise<string[]> {
  const rows = await sql<{ locked_by: string }[]>`select distinct locked_by from graphile_worker.jobs where locked_by is not null`;
  return rows.map((r) => r.locked_by);
}

describe("kill -9 under callback load", () => {
  it("web killed 3 times and worker killed 3 times mid-load: every acknowledged event stored once, every order equals the fold of its events", async () => {
    const started = Date.now();
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const sql = driverSql(db.url, { max: 2 });
    cleanups.push(() => sql.end());
    // Web processes take turns, as behind a load balancer: the next one is up before the
    // current one is killed, so the load keeps going while each dies mid-burst.
    let worker!: Proc;
    let { web, base } = await startWeb(processEnv(db.url), () => (worker = start("worker", processEnv(db.url))));
    await waitReady(base);

    // The callbacks go out in four parts: each kill happens while a part is being sent.
    const plan = planCallbacks({ prefix: "CRASH", orders: 200, svcBase: 7_100_000, duplicateRate: 0.1, seed: 6 });
    const part = Math.ceil(plan.callbacks.length / 4);
    const parts = [0, 1, 2, 3].map((i) => plan.callbacks.slice(i * part, (i + 1) * part));
    const load = startLoad([], { targets: () => [base], secret: CALLBACK_SECRET, concurrency: 16, ratePerSecond: 250, deadlineMs: 90_000, retryDelayMs: 100, open: true });
    cleanups.push(async () => load.stop());

    let webKills = 0;
    const deadWorkers = new Set<string>();
    let workerKills = 0;
    for (let round = 0; round < 3; round++) {
      // The web process dies with acknowledgements and group commits in flight.
      const next = await startWeb(processEnv(db.url));
      await waitReady(next.base);
      load.add(parts[round]!);
      await load.okGrowsBy(50);
      assert.equal(await web.kill("SIGKILL"), null);
      webKills++;
      ({ web, base } = next);
      // The worker dies holding job locks (projections in progress).
      let holding: string[] = [];
      await waitUntil("the worker holding a job", async () => (holding = (await lockingWorkers(sql)).filter((w) => !deadWorkers.has(w))).length > 0, 30_000, 5);
      assert.equal(await worker.kill("SIGKILL"), null);
      holding.forEach((w) => deadWorkers.add(w));
      workerKills++;
      worker = start("worker", processEnv(db.url));
    }
    load.add(parts[3]!);
    load.end();
    await load.done;
    const loadSeconds = (Date.now() - started) / 1000;
    assert.equal(load.remaining(), 0, `callbacks never acknowledged: ${JSON.stringify({ ...load.stats, okByTarget: undefined })}`);
    assert.deepEqual(load.stats.unexpected, []);

    // The last web and worker are never killed: that clean run drains the queue (the jobs
    // the killed workers held included).
    await waitProjectionsDrained(sql, 20_000, () => `worker output:\n${worker.output().slice(-3000)}`);

    const { acknowledged, stored } = await assertAcknowledgedStored(sql, load.acked, plan.unique);
    const orders = await assertProjected(sql, plan);
    const s = load.stats;
    console.log(
      `kill -9: web x${webKills} and worker x${workerKills}, each worker while running jobs; ` +
        `${s.attempts} attempts, ${s.ok} 200s (${s.duplicates} duplicate), ${s.connectionErrors} connection errors, ${s.unavailable} 503s; ` +
        `acknowledged ${acknowledged} distinct events, stored ${stored}; ${orders} orders (rows and stored fold states) equal the fold of their events ` +
        `[load ${loadSeconds.toFixed(1)} s, total ${((Date.now() - started) / 1000).toFixed(1)} s]`,
    );
    assert.equal(await web.kill("SIGTERM"), 0);
    assert.equal(await worker.kill("SIGTERM"), 0);
  });
});

describe("SIGTERM under callback load", () => {
  it("web and worker (DATABASE_URL set) finish in-flight work and exit 0, leaving no job locked", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const sql = driverSql(db.url, { max: 2 });
    cleanups.push(() => sql.end());
    const env = processEnv(db.url);
    let worker!: Proc;
    const { web, base } = await startWeb(env, () => (worker = start("worker", env)));
    await waitReady(base);
    // About 15 s of load: still running when the worker has stopped, whatever that takes.
    const plan = planCallbacks({ prefix: "TERM", orders: 200, svcBase: 7_300_000, duplicateRate: 0, seed: 3 });
    const load = startLoad(plan.callbacks, { targets: () => [base], secret: CALLBACK_SECRET, concurrency: 8, ratePerSecond: 100, deadlineMs: 60_000 });
    cleanups.push(async () => load.stop());

    // Hold the projection lock of one order, so that the drain job projecting it is
    // certainly running (blocked) when the worker is told to stop.
    const blocker = driverSql(db.url, { max: 1 });
    cleanups.push(() => blocker.end());
    await blocker`select pg_advisory_lock(hashtextextended('coid:TERM-BLOCKED', 0))`;
    const res = await fetch(`${base}/callbacks/${CALLBACK_SECRET}`, {
      method: "POST",
      body: JSON.stringify({ client_order_id: "TERM-BLOCKED", order_status: "CREATED", event_time: "2026-11-22T10:00:00Z" }),
    });
    assert.equal(res.status, 200);
    let holding: string[] = [];
    await waitUntil(
      "the worker running the blocked job",
      async () => {
        // Waiting for that very lock: appends may wait a moment on the drain's gate (also
        // an advisory lock), and a stop then would find the blocked order not yet taken.
        // A bigint key shows in pg_locks as classid (high half) and objid (low half).
        const rows = await sql<{ locked_by: string; waiting: boolean }[]>`
          select locked_by, exists (
            select 1 from pg_locks l join pg_database d on d.oid = l.database
            where l.locktype = 'advisory' and not l.granted and d.datname = current_database() and l.objsubid = 1
              and ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended('coid:TERM-BLOCKED', 0)) as waiting
          from graphile_worker.jobs where task_identifier = 'projection__drain' and locked_by is not null`;
        holding = rows.map((r) => r.locked_by);
        return rows.some((r) => r.waiting);
      },
      30_000,
      20,
    );
    const exited = worker.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(worker.child.exitCode, null, "a stopping worker waits for its running job");
    await blocker`select pg_advisory_unlock(hashtextextended('coid:TERM-BLOCKED', 0))`;
    assert.equal(await exited, 0, worker.output().slice(-2000));
    const stillLocked = (await lockingWorkers(sql)).filter((w) => holding.includes(w));
    assert.deepEqual(stillLocked, [], "a stopped worker leaves no job locked");
    const [blocked] = await sql<{ status: string }[]>`select status from orders where client_order_id = 'TERM-BLOCKED'`;
    assert.equal(blocked?.status, "CREATED", "the job it was running finished");

    await load.okGrowsBy(50);
    assert.equal(await web.kill("SIGTERM"), 0, web.output().slice(-2000));
    load.stop();
    await load.done;
    // Every 200 it gave before stopping is stored.
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from order_events where id = any(${load.acked.map((a) => a.eventId)}::bigint[])`;
    assert.equal(row!.n, new Set(load.acked.map((a) => a.eventId)).size);
  });
});

describe("PostgreSQL stopped and started mid-load", () => {
  it("callbacks get 503 while it is down and no 200 is lost; web and worker recover without a restart", async () => {
    const started = Date.now();
    // A private server: the one other tests share is never stopped.
    const dir = mkdtempSync(join(tmpdir(), "tracklane-pgstop-"));
    chmodSync(dir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const log = createLogger({ level: "silent" });
    let server: EmbeddedServer = await startEmbeddedPostgres(join(dir, "pg"), log);
    cleanups.push(() => server.stop());
    const admin = driverSql(server.url("postgres"), { max: 1 });
    await admin`create database tracklane`;
    await admin.end();
    const url = server.url("tracklane");
    await runMigrations(url, log);

    const env = processEnv(url);
    let worker!: Proc;
    const { web, base } = await startWeb(env, () => (worker = start("worker", env)));
    await waitReady(base);

    const plan = planCallbacks({ prefix: "PGSTOP", orders: 150, svcBase: 7_200_000, duplicateRate: 0.1, seed: 9 });
    const load = startLoad(plan.callbacks, { targets: () => [base], secret: CALLBACK_SECRET, concurrency: 16, ratePerSecond: 250, deadlineMs: 45_000 });
    cleanups.push(async () => load.stop());
    await load.okGrowsBy(300);

    const before = { ...load.stats };
    await server.stop();
    const stoppedAt = Date.now();
    await waitUntil("503s while PostgreSQL is down", async () => load.stats.unavailable - before.unavailable >= 50, 10_000);
    await new Promise((r) => setTimeout(r, Math.max(0, stoppedAt + 3000 - Date.now()))); // down for 3 s at least
    assert.equal((await fetch(`${base}/healthz`)).status, 200, "the web process is up");
    assert.equal((await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(3000) })).status, 503, "and says at once that it is not ready");
    const okWhileDown = load.acked.filter((a) => a.at > stoppedAt + 500).length;
    const unavailableWhileDown = load.stats.unavailable - before.unavailable;
    assert.ok(load.stats.slowest503Ms < 3000, `503s come at once, not after a reconnect backoff (slowest ${load.stats.slowest503Ms} ms)`);

    server = await startEmbeddedPostgres(join(dir, "pg"), log, { port: server.port });
    const restartedAt = new Date();
    await load.okGrowsBy(100, 20_000); // the web process answers 200 again
    await load.done;
    assert.equal(load.remaining(), 0, `callbacks never acknowledged: ${JSON.stringify({ ...load.stats, okByTarget: undefined })}`);
    assert.deepEqual(load.stats.unexpected, []);
    assert.equal(load.stats.connectionErrors, 0, "the web process never went away");

    // The same worker process projects again: no restart in between.
    const sql = driverSql(url, { max: 2 });
    cleanups.push(() => sql.end());
    await waitProjectionsDrained(sql, 30_000, () => `worker exit code ${worker.child.exitCode}, output:\n${worker.output().split("\n").filter((l) => /"level":(40|50|60)|Error|error:/.test(l)).slice(-15).join("\n").slice(-6000)}`);
    const [projectedAfter] = await sql<{ n: number }[]>`select count(*)::int as n from orders where updated_at > ${restartedAt}`;
    assert.ok(projectedAfter!.n > 0, "the worker projected orders after PostgreSQL came back");
    assert.equal(web.child.exitCode, null, `web exited:\n${web.output().slice(-3000)}`);
    assert.equal(worker.child.exitCode, null, `worker exited:\n${worker.output().slice(-3000)}`);

    const { acknowledged, stored } = await assertAcknowledgedStored(sql, load.acked, plan.unique);
    const orders = await assertProjected(sql, plan);
    const replaced = /replacing it once the database is back/.test(worker.output());
    console.log(
      `PostgreSQL down ${restartedAt.getTime() - stoppedAt} ms: ${unavailableWhileDown} 503s while down (slowest ${load.stats.slowest503Ms} ms), ${okWhileDown} 200s while down; ` +
        `worker ${replaced ? "replaced its job runner" : "kept its job runner"}; ` +
        `total ${load.stats.ok} 200s, ${load.stats.unavailable} 503s; acknowledged ${acknowledged} distinct events, stored ${stored}; ` +
        `${projectedAfter!.n} orders projected after the restart by the same worker, ${orders} orders (rows and stored fold states) equal the fold of their events ` +
        `[${((Date.now() - started) / 1000).toFixed(1)} s]`,
    );
    assert.equal(await web.kill("SIGTERM"), 0);
    assert.equal(await worker.kill("SIGTERM"), 0);
  });
});
