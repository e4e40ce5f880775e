import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import { ProviderError } from "../../src/provider/errors.ts";
import { placeOrderBody, startEmulatorPair, TEST_CLIENT, TEST_TOKEN } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

const HOUR = 3_600_000;

async function tokenExchanges(pair: EmulatorPair): Promise<number> {
  return (await pair.control.requests()).filter((r) => r.path === "/oauth/token/").length;
}

async function withPair(options: Parameters<typeof startEmulatorPair>[0], fn: (pair: EmulatorPair) => Promise<void>): Promise<void> {
  const pair = await startEmulatorPair(options);
  try {
    await fn(pair);
  } finally {
    await pair.close();
  }
}

describe("token auth", () => {
  it("sends Authorization: Token <token> and the emulator accepts it", () =>
    withPair({ auth: "token" }, async (pair) => {
      await pair.client.generatePoolAwbs(1);
      const raw = await fetch(`${pair.url}/v3/clients/generate_marketplace_awb/`, {
        method: "POST",
        headers: { authorization: `Token ${TEST_TOKEN}`, "content-type": "application/json" },
        body: "{}",
      });
      assert.equal(raw.status, 200);
    }));

  it("a wrong token is a permanent auth error (no retry loop)", () =>
    withPair({ auth: "token", client: { auth: { method: "token", token: "wrong" } } }, async (pair) => {
      await assert.rejects(pair.client.placeOrder(placeOrderBody()), (e) => {
        assert.ok(e instanceof ProviderError);
        assert.equal(e.kind, "auth");
        assert.equal(e.status, 401);
        assert.equal(e.retryable, false);
        return true;
      });
      assert.equal((await pair.control.requests()).length, 1, "token auth does not retry a 401");
    }));

  it("missing credentials get 401", () =>
    withPair({}, async (pair) => {
      const res = await fetch(`${pair.url}/api/v2/stores/orders/`, { method: "POST", body: "{}" });
      assert.equal(res.status, 401);
      assert.ok(((await res.json()) as { detail: string }).detail);
    }));
});

