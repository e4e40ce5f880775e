/**
 * What /metrics tells an on-call engineer (docs/operations.md, "What to alert on"), over
 * real HTTP to the provider emulator: the text is valid Prometheus read strictly, counters
 * never go down between scrapes, no label carries an order's id or a URL, and the signals
 * of a provider that fails, commands that end failed and jobs that no worker takes show,
 * then clear.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createPool, POOL_NAMES } from "../../src/db/client.ts";
import { placeOrderBody, startCallbackReceiver } from "../helpers/emulator.ts";
import type { CallbackReceiver } from "../helpers/emulator.ts";
import { parsePrometheus, valueOf } from "../helpers/prometheus.ts";
import type { Family } from "../helpers/prometheus.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";

let s: Stack;
let receiver: CallbackReceiver;

before(async () => {
  receiver = await startCallbackReceiver();
  s = await startStack({ NOTIFY_ALLOW_PRIVATE_URLS: "true", COMMAND_MAX_ATTEMPTS: "3" });
});
after(async () => {
  await s.close();
  await receiver.close();
});

async function scrape(): Promise<Map<string, Family>> {
  const res = await s.t.request("/metrics", { token: null });
  assert.equal(res.status, 200);
  return parsePrometheus(await res.text());
}

/** Every counter sample (counters, histogram buckets, sums and counts) by series. */
function counters(families: Map<string, Family>): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families.values()) {
    if (f.type !== "counter" && f.type !== "histogram") continue;
    for (const sample of f.samples) out.set(`${sample.name}${JSON.stringify(sample.labels)}`, sample.value);
  }
  return out;
}

