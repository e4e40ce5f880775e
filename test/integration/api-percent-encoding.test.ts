/**
 * Path segments and query values that are not percent-encoded UTF-8 (`%ZZ`, a cut-off
 * `%E0%A4`, an encoded lone surrogate `%ED%A0%80`) are a 400 naming the parameter, on
 * every /v1 route; well-formed ones, Devanagari or a literal `%` sent as `%25`, are read
 * as what they encode.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
  const res = await t.callback({ sfx_order_id: 9100, client_order_id: "क्षि-1", order_status: "ALLOTTED", event_time: "2026-11-22T11:00:00Z" });
  assert.equal(res.status, 200);
  await t.runJobs();
});
after(async () => {
  await t.close();
});

type Err = { error: { code: string; message: string; issues?: { path: string; message: string }[] } };

async function refused(path: string, param: string, init: RequestInit = {}) {
  const res = await t.request(path, init);
  const body = (await res.json()) as Err;
  assert.equal(res.status, 400, `${path}: ${JSON.stringify(body)}`);
  assert.equal(body.error.code, "invalid_parameter");
  assert.deepEqual(body.error.issues?.map((i) => i.path), [param], path);
  assert.match(body.error.message, /percent-encoded UTF-8/);
}

describe("badly percent-encoded path segments", () => {
  for (const bad of ["%ZZ", "%E0%A4", "%ED%A0%80", "A-%", "%E0%A4%95%ZZ", "%E0%A4%95-%E0%A4"]) {
    it(`${bad} in a path is a 400 naming its parameter`, async () => {
      await refused(`/v1/orders/${bad}`, "order");
      await refused(`/v1/orders/${bad}/events`, "order");
      await refused(`/v1/orders/by-svc-id/${bad}`, "svc_order_id");
      await refused(`/v1/orders/${bad}/cancel`, "order", { method: "POST", body: JSON.stringify({ reason: "x", user: "Seller" }), headers: { "content-type": "application/json" } });
      await refused(`/v1/notifications/endpoints/${bad}`, "id");
      await refused(`/v1/notifications/messages/${bad}`, "id");
    });
  }
});

describe("badly percent-encoded query values", () => {
  it("is a 400 naming the parameter, whatever the route", async () => {
    await refused("/v1/orders?store_code=%ZZ", "store_code");
    await refused("/v1/orders?status=%E0%A4", "status");
    await refused("/v1/notifications/messages?order=%ED%A0%80", "order");
    await refused("/v1/orders/export?from=%ZZ", "from");
    await refused("/v1/commands?kind=%E0", "kind");
  });
});

describe("well-formed percent-encoding", () => {
  it("finds the order whose id it encodes, Devanagari with its combining marks", async () => {
    const res = await t.request(`/v1/orders/${encodeURIComponent("क्षि-1")}`);
    assert.equal(res.status, 200);
    assert.equal(((await res.json()) as { client_order_id: string }).client_order_id, "क्षि-1");
  });

  it("reads %25 as a literal %: an id that merely looks encoded is looked up as such", async () => {
    const res = await t.request("/v1/orders/%25E0%25A4");
    assert.equal(res.status, 404);
    assert.match(((await res.json()) as Err).error.message, /"%E0%A4"/);
    assert.equal((await t.request("/v1/orders?store_code=%25ZZ")).status, 200);
  });
});
