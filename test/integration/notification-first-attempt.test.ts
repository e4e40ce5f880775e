/**
 * NOTIFY_RETRY_SCHEDULE, entry by entry: entry k is the delay before attempt k+1, so a
 * schedule of n entries makes n attempts and a new message's first attempt waits entry 0.
 * What a person asks for (a test ping, a resend) goes at once. Real PostgreSQL, the
 * delivery job run as the worker runs it, a receiver on loopback.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { enqueueDelivery } from "../../src/notify/deliveries.ts";
import { configureOutbox, recordMessage } from "../../src/notify/outbox.ts";
import { startServices } from "../../src/runtime/services.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

// Long enough that the callback and the first runJobs end before it has passed, also on a
// loaded machine: else the delivery would be due, and sent, before "nothing sent yet" is asserted.
const FIRST_DELAY_S = 5;

describe("NOTIFY_RETRY_SCHEDULE's first entry", () => {
  let t: TestApp;
  let r: Receiver;
  let endpointId: string;

  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: `${FIRST_DELAY_S},0` });
    r = await startReceiver();
    const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: r.url } });
    assert.equal(res.status, 201);
    endpointId = ((await res.json()) as { id: string }).id;
  });
  after(async () => {
    await r.close();
    await t.close();
  });

  /** The delivery's first attempt's delay after its message was written, in seconds. */
  const firstDelay = async (messageId: string) => {
    const [d] = await t.database.sql<{ s: number }[]>`
      select extract(epoch from next_attempt_at - created_at)::float8 as s from notification_deliveries where message_id = ${messageId}`;
    return d!.s;
  };

  const created = async (messageId: string) =>
    (await t.database.sql<{ at: Date }[]>`select created_at as at from notification_messages where id = ${messageId}`)[0]!.at;

  it("a new message's first attempt waits entry 0; the delivery job runs then; two entries, two attempts", async () => {
    r.answers.push(500, 500);
    assert.equal((await t.callback({ client_order_id: "FD-1", svc_order_id: "7001", order_status: "ALLOTTED" })).status, 200);
    await t.runJobs();
    const [message] = await t.database.sql<{ id: string }[]>`select id from notification_messages where client_order_id = 'FD-1'`;
    assert.ok(message, "the projection wrote the message");
    assert.equal(await firstDelay(message.id), FIRST_DELAY_S);
    const jobs = await t.database.sql<{ key: string; in_s: number }[]>`
      select key, extract(epoch from run_at - now())::float8 as in_s from graphile_worker.jobs where task_identifier = 'notify__deliver'`;
    assert.equal(jobs.length, 1);
    assert.match(jobs[0]!.key, new RegExp(`^notify:${endpointId}:\\d+$`), "a timed run, not the at-once one a resend would replace");
    assert.ok(jobs[0]!.in_s > 0 && jobs[0]!.in_s <= FIRST_DELAY_S, `the run waits too: ${jobs[0]!.in_s} s`);
    assert.equal(r.received.length, 0, "nothing sent before entry 0 has passed");

    await new Promise((done) => setTimeout(done, FIRST_DELAY_S * 1000 + 100));
    await t.runJobs();
    // Attempt 1 after entry 0, attempt 2 after entry 1 (0 s, in the same run), then failed.
    assert.equal(r.received.length, 2);
    assert.ok(r.received[0]!.at - (await created(message.id)).getTime() >= FIRST_DELAY_S * 1000 - 50, "sent after entry 0");
    const [d] = await t.database.sql<{ status: string; attempts: number }[]>`select status, attempts from notification_deliveries where message_id = ${message.id}`;
    assert.deepEqual([d!.status, d!.attempts], ["failed", 2]);
  });

  it("a test ping and a resend, asked for by a person, go at once", async () => {
    r.received.length = 0;
    const ping = await t.request(`/v1/notifications/endpoints/${endpointId}/test`, { method: "POST" });
    assert.equal(ping.status, 202);
    const { message_id } = (await ping.json()) as { message_id: string };
    assert.equal(await firstDelay(message_id), 0);
    await t.runJobs();
    assert.equal(r.received.length, 1);

    const [failed] = await t.database.sql<{ id: string }[]>`select id from notification_messages where client_order_id = 'FD-1'`;
    assert.equal((await t.request(`/v1/notifications/messages/${failed!.id}/resend`, { method: "POST" })).status, 202);
    await t.runJobs();
    assert.equal(r.received.length, 2, "the resend went without waiting entry 0");
    assert.equal(r.received[1]!.headers["webhook-id"], failed!.id);
  });

  it("is what `npm run web` and `npm run worker` configure (runtime/services.ts)", async () => {
    const config = loadConfig({
      DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-test-")),
      DATABASE_URL: t.testDb.url,
      API_TOKEN,
      CALLBACK_SECRET,
      NOTIFY_RETRY_SCHEDULE: "7,0",
    });
    const services = await startServices({ config, databaseUrl: t.testDb.url, log: createLogger({ level: "silent" }), web: true, worker: false, port: 0 });
    try {
      const id = await t.database.sql.begin((tx) => recordMessage(tx, { type: "awb.pool_low", data: { pool: { available: 1, low_watermark: 5 } } }));
      assert.ok(id);
      assert.equal(await firstDelay(id), 7);
    } finally {
      await services.stop();
      configureOutbox(t.config.notify);
    }
  });

  it("the outbox's runs and the worker's are keyed by one definition: the same endpoint and second fold into one job", async () => {
    const deliverJobs = () =>
      t.database.sql<{ key: string; run_at: Date }[]>`
        select key, run_at from graphile_worker.jobs where task_identifier = 'notify__deliver' and queue_name = ${`notify:${endpointId}`} order by id`;
    const before = (await deliverJobs()).map((j) => j.key);
    assert.equal((await t.callback({ client_order_id: "FD-KEY", svc_order_id: "7003", order_status: "ALLOTTED" })).status, 200);
    await t.runJobs();
    const jobs = await deliverJobs();
    const timed = jobs.at(-1)!;
    assert.deepEqual(jobs.map((j) => j.key), [...before, timed.key], "the outbox's timed run");
    assert.match(timed.key, new RegExp(`^notify:${endpointId}:\\d+$`));
    // The worker's run for the same second (deliveries.enqueueDelivery) is the outbox's job, not a second one.
    await enqueueDelivery(t.database.sql, endpointId, new Date(timed.run_at.getTime() + 1));
    assert.deepEqual((await deliverJobs()).map((j) => j.key), [...before, timed.key]);
    // A run now: the worker's and the outbox's (a test ping) share the at-once key.
    await enqueueDelivery(t.database.sql, endpointId);
    assert.equal((await t.request(`/v1/notifications/endpoints/${endpointId}/test`, { method: "POST" })).status, 202);
    assert.deepEqual((await deliverJobs()).map((j) => j.key), [...before, timed.key, `notify:${endpointId}`]);
  });

  it("the delivery run's queue and key are written in one place (outbox.ts deliveryJob)", () => {
    const src = join(import.meta.dirname, "../../src");
    const files = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
    // In code: 'notify:' in SQL, `notify:${…}` in TypeScript (doc comments write `notify:<endpoint>`).
    const writers = files.filter((f) => /'notify:'|`notify:\$\{/.test(readFileSync(join(src, f), "utf8")));
    assert.deepEqual(writers, ["notify/outbox.ts"]);
    const outbox = readFileSync(join(src, "notify/outbox.ts"), "utf8");
    assert.equal(outbox.match(/'notify:'|`notify:\$\{/g)?.length, 2, "queue_name and job_key, in deliveryJob");
  });
});
