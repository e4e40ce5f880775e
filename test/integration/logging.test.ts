import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { redactPath } from "../../src/logger.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp({ LOG_LEVEL: "trace" });
});
after(async () => {
  await t.close();
});

describe("logging", () => {
  it("redacts the callback secret from paths", () => {
    assert.equal(redactPath(`/callbacks/${CALLBACK_SECRET}/location`), "/callbacks/[redacted]/location");
    assert.equal(redactPath(`/callbacks/${CALLBACK_SECRET}`), "/callbacks/[redacted]");
    assert.equal(redactPath("/callbacks/location"), "/callbacks/location");
    assert.equal(redactPath("/v1/orders/A"), "/v1/orders/A");
  });

  it("never writes a secret through whole flows, at trace level", async () => {
    await t.callback({ client_order_id: "LOG-1", order_status: "ALLOTTED" });
    await t.callback({ client_order_id: "LOG-1", order_status: "ALLOTTED" });
    await t.callback("{bad");
    await t.callback({ client_order_id: "LOG-1" }, { path: "/callbacks/wrong-wrong-wrong-wrong" });
    await t.callback({ client_order_id: "LOG-2" }, { path: "/callbacks", headers: { "x-callback-secret": CALLBACK_SECRET } });
    await t.callback({ client_order_id: "LOG-3" }, { path: `/callbacks/${CALLBACK_SECRET}/location` });
    await t.runJobs();
    await t.request("/v1/orders/LOG-1");
    await t.request("/v1/orders/LOG-1", { token: "wrong" });
    await t.request("/v1/orders?limit=oops");
    t.log.flush();
    const text = t.logLines.join("\n");
    assert.ok(t.logLines.length > 10, "the flows were logged");
    assert.match(text, /\/callbacks\/\[redacted\]/);
    for (const secret of [API_TOKEN, CALLBACK_SECRET]) assert.ok(!text.includes(secret), "a secret reached the log");
  });
});
