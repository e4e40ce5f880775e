/**
 * A worker stopped with SIGTERM (a rolling deploy) while it delivers notifications to a
 * slow receiver: it sends nothing new, records what it sent, gives the rest back and
 * exits at once, rather than sending on until it is cut off 15 s later with a round's
 * outcomes unrecorded and its claims leased for minutes. The next worker delivers the
 * rest: every message received once.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { waitReady, waitUntil } from "../helpers/load.ts";
import { cleanupsAfterAll, listeningUrl, startService } from "../helpers/process.ts";
import { startReceiver } from "../helpers/receiver.ts";

const API_TOKEN = "notify-stop-token-0123456789";
const CALLBACK_SECRET = "notify-stop-secret-0123456789";
/** More than one round (64) of deliveries: at 4 a time and 1 s each, a round lasts 16 s. */
const MESSAGES = 80;
const ANSWER_MS = 1000;

const cleanups = cleanupsAfterAll();

describe("SIGTERM to a worker delivering notifications to a slow receiver", () => {
  it("stops at once, its sends recorded and its unsent claims given back; the next worker sends each message once", async (t) => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const sql = driverSql(db.url, { max: 2 });
    cleanups.push(() => sql.end());
    const receiver = await startReceiver({ otherwise: () => ({ status: 200, delayMs: ANSWER_MS }) });
    cleanups.push(() => receiver.close());

    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-notify-stop-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const env = {
      DATABASE_URL: db.url,
      PORT: "0", // bound by the web process itself, read back below
      HOST: "127.0.0.1",
      API_TOKEN,
      CALLBACK_SECRET,
      LOG_LEVEL: "warn",
      DATA_DIR: dataDir,
      DB_POOL_MAX: "4",
      // Delivery runs to spare (all but two of the slots): a run is not made to give its
      // slot up after a second (deliver.ts RUN_SLICE_MS), and would go on through its round.
      WORKER_CONCURRENCY: "6",
      NOTIFY_ALLOW_PRIVATE_URLS: "true",
      NOTIFY_TIMEOUT_MS: "5000",
    };
    // At info, for its "web listening" line with the port it bound: a port picked here and
    // released could be taken by another test file's process before this one listens.
    const base = await listeningUrl(startService(cleanups, "web", { ...env, LOG_LEVEL: "info" }), "web listening");
    await waitReady(base);
    const api = (path: string, init: { method: string; json?: unknown }) =>
      fetch(`${base}${path}`, {
        method: init.method,
        headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
        body: init.json === undefined ? undefined : JSON.stringify(init.json),
      });
    const created = await api("/v1/notifications/endpoints", { method: "POST", json: { url: receiver.url } });
    assert.equal(created.status, 201, await created.clone().text());
    const endpoint = (await created.json()) as { id: string };
    // Every test ping is a message due at once: the worker starts with a backlog.
    const pings: string[] = [];
    for (let i = 0; i < MESSAGES; i++) {
      const ping = await api(`/v1/notifications/endpoints/${endpoint.id}/test`, { method: "POST" });
      assert.equal(ping.status, 202);
      pings.push(((await ping.json()) as { message_id: string }).message_id);
    }

    const worker = startService(cleanups, "worker", env);
    await waitUntil("the worker sending its first round", async () => receiver.received.length >= 6, 30_000, 5);
    const stopAt = Date.now();
    const code = await worker.kill("SIGTERM");
    const stopS = (Date.now() - stopAt) / 1000;
    assert.equal(code, 0, worker.output().slice(-2000));
    // What was in flight is answered within a second; the rest of the round is not sent.
    assert.ok(stopS < 5, `the worker took ${stopS.toFixed(1)} s to stop (the jobs' limit is 15 s)`);
    const sentBeforeStop = new Set(receiver.received.map((r) => String(r.headers["webhook-id"])));
    assert.ok(sentBeforeStop.size < 64, `${sentBeforeStop.size} sent: the round went on after the stop`);

    const rows = await sql<{ message_id: string; status: string; leased: boolean }[]>`
      select message_id, status, coalesce(leased_until > now(), false) as leased from notification_deliveries`;
    assert.deepEqual(rows.filter((r) => r.leased).map((r) => r.message_id), [], "no delivery is left leased to the stopped worker");
    const delivered = new Set(rows.filter((r) => r.status === "delivered").map((r) => r.message_id));
    assert.deepEqual([...sentBeforeStop].filter((id) => !delivered.has(id)), [], "every message the receiver answered is recorded delivered");

    // The next worker (the deploy's new one) sends the rest at once, not after a lease runs out.
    const next = startService(cleanups, "worker", env);
    await waitUntil(
      "every message delivered",
      async () => {
        const [row] = await sql<{ n: number }[]>`
          select count(*)::int as n from notification_deliveries where status = 'delivered' and message_id = any(${pings}::text[])`;
        return row!.n === MESSAGES;
      },
      45_000,
      100,
    ).catch(async (err: unknown) => {
      const deliveries = await sql`
        select status, attempts, count(*)::int as n, min(next_attempt_at) as next, max(leased_until) as leased
        from notification_deliveries group by 1, 2 order by 1, 2`;
      const jobs = await sql`select key, queue_name, run_at, attempts, locked_at, last_error from graphile_worker.jobs where task_identifier like 'notify%'`;
      throw new Error(`${String(err)} (now ${new Date().toISOString()})\ndeliveries: ${JSON.stringify(deliveries)}\njobs: ${JSON.stringify(jobs)}\nworker output:\n${next.output().slice(-3000)}`);
    });
    // The workers' own messages (awb.pool_low, as each starts with an empty pool) aside.
    const times = new Map<string, number>();
    for (const r of receiver.received) times.set(String(r.headers["webhook-id"]), (times.get(String(r.headers["webhook-id"])) ?? 0) + 1);
    assert.deepEqual(pings.filter((id) => !times.has(id)), []);
    assert.deepEqual([...times].filter(([, n]) => n > 1), [], "no message was sent twice");
    assert.equal(await next.kill("SIGTERM"), 0);
    t.diagnostic(`stopped in ${stopS.toFixed(1)} s after ${sentBeforeStop.size} sends; ${receiver.received.length} requests for ${MESSAGES} messages`);
  });
});
