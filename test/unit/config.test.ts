import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { ConfigError, loadConfig } from "../../src/config.ts";

const dataDir = () => mkdtempSync(join(tmpdir(), "tracklane-config-"));

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ DATA_DIR: dataDir(), ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail("expected a ConfigError");
}

describe("config", () => {
  it("has the documented defaults", () => {
    const c = loadConfig({ DATA_DIR: dataDir() });
    assert.equal(c.port, 3000);
    assert.equal(c.host, "0.0.0.0");
    assert.equal(c.publicUrl, "http://127.0.0.1:3000");
    assert.equal(c.logLevel, "info");
    assert.equal(c.provider.env, "staging");
    assert.equal(c.provider.product, "hyperlocal_dedicated_store");
    assert.equal(c.provider.baseUrl, undefined);
    assert.deepEqual(c.awb, { lowWatermark: 100, target: 500, mode: "pool" });
    assert.equal(c.databaseUrl, undefined);
  });

  it("generates the API token and callback secret once, keeps them under the data dir (0600), and reuses them", () => {
    const dir = dataDir();
    const first = loadConfig({ DATA_DIR: dir });
    const second = loadConfig({ DATA_DIR: dir });
    assert.equal(first.apiToken, second.apiToken);
    assert.equal(first.callbackSecret, second.callbackSecret);
    assert.notEqual(first.apiToken, first.callbackSecret);
    assert.ok(first.apiToken.length >= 32);
    assert.equal(readFileSync(join(dir, "api-token"), "utf8").trim(), first.apiToken);
    assert.equal(statSync(join(dir, "callback-secret")).mode & 0o777, 0o600);
    assert.match(first.secretSources.apiToken, /^generated, stored in /);
  });

  it("prefers configured secrets and never reports their values as the source", () => {
    const c = loadConfig({ DATA_DIR: dataDir(), API_TOKEN: "a".repeat(20), CALLBACK_SECRET: "b".repeat(20) });
    assert.equal(c.apiToken, "a".repeat(20));
    assert.equal(c.secretSources.apiToken, "environment (API_TOKEN)");
    assert.ok(!c.secretSources.callbackSecret.includes("b".repeat(20)));
  });

  it("reports one clear message per bad variable", () => {
    const p = problems({
      PORT: "eighty",
      LOG_LEVEL: "loud",
      PROVIDER_ENV: "prod",
      AWB_MODE: "both",
      DATABASE_URL: "mysql://x",
      CALLBACK_SECRET: "short",
    });
    const vars = p.map((line) => line.split(":")[0]).sort();
    assert.deepEqual(vars, ["AWB_MODE", "CALLBACK_SECRET", "DATABASE_URL", "LOG_LEVEL", "PORT", "PROVIDER_ENV"]);
  });

  it("real-provider settings: defaults, a bad zone name, a bad flag, a negative reconciliation delay", () => {
    const c = loadConfig({ DATA_DIR: dataDir() });
    assert.deepEqual([c.provider.timezone, c.provider.dedupesOrders, c.provider.reconcileAfterMin], ["UTC", false, 15]);
    const set = loadConfig({ DATA_DIR: dataDir(), PROVIDER_TIMEZONE: "Asia/Kolkata", PROVIDER_DEDUPES_ORDERS: "true", RECONCILE_AFTER_MIN: "0.5" });
    assert.deepEqual([set.provider.timezone, set.provider.dedupesOrders, set.provider.reconcileAfterMin], ["Asia/Kolkata", true, 0.5]);
    const p = problems({ PROVIDER_TIMEZONE: "Asia/Bangalore", PROVIDER_DEDUPES_ORDERS: "yes", RECONCILE_AFTER_MIN: "-1" });
    assert.equal(p.length, 3, p.join("\n"));
    assert.match(p.find((l) => l.startsWith("PROVIDER_TIMEZONE"))!, /IANA time zone name, e\.g\. Asia\/Kolkata/);
    assert.match(p.find((l) => l.startsWith("PROVIDER_DEDUPES_ORDERS"))!, /"true" or "false"/);
    assert.ok(p.some((l) => l.startsWith("RECONCILE_AFTER_MIN")));
  });

  it("refuses a callback secret that cannot sit in a URL path", () => {
    assert.match(problems({ CALLBACK_SECRET: "has/slash/and spaces!!" })[0]!, /^CALLBACK_SECRET: .*URL-safe/);
  });

  it("refuses a low watermark above the target", () => {
    assert.deepEqual(problems({ AWB_POOL_LOW_WATERMARK: "600", AWB_POOL_TARGET: "500" }), [
      "AWB_POOL_LOW_WATERMARK: must not be greater than AWB_POOL_TARGET",
    ]);
  });

  describe("the product matrix (provider-api.md §5.3)", () => {
    const base = { PROVIDER_BASE_URL: "https://provider.example" };
    it("Quick Commerce without OAuth credentials is an error", () => {
      assert.match(problems({ ...base, PROVIDER_PRODUCT: "quick_commerce", PROVIDER_TOKEN: "t" })[0]!, /quick_commerce supports only OAuth2/);
    });
    it("Hyperlocal Dedicated Store with only OAuth credentials is an error", () => {
      assert.match(
        problems({ ...base, PROVIDER_CLIENT_ID: "id", PROVIDER_CLIENT_SECRET: "s" })[0]!,
        /hyperlocal_dedicated_store does not support OAuth2/,
      );
    });
    it("no credentials at all is an error naming what to set", () => {
      assert.match(problems(base)[0]!, /PROVIDER_PRODUCT: hyperlocal_dedicated_store needs credentials: set PROVIDER_TOKEN/);
    });
    it("half of the OAuth pair is an error", () => {
      assert.ok(problems({ ...base, PROVIDER_PRODUCT: "exchange", PROVIDER_CLIENT_ID: "id" }).some((l) => /set both or neither/.test(l)));
    });
    it("credentials without a provider URL are an error", () => {
      assert.match(problems({ PROVIDER_TOKEN: "t" })[0]!, /^PROVIDER_BASE_URL/);
    });
    it("chooses token auth for Dedicated Store and OAuth where both are given and supported", () => {
      const store = loadConfig({ DATA_DIR: dataDir(), ...base, PROVIDER_TOKEN: "tok" });
      assert.deepEqual(store.provider.auth, { method: "token", token: "tok" });
      const market = loadConfig({ DATA_DIR: dataDir(), ...base, PROVIDER_PRODUCT: "hyperlocal_marketplace", PROVIDER_TOKEN: "tok", PROVIDER_CLIENT_ID: "id", PROVIDER_CLIENT_SECRET: "sec" });
      assert.deepEqual(market.provider.auth, { method: "oauth", clientId: "id", clientSecret: "sec", product: "hyperlocal_marketplace" });
      assert.equal(market.provider.gatewayUrl, "https://provider.example");
    });
  });
});
