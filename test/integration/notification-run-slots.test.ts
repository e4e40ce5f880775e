/**
 * Delivery runs never take every worker slot: a run holds its slot while its endpoint has
 * something due, and each send to a receiver that hangs lasts the whole timeout, so with as
 * many hanging endpoints as WORKER_CONCURRENCY nothing else (projection, provider commands)
 * would run. A runner runs at most WORKER_CONCURRENCY − 2 delivery runs at once; another
 * comes back a second later. Real PostgreSQL, receivers on loopback.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { deliverDue, deliveryRunsOf } from "../../src/notify/deliver.ts";
import type { DeliverDeps, RunSlots } from "../../src/notify/deliver.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

const ENDPOINTS = "/v1/notifications/endpoints";

describe("delivery runs and worker slots", () => {
  let t: TestApp;
  const receivers: Receiver[] = [];

  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0" });
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await t.close();
  });

  const deps = (runs: RunSlots): DeliverDeps => ({
    sql: t.database.sql,
    log: t.log,
    metrics: t.metrics,
    settings: { timeoutMs: 1500, retryScheduleS: [0], allowPrivateUrls: true, burstEventsS: 0, burstMaxWaitS: 60 },
    load: { note: () => undefined, perSecond: () => 0 },
    runs,
  });

  /** An endpoint with one test.ping due, its receiver answering as `hang` says. */
  const endpointWithPing = async (hang: boolean) => {
    const r = await startReceiver(hang ? { otherwise: () => "hang" } : {});
    receivers.push(r);
    const res = await t.request(ENDPOINTS, { method: "POST", json: { url: r.url } });
    assert.equal(res.status, 201);
    const id = ((await res.json()) as { id: string }).id;
    assert.equal((await t.request(`${ENDPOINTS}/${id}/test`, { method: "POST" })).status, 202);
    return { r, id };
  };

  it("leaves two of the worker's slots to other jobs (at least one run)", () => {
    assert.deepEqual([1, 2, 3, 8, 64].map(deliveryRunsOf), [1, 1, 1, 6, 62]);
  });

  it("a run beyond the limit sends nothing and comes back in a second; once a slot is free it sends", async () => {
    const runs: RunSlots = { active: 0, max: 1 };
    const hung = await endpointWithPing(true);
    const other = await endpointWithPing(false);
    const first = deliverDue(deps(runs), hung.id);
    await hung.r.waitFor(1);
    assert.equal(runs.active, 1);

    const startedAt = Date.now();
    assert.equal(await deliverDue(deps(runs), other.id), 0);
    assert.ok(Date.now() - startedAt < 1000, "put off at once, not after the hanging send");
    assert.equal(other.r.received.length, 0);
    const [job] = await t.database.sql<{ run_at: Date }[]>`
      select run_at from graphile_worker.jobs where task_identifier = 'notify__deliver' and key like ${`notify:${other.id}:%`} and run_at > now()`;
    assert.ok(job, "a run is scheduled for the endpoint put off");
    assert.ok(job.run_at.getTime() - Date.now() <= 1500, `comes back at ${job.run_at.toISOString()}`);

    assert.equal(await first, 1);
    assert.equal(runs.active, 0);
    assert.equal(await deliverDue(deps(runs), other.id), 1);
    assert.equal(other.r.received.length, 1);
  });

  it("a run to a receiver that hangs gives its slot up after its turn: another endpoint waits about one timeout, not a whole round", async () => {
    const runs: RunSlots = { active: 0, max: 1 };
    const hung = await endpointWithPing(true);
    for (let i = 0; i < 15; i++) assert.equal((await t.request(`${ENDPOINTS}/${hung.id}/test`, { method: "POST" })).status, 202);
    const other = await endpointWithPing(false);
    const first = deliverDue(deps(runs), hung.id);
    await hung.r.waitFor(4);
    // The other endpoint's run, put off while the slot is taken, comes back until it sends.
    const startedAt = Date.now();
    while ((await deliverDue(deps(runs), other.id)) === 0) {
      assert.ok(Date.now() - startedAt < 15_000, "never got the slot");
      await new Promise((r) => setTimeout(r, 50));
    }
    const waited = Date.now() - startedAt;
    // 16 hanging sends, 4 at a time, 1.5 s each, were 6 s; now the 4 in flight when its turn ended.
    assert.ok(waited < 3000, `waited ${waited} ms for the hanging endpoint's run`);
    assert.equal(await first, 4);
    assert.equal(hung.r.received.length, 4);
    const [left] = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from notification_deliveries
      where endpoint_id = ${hung.id} and status = 'pending' and attempts = 0 and leased_until is null`;
    assert.equal(left!.n, 12, "what it did not send is given back, untouched");
    const [job] = await t.database.sql<{ run_at: Date }[]>`
      select run_at from graphile_worker.jobs where task_identifier = 'notify__deliver' and key like ${`notify:${hung.id}:%`} and run_at > now()`;
    assert.ok(job, "its run comes back");
  });

  it("an endpoint that gave its slot up goes behind: a run of it leaves a free slot to one put off lately, even when both start together", async () => {
    const runs: RunSlots = { active: 0, max: 1 };
    const hung = await endpointWithPing(true);
    for (let i = 0; i < 7; i++) assert.equal((await t.request(`${ENDPOINTS}/${hung.id}/test`, { method: "POST" })).status, 202);
    const other = await endpointWithPing(false);
    const first = deliverDue(deps(runs), hung.id);
    await hung.r.waitFor(4);
    assert.equal(await deliverDue(deps(runs), other.id), 0, "put off while the slot is taken");
    assert.equal(await first, 4, "its turn ended with deliveries left");
    const [job] = await t.database.sql<{ priority: number }[]>`
      select priority from graphile_worker.jobs where task_identifier = 'notify__deliver' and key like ${`notify:${hung.id}:%`} and run_at > now()`;
    assert.equal(job?.priority, 1, "it comes back behind the other jobs");
    // Jobs that start together race for a slot whatever their priority: the one behind, first here, leaves it.
    const [again, fresh] = await Promise.all([deliverDue(deps(runs), hung.id), deliverDue(deps(runs), other.id)]);
    assert.deepEqual([again, fresh], [0, 1]);
    assert.equal(other.r.received.length, 1);
  });
});
