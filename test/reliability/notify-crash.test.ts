/**
 * Notifications survive a worker killed mid-delivery: real `web` and `worker` processes,
 * a receiver on 127.0.0.1 that takes 1-1.5 s to answer, callbacks moving orders while
 * messages are delivered, the worker SIGKILLed while the receiver holds requests, a new
 * worker started. In the end every message (every committed status change) was received
 * at least once, every request received verifies, and every attempt of a message carried
 * that message's one webhook-id and body.
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
import type { Proc } from "../helpers/process.ts";
import { startReceiver, verify } from "../helpers/receiver.ts";
import type { Message } from "../helpers/receiver.ts";

const API_TOKEN = "notify-crash-token-0123456789";
const CALLBACK_SECRET = "notify-crash-secret-0123456789";
const ORDERS = 10;
const STATUSES = ["ALLOTTED", "ARRIVED", "COLLECTED", "DELIVERED"];
/**
 * One attempt's timeout, above the receiver's slowest answer. A run killed mid-send leaves
 * what it claimed leased for a time that grows with it (deliver.ts): until then nobody
 * sends those messages again.
 */
const TIMEOUT_MS = 2000;
/** How long the end may take after the kill: the lease, a new worker's start, the rest of the messages. */
const SETTLE_MS = 75_000;

