import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

describe("control endpoints (/__emulator/)", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair({ emulator: { callbackUrls: ["http://127.0.0.1:9/callbacks/x"] } });
  });
  after(() => pair.close());
  beforeEach(() => pair.emulator.reset());

  it("summarises the emulator", async () => {
    const res = await pair.control.get("");
    assert.equal(res.status, 200);
    assert.equal(res.body["env"], "staging");
    assert.equal(res.body["product"], "hyperlocal_dedicated_store");
    assert.deepEqual(res.body["callback_urls"], ["http://127.0.0.1:9/callbacks/x"]);
  });

  it("lists orders, filtered by client_order_id and store_code, and reads one", async () => {
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    await pair.client.placeOrder(body);
    await pair.client.placeOrder({ ...body, store_code: "STORE-2" });
    await pair.client.placeOrder(placeOrderBody());
    assert.equal((await pair.control.orders()).length, 3);
    const mine = await pair.control.orders(coid);
    assert.equal(mine.length, 2);
    const byStore = await pair.control.get<{ items: unknown[] }>(`/orders?client_order_id=${coid}&store_code=STORE-2`);
    assert.equal(byStore.body.items.length, 1);
    const svc = String(mine[0]?.["svc_order_id"]);
    const one = await pair.control.order(svc);
    assert.equal(one["client_order_id"], coid);
    assert.equal((await pair.control.get("/orders/999")).status, 404);
  });

  it("schedules a re-attempt at an absolute time", async () => {
    const { data } = await pair.client.placeOrder(placeOrderBody());
    const at = new Date(pair.emulator.clock.now() + 7200_000).toISOString();
    const res = await pair.control.send("POST", `/orders/${data.svc_order_id}/reattempt`, { at });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body["reattempt"], { scheduled_at: at, enabled: true });
    const bad = await pair.control.send("POST", `/orders/${data.svc_order_id}/reattempt`, { at: "tomorrow" });
    assert.equal(bad.status, 400);
  });

  it("moves the clock forward only", async () => {
    const before = Date.parse(String((await pair.control.get("/clock")).body["now"]));
    const moved = await pair.control.send("POST", "/clock/advance", { seconds: 86_400 });
    assert.equal(moved.body["offset_ms"], 86_400_000);
    assert.ok(Date.parse(String(moved.body["now"])) - before >= 86_400_000);
    assert.equal((await pair.control.send("POST", "/clock/advance", { seconds: -1 })).status, 400);
    assert.equal((await pair.control.send("POST", "/clock/advance", {})).status, 400);
  });

  it("logs provider requests (method, path, status, time), not control calls", async () => {
    await pair.client.generatePoolAwbs(1);
    await fetch(`${pair.url}/api/v2/stores/orders/`, { method: "POST" });
    const log = await pair.control.requests();
    assert.deepEqual(
      log.map((r) => [r.method, r.path, r.status]),
      [
        ["POST", "/v3/clients/generate_marketplace_awb/", 200],
        ["POST", "/api/v2/stores/orders/", 401],
      ],
    );
    assert.ok(log.every((r) => typeof (r as { at?: unknown }).at === "string"));
  });

  it("validates, lists and clears fault rules", async () => {
    const bad = await pair.control.send("POST", "/faults", { action: "status", status: 9000 });
    assert.equal(bad.status, 400);
    assert.ok((bad.body["errors"] as Record<string, unknown>)["status"]);
    const badRegex = await pair.control.send("POST", "/faults", { action: "timeout_before", path_regex: "(" });
    assert.equal(badRegex.status, 400);
    const unknownAction = await pair.control.send("POST", "/faults", { action: "explode" });
    assert.equal(unknownAction.status, 400);
    const rule = await pair.control.addFault({ path: "/oauth/", action: "delay", delay_ms: 5 });
    assert.equal(rule["probability"], 1);
    assert.equal(typeof rule["id"], "number");
    assert.equal((await pair.control.get<{ rules: unknown[] }>("/faults")).body.rules.length, 1);
    await pair.control.send("DELETE", "/faults");
    assert.equal((await pair.control.get<{ rules: unknown[] }>("/faults")).body.rules.length, 0);
  });

  it("refuses a status fault whose headers or content_type could not be written, naming the field", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ headers: { "bad header": "x" } }, "headers"],
      [{ headers: { "x-note": "a\r\nset-cookie: y" } }, "headers.x-note"],
      [{ headers: { "x-note": "a\nb" } }, "headers.x-note"],
      [{ content_type: "text/html\r\nx-injected: 1" }, "content_type"],
    ];
    for (const [extra, field] of cases) {
      const res = await pair.control.send("POST", "/faults", { path: "/api/", action: "status", status: 503, ...extra });
      assert.equal(res.status, 400, JSON.stringify(extra));
      const errors = res.body["errors"] as Record<string, unknown>;
      assert.ok(Object.keys(errors).some((k) => k.startsWith(field)), `${JSON.stringify(extra)}: ${JSON.stringify(errors)}`);
    }
    assert.equal((await pair.control.get<{ rules: unknown[] }>("/faults")).body.rules.length, 0);

    // What Node can write is kept, and answered as given.
    await pair.control.addFault({
      path: "/api/",
      action: "status",
      status: 503,
      headers: { "Retry-After": "7", "x-note": "caf\u00e9\tok" },
      content_type: "text/html; charset=utf-8",
      body: "<h1>busy</h1>",
    });
    const res = await fetch(`${pair.url}/api/v2/stores/orders/`, { method: "POST" });
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), "7");
    assert.equal(res.headers.get("content-type"), "text/html; charset=utf-8");
    assert.equal(await res.text(), "<h1>busy</h1>");
  });

  it("reset forgets orders, logs, faults and the clock offset; keeps callback URLs", async () => {
    await pair.client.placeOrder(placeOrderBody());
    await pair.control.advanceClock(60);
    await pair.control.addFault({ path: "/x/", action: "status", status: 500 });
    const res = await pair.control.send("POST", "/reset", {});
    assert.equal(res.status, 200);
    assert.equal((await pair.control.orders()).length, 0);
    assert.equal((await pair.control.requests()).length, 0);
    assert.equal((await pair.control.get<{ rules: unknown[] }>("/faults")).body.rules.length, 0);
    assert.equal((await pair.control.get("/clock")).body["offset_ms"], 0);
    assert.deepEqual((await pair.control.get("/callback-urls")).body["urls"], ["http://127.0.0.1:9/callbacks/x"]);
  });

  it("replaces and clears callback URLs, refusing non-URLs", async () => {
    assert.equal((await pair.control.send("PUT", "/callback-urls", { urls: ["not a url"] })).status, 400);
    const replaced = await pair.control.send("PUT", "/callback-urls", { urls: ["http://a.test/cb", "http://a.test/cb"] });
    assert.deepEqual(replaced.body["urls"], ["http://a.test/cb"]);
    assert.deepEqual((await pair.control.send("DELETE", "/callback-urls")).body["urls"], []);
    await pair.control.send("PUT", "/callback-urls", { urls: ["http://127.0.0.1:9/callbacks/x"] });
  });

  it("serves the track_url", async () => {
    const { data } = await pair.client.placeOrder(placeOrderBody());
    assert.ok(data.track_url !== null, "the strict emulator returns a track_url");
    const res = await fetch(data.track_url);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as Record<string, unknown>)["status"], "CREATED");
  });
});
