/**
 * Provider paths other than the defaults (PROVIDER_PATHS, EMULATOR_PATHS): the client calls
 * them and the emulator serves them, over real HTTP; a client left on the defaults finds
 * nothing there.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import { ProviderError } from "../../src/provider/errors.ts";
import { parsePathOverrides } from "../../src/provider/paths.ts";
import { TEST_CLIENT, placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";

const { paths, problems } = parsePathOverrides(
  "oauthToken=/auth/token/,awbPool=/v2/clients/awb/generate/,placeOrder=/api/v3/orders/,orderStatus=/api/v3/orders/:svc_order_id/state/",
);

describe("provider paths other than the defaults", () => {
  it("the client calls them and the emulator serves them: OAuth token, AWB pool, place, status", async () => {
    assert.deepEqual(problems, []);
    const pair = await startEmulatorPair({ product: "exchange", auth: "oauth", emulator: { paths }, client: { paths } });
    try {
      const placed = await pair.client.placeOrder(placeOrderBody());
      const svc = String(placed.data.svc_order_id);
      assert.equal(String((await pair.client.orderStatus(svc)).data["sfx_order_id"]), svc);
      assert.equal((await pair.client.generatePoolAwbs(3)).awb_numbers.length, 3);
      const called = (await pair.control.requests()).map((r) => `${r.method} ${r.path}`);
      for (const path of ["POST /auth/token/", "POST /api/v3/orders/", `GET /api/v3/orders/${svc}/state/`, "POST /v2/clients/awb/generate/"]) {
        assert.ok(called.includes(path), `${path} in ${called.join(", ")}`);
      }
      assert.ok(!called.some((c) => c.includes("/oauth/token/") || c.includes("generate_marketplace_awb")), "the defaults were never called");

      // A client on the default paths finds none of them there.
      const stale = createProviderClient({ baseUrl: pair.url, auth: { method: "oauth", ...TEST_CLIENT, product: "exchange" }, timeoutMs: 2000 });
      await assert.rejects(stale.placeOrder(placeOrderBody()), (e) => e instanceof ProviderError && e.stage === "token" && e.status === 404);
    } finally {
      await pair.close();
    }
  });
});