const cleanups = cleanupsAfterAll();
const start = (entry: "web" | "worker", env: Record<string, string>): Proc => startService(cleanups, entry, env);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("kill -9 of a worker delivering notifications", () => {
  it("every message is received at least once, verified, each with one webhook-id on every attempt", async (t) => {
    const started = Date.now();
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const sql = driverSql(db.url, { max: 2 });
    cleanups.push(() => sql.end());
    const receiver = await startReceiver({ otherwise: () => ({ status: 200, delayMs: 1000 + Math.floor(Math.random() * 500) }) });
    cleanups.push(() => receiver.close());

    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-notify-crash-"));
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
      WORKER_CONCURRENCY: "3",
      NOTIFY_ALLOW_PRIVATE_URLS: "true",
      NOTIFY_TIMEOUT_MS: String(TIMEOUT_MS),
      NOTIFY_RETRY_SCHEDULE: "0,1,1,1,1,1,1,1",
    };
    // At info, for its "web listening" line with the port it bound: a port picked here and
    // released could be taken by another test file's process before this one listens.
    const web = start("web", { ...env, LOG_LEVEL: "info" });
    let worker = start("worker", env);
    const base = await listeningUrl(web, "web listening");
    await waitReady(base);

    const res = await fetch(`${base}/v1/notifications/endpoints`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ url: receiver.url, events: ["order.status_changed"] }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    const endpoint = (await res.json()) as { id: string; secret: string };

    // Each order walks through STATUSES, the orders interleaved, one callback every 100 ms.
    // A projection that takes several of an order's events at once commits one status change
    // for them (while no worker runs, events wait): up to ORDERS x STATUSES messages.
    const callbacks = STATUSES.flatMap((status, step) =>
      Array.from({ length: ORDERS }, (_, i) => ({
        client_order_id: `NC-${i}`,
        svc_order_id: String(660_000 + i),
        order_status: status,
        timestamp: new Date(Date.UTC(2026, 10, 23, 10, step, i)).toISOString(),
      })),
    );
    const produce = (async () => {
      for (const body of callbacks) {
        for (;;) {
          const r = await fetch(`${base}/callbacks/${CALLBACK_SECRET}`, { method: "POST", body: JSON.stringify(body) }).catch(() => null);
          if (r?.status === 200) break;
          await sleep(100);
        }
        await sleep(100);
      }
    })();

    // Kill the worker mid-delivery: it has sent some, and the receiver holds requests it sent.
    await waitUntil("the receiver holding requests mid-stream", async () => receiver.received.length >= 6 && receiver.holding >= 2, 30_000, 5);
    const heldAtKill = receiver.held().map((r) => String(r.headers["webhook-id"]));
    const receivedAtKill = receiver.received.length;
    assert.equal(await worker.kill("SIGKILL"), null);
    const killedAt = Date.now();
    worker = start("worker", env);
    await produce;
    const producedAt = Date.now();

    // Everything is delivered in the end: the killed run's leases run out and a new run sends them again.
    await waitUntil(
      "every message written and delivered",
      async () => {
        // An order's messages are written in the transaction that moves it: once every order is
        // DELIVERED, every message exists.
        const [row] = await sql<{ done: number; undelivered: number; queued: number }[]>`
          select (select count(*) from orders where status = 'DELIVERED')::int as done,
                 (select count(*) from notification_deliveries where status <> 'delivered')::int as undelivered,
                 (select count(*) from projection_queue)::int as queued`;
        return row!.done === ORDERS && row!.undelivered === 0 && row!.queued === 0;
      },
      SETTLE_MS,
      250,
    ).catch(async (err: unknown) => {
      const deliveries = await sql`
        select status, attempts, count(*)::int as n, min(next_attempt_at) as next, max(leased_until) as leased
        from notification_deliveries group by 1, 2 order by 1, 2`;
      const jobs = await sql`
        select task_identifier, queue_name, run_at, attempts, locked_at, last_error from graphile_worker.jobs
        where task_identifier like 'notify%'`;
      throw new Error(
        `${String(err)} (now ${new Date().toISOString()})\ndeliveries: ${JSON.stringify(deliveries)}\njobs: ${JSON.stringify(jobs)}\n` +
          `worker output:\n${worker.output().slice(-3000)}`,
      );
    });
    await sleep(200); // a last re-send in flight, if any, is counted

    const rows = await sql<{ id: string; body: string; type: string; client_order_id: string }[]>`
      select id, body, type, client_order_id from notification_messages order by id`;
    const bodies = new Map(rows.map((r) => [r.id, r.body]));
    assert.ok(rows.every((r) => r.type === "order.status_changed"));
    // Every committed status change has its message: each order's messages form one unbroken
    // chain from no status to DELIVERED.
    for (let i = 0; i < ORDERS; i++) {
      const chain = rows.filter((r) => r.client_order_id === `NC-${i}`).map((r) => JSON.parse(r.body) as Message);
      assert.deepEqual(
        chain.map((m) => [m.data.sequence, m.data.previous_status]),
        chain.map((_, k) => [k + 1, k === 0 ? null : chain[k - 1]!.data.order?.status]),
        `NC-${i}'s messages`,
      );
      assert.equal(chain.at(-1)?.data.order?.status, "DELIVERED");
    }

    const times = new Map<string, number>();
    const idsByBody = new Map<string, Set<string>>();
    for (const r of receiver.received) {
      const id = String(r.headers["webhook-id"]);
      const message = verify(endpoint.secret, r); // throws if it does not verify
      assert.equal(message.type, "order.status_changed");
      assert.equal(r.body, bodies.get(id), `the body received under ${id} is that message's`);
      times.set(id, (times.get(id) ?? 0) + 1);
      idsByBody.set(r.body, (idsByBody.get(r.body) ?? new Set()).add(id));
    }
    const missing = rows.filter((r) => !times.has(r.id)).map((r) => r.id);
    assert.deepEqual(missing, [], "every message was received");
    assert.ok([...idsByBody.values()].every((ids) => ids.size === 1), "every attempt of a message carried the same webhook-id");
    for (const id of heldAtKill) assert.ok((times.get(id) ?? 0) >= 2, `${id}, held when the worker was killed, was sent again`);

    const duplicates = receiver.received.length - times.size;
    assert.ok(duplicates >= heldAtKill.length);
    t.diagnostic(
      `messages created ${rows.length} (${callbacks.length} status callbacks); requests received ${receiver.received.length} (${times.size} distinct messages, ${duplicates} duplicates); ` +
        `worker killed after ${receivedAtKill} requests, holding ${heldAtKill.length}; ` +
        `callbacks done ${((producedAt - killedAt) / 1000).toFixed(1)} s after the kill, all delivered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after it ` +
        `[total ${((Date.now() - started) / 1000).toFixed(1)} s]`,
    );
  });
});