describe("/metrics for the on-call engineer", () => {
  it("is strictly valid, its counters only grow, and its labels carry no ids, URLs or error texts", async () => {
    const ids: string[] = [];
    const endpoint = await s.t.request("/v1/notifications/endpoints", { method: "POST", json: { url: receiver.url } });
    assert.equal(endpoint.status, 201);
    const first = await scrape();
    for (let i = 0; i < 3; i++) {
      const body = placeOrderBody();
      ids.push(body.order_details.client_order_id);
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    }
    // An order the provider's callbacks bring (one placed here would take its callback
    // without a provider id as a sign that its place may have gone through).
    ids.push(`CB-${Date.now()}`);
    await s.t.callback({ client_order_id: ids[3], order_status: "ALLOTTED", rider_id: "R-77" });
    await s.t.callback({ client_order_id: ids[3], order_status: "ALLOTTED", rider_id: "R-77" });
    await s.t.callback("not json");
    await s.t.callback({ order_status: "ALLOTTED" });
    await s.t.callback({ client_order_id: ids[1], order_status: "ALLOTTED" }, { path: "/callbacks/wrong-secret-0123456789" });
    await settle(s.t, s.pair);
    const second = await scrape();

    const before = counters(first);
    for (const [series, value] of counters(second)) {
      assert.ok(value >= (before.get(series) ?? 0), `${series} went down: ${before.get(series)} -> ${value}`);
    }
    const svcIds = (await s.pair.control.orders()).map((o) => String(o["svc_order_id"]));
    let series = 0;
    for (const family of second.values()) {
      for (const sample of family.samples) {
        series += 1;
        for (const [label, value] of Object.entries(sample.labels)) {
          assert.ok(!/[/:@ ]/.test(value) || label === "version", `${sample.name} label ${label}="${value}" looks like a URL or a text`);
          assert.ok(![...ids, ...svcIds, "R-77"].some((id) => value.includes(id)), `${sample.name} label ${label}="${value}" carries an id`);
        }
      }
    }
    // A handful of families with a few labels each: hundreds, not one per order or event.
    assert.ok(series < 600, `${series} series`);
    assert.equal(valueOf(second, "tracklane_callbacks_total", { result: "stored" }), 1);
    assert.equal(valueOf(second, "tracklane_callbacks_total", { result: "duplicate" }), 1);
    assert.equal(valueOf(second, "tracklane_callbacks_total", { result: "unauthorized" }), 1);
    assert.equal(valueOf(second, "tracklane_commands_total", { kind: "place", outcome: "succeeded" }), 3);
    assert.equal(valueOf(second, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "ok" }), 3);
  });

  it("stays valid scraped twice in a row (the event loop's lag, with no sample between them, is NaN, spelled so)", async () => {
    for (let i = 0; i < 5; i++) await Promise.all([scrape(), scrape()]);
  });

  it("a provider answering 5xx shows by operation and outcome while the command retries and succeeds", async () => {
    const was = await scrape();
    const okBefore = valueOf(was, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "ok" }) ?? 0;
    await s.pair.control.addFault({ path: "/stores/orders/", action: "status", status: 503, times: 2 });
    const body = placeOrderBody();
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(s.t, s.pair);
    const now = await scrape();
    assert.equal(valueOf(now, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "server" }), 2);
    assert.equal(valueOf(now, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "ok" }), okBefore + 1);
    assert.equal(valueOf(now, "tracklane_provider_request_duration_seconds_count", { operation: "placeOrder" }), okBefore + 3);
    // The command retried and succeeded: nothing ended failed.
    assert.equal(valueOf(now, "tracklane_commands_total", { kind: "place", outcome: "failed" }), undefined);
  });

  it("a command the provider refuses for good is counted failed", async () => {
    await s.pair.control.addFault({ path: "/stores/orders/", action: "status", status: 400, body: { message: "Failure", errors: "store not found" }, times: 1 });
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: placeOrderBody() })).status, 202);
    await settle(s.t, s.pair);
    const now = await scrape();
    assert.equal(valueOf(now, "tracklane_commands_total", { kind: "place", outcome: "failed" }), 1);
    assert.equal(valueOf(now, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "client" }), 1);
    assert.equal(valueOf(now, "tracklane_orders_placement", { state: "failed" }), 1);
    // A refusal is the provider's answer about one order: a warning, not a page.
    const line = s.t.logLines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.msg === "command failed");
    assert.deepEqual(
      line.map((l) => l.level),
      [40],
    );
  });

  it("a command out of attempts on a provider that keeps failing is counted failed and logged as an error", async () => {
    const lines = s.t.logLines.length;
    await s.pair.control.addFault({ path: "/stores/orders/", action: "status", status: 503, times: 3 });
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: placeOrderBody() })).status, 202);
    await settle(s.t, s.pair);
    const now = await scrape();
    assert.equal(valueOf(now, "tracklane_commands_total", { kind: "place", outcome: "failed" }), 2);
    const ended = s.t.logLines
      .slice(lines)
      .map((l) => JSON.parse(l) as { level: number; msg: string; error?: string })
      .filter((l) => l.msg === "command failed");
    assert.equal(ended.length, 1);
    assert.equal(ended[0]!.level, 50);
    assert.match(ended[0]!.error ?? "", /^gave up after 3 attempts/);
  });

  it("jobs no worker takes show as waiting, with the age of the oldest, and clear once a worker runs them", async () => {
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: placeOrderBody() })).status, 202);
    await new Promise((r) => setTimeout(r, 1100));
    const stuck = await scrape();
    assert.ok((valueOf(stuck, "tracklane_jobs_queued", { state: "waiting" }) ?? 0) >= 1);
    assert.ok((valueOf(stuck, "tracklane_jobs_oldest_waiting_seconds") ?? 0) >= 1, "oldest waiting job's age");
    // No worker process runs here (the test runs the jobs itself): the figure says so.
    assert.equal(valueOf(stuck, "tracklane_workers"), 0);
    const liveness = createPool(s.t.testDb.url, 1, POOL_NAMES.workerLiveness);
    try {
      await liveness`select 1`;
      assert.equal(valueOf(await scrape(), "tracklane_workers"), 1);
    } finally {
      await liveness.end();
    }
    await settle(s.t, s.pair);
    const clear = await scrape();
    assert.equal(valueOf(clear, "tracklane_jobs_queued", { state: "waiting" }), 0);
    assert.equal(valueOf(clear, "tracklane_jobs_queued", { state: "running" }), 0);
    assert.equal(valueOf(clear, "tracklane_jobs_oldest_waiting_seconds"), 0);
  });
});
