/** METRICS_TOKEN: /metrics behind a bearer token when set, open when not (needs `npm test`'s database). */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const METRICS_TOKEN = "metrics-token-0123456789abcdef";
let guarded: TestApp;
let open: TestApp;

before(async () => {
  [guarded, open] = await Promise.all([createTestApp({ METRICS_TOKEN }), createTestApp()]);
});
after(async () => {
  await Promise.all([guarded.close(), open.close()]);
});

describe("GET /metrics", () => {
  it("with METRICS_TOKEN: 401 in the API's error shape without the token or with a wrong one", async () => {
    for (const token of [null, "wrong-token-0123456789abcdef", `${METRICS_TOKEN}x`, guarded.config.apiToken]) {
      const res = await guarded.request("/metrics", { token });
      assert.equal(res.status, 401, `token ${token}`);
      assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer /);
      const body = (await res.json()) as { error: { code: string; message: string; request_id: string } };
      assert.equal(body.error.code, "unauthorized");
      assert.match(body.error.message, token === null ? /missing Authorization: Bearer <METRICS_TOKEN>/ : /invalid metrics token/);
      assert.equal(typeof body.error.request_id, "string");
    }
  });

  it("with METRICS_TOKEN: 200 and the metrics with the right token", async () => {
    const res = await guarded.request("/metrics", { token: METRICS_TOKEN });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /tracklane_projection_backlog/);
  });

  it("with METRICS_TOKEN: the other ops endpoints stay open", async () => {
    assert.equal((await guarded.request("/healthz", { token: null })).status, 200);
    assert.equal((await guarded.request("/readyz", { token: null })).status, 200);
  });

  it("without METRICS_TOKEN: open, as before", async () => {
    const res = await open.request("/metrics", { token: null });
    assert.equal(res.status, 200);
    assert.match(await res.text(), /tracklane_projection_backlog/);
  });
});