describe("OAuth2 client credentials", () => {
  it("exchanges with Basic credentials and sends the Bearer token", () =>
    withPair({ product: "forward_logistics", auth: "oauth" }, async (pair) => {
      const token = await pair.client.exchangeToken();
      assert.equal(token.token_type, "Bearer");
      assert.equal(token.expires_in, 3600);
      await pair.client.placeOrder(placeOrderBody());
      const requests = await pair.control.requests();
      assert.deepEqual(
        requests.map((r) => `${r.method} ${r.path} ${r.status}`),
        ["POST /oauth/token/ 200", "POST /api/v2/stores/orders/ 200"],
      );
    }));

  it("N concurrent calls share one exchange", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await Promise.all(Array.from({ length: 10 }, () => pair.client.generatePoolAwbs(1)));
      assert.equal(await tokenExchanges(pair), 1);
    }));

  it("renews before expiry on the client's clock, and not before", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await pair.client.generatePoolAwbs(1);
      pair.advanceClientClock(50 * 60_000); // 50 min of 60: still fresh
      await pair.client.generatePoolAwbs(1);
      assert.equal(await tokenExchanges(pair), 1);
      pair.advanceClientClock(5 * 60_000); // 55 min: past 90% of the lifetime
      await pair.client.generatePoolAwbs(1);
      assert.equal(await tokenExchanges(pair), 2);
      const statuses = (await pair.control.requests()).map((r) => r.status);
      assert.ok(statuses.every((s) => s === 200), "no call was refused");
    }));

  it("uses the product's default lifetime when expires_in is absent (24 h for hyperlocal_marketplace)", () =>
    withPair({ product: "hyperlocal_marketplace", auth: "oauth", emulator: { oauth: { omitExpiresIn: true } } }, async (pair) => {
      const token = await pair.client.exchangeToken();
      assert.equal(token.expires_in, undefined);
      pair.advanceClientClock(20 * HOUR);
      await pair.client.generatePoolAwbs(1);
      assert.equal(await tokenExchanges(pair), 1, "a 1 h default would have renewed by now");
      pair.advanceClientClock(2 * HOUR); // 22 h > 90% of 24 h
      await pair.client.generatePoolAwbs(1);
      assert.equal(await tokenExchanges(pair), 2);
    }));

  it("a token whose expires_in is null, empty, zero or not a number gets the product's default lifetime rather than failing every call", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      for (const expires_in of [null, "", 0, "soon"]) {
        await pair.control.addFault({ method: "POST", path: "/oauth/token/", times: 1, action: "status", status: 200, body: { access_token: "tok-1", token_type: "Bearer", expires_in } });
        const token = await pair.client.exchangeToken();
        assert.equal(token.access_token, "tok-1", JSON.stringify(expires_in));
        assert.equal(token.expires_in, undefined, JSON.stringify(expires_in));
      }
    }));

  it("a token expired on the emulator's clock: 401, one re-exchange, the call succeeds", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await pair.client.generatePoolAwbs(1);
      await pair.control.advanceClock(2 * 3600);
      const res = await pair.client.generatePoolAwbs(2);
      assert.equal(res.awb_numbers.length, 2);
      const requests = await pair.control.requests();
      assert.deepEqual(
        requests.map((r) => `${r.path} ${r.status}`),
        [
          "/oauth/token/ 200",
          "/v3/clients/generate_marketplace_awb/ 200",
          "/v3/clients/generate_marketplace_awb/ 401",
          "/oauth/token/ 200",
          "/v3/clients/generate_marketplace_awb/ 200",
        ],
      );
    }));

  it("concurrent calls that all hit an expired token re-exchange once", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await pair.client.generatePoolAwbs(1);
      await pair.control.advanceClock(2 * 3600);
      await Promise.all(Array.from({ length: 8 }, () => pair.client.generatePoolAwbs(1)));
      assert.equal(await tokenExchanges(pair), 2);
    }));

  it("retries a 401 only once: a second 401 is an auth error", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 401, body: { detail: "Invalid token." } });
      await assert.rejects(pair.client.generatePoolAwbs(1), (e) => {
        assert.ok(e instanceof ProviderError);
        assert.equal(e.kind, "auth");
        assert.equal(e.retryable, false);
        return true;
      });
      assert.deepEqual(
        (await pair.control.requests()).map((r) => `${r.path} ${r.status}`),
        ["/oauth/token/ 200", "/v3/clients/generate_marketplace_awb/ 401", "/oauth/token/ 200", "/v3/clients/generate_marketplace_awb/ 401"],
      );
    }));

  it("wrong client credentials: the exchange fails with a permanent auth error", () =>
    withPair(
      { product: "quick_commerce", client: { auth: { method: "oauth", clientId: TEST_CLIENT.clientId, clientSecret: "nope", product: "quick_commerce" } } },
      async (pair) => {
        await assert.rejects(pair.client.placeOrder(placeOrderBody()), (e) => {
          assert.ok(e instanceof ProviderError);
          assert.equal(e.kind, "auth");
          assert.equal(e.status, 401);
          assert.equal(e.retryable, false);
          return true;
        });
      },
    ));

  it("a failing exchange (5xx) is retryable", () =>
    withPair({ product: "quick_commerce" }, async (pair) => {
      await pair.control.addFault({ path: "/oauth/token/", action: "status", status: 503, times: 1 });
      await assert.rejects(pair.client.generatePoolAwbs(1), (e) => e instanceof ProviderError && e.kind === "server" && e.retryable);
      assert.equal((await pair.client.generatePoolAwbs(1)).awb_numbers.length, 1);
    }));
});

describe("product matrix", () => {
  it("quick_commerce refuses token auth with 401", () =>
    withPair({ product: "quick_commerce", auth: "token" }, async (pair) => {
      await assert.rejects(pair.client.placeOrder(placeOrderBody()), (e) => {
        assert.ok(e instanceof ProviderError);
        assert.equal(e.status, 401);
        assert.equal(e.kind, "auth");
        assert.match(e.providerMessage, /not available/);
        return true;
      });
    }));

  it("hyperlocal_dedicated_store refuses the OAuth exchange", () =>
    withPair({ product: "hyperlocal_dedicated_store", auth: "oauth" }, async (pair) => {
      await assert.rejects(pair.client.exchangeToken(), (e) => {
        assert.ok(e instanceof ProviderError);
        assert.equal(e.kind, "auth");
        assert.equal(e.status, 400);
        assert.match(e.providerMessage, /unauthorized_client/);
        return true;
      });
    }));

  it("hyperlocal_dedicated_store refuses any Bearer token", () =>
    withPair({ product: "hyperlocal_dedicated_store" }, async (pair) => {
      const res = await fetch(`${pair.url}/api/v2/stores/orders/`, { method: "POST", headers: { authorization: "Bearer abc" }, body: "{}" });
      assert.equal(res.status, 401);
    }));

  it("products that support both accept both", () =>
    withPair({ product: "exchange", auth: "token" }, async (pair) => {
      await pair.client.generatePoolAwbs(1);
      const oauthClient = createProviderClient({
        baseUrl: pair.url,
        auth: { method: "oauth", ...TEST_CLIENT, product: "exchange" },
      });
      await oauthClient.generatePoolAwbs(1);
      assert.deepEqual(
        (await pair.control.requests()).map((r) => r.status),
        [200, 200, 200],
      );
    }));
});
