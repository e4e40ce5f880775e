/**
 * Rotating the callback secret and the API token without losing a callback or a client:
 * CALLBACK_SECRET_PREVIOUS and API_TOKEN_PREVIOUS are let in beside the new values, counted,
 * and warned about (once, not once per request); anything else is still refused.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const OLD_SECRET = "old-callback-secret-abcdefghij";
const OLD_TOKEN = "old-api-token-abcdefghijklmnop";

let t: TestApp;
let base: string;
let server: { url: string; close(): Promise<void> };
before(async () => {
  t = await createTestApp({ CALLBACK_SECRET_PREVIOUS: OLD_SECRET, API_TOKEN_PREVIOUS: OLD_TOKEN });
  server = await t.listen();
  base = server.url;
});
after(async () => {
  await server.close();
  await t.close();
});

/** tracklane_previous_secret_used_total{variable} as /metrics shows it now (0 before the first). */
async function previousUsed(variable: string): Promise<number> {
  const text = await (await t.request("/metrics", { token: null })).text();
  const m = text.match(new RegExp(`^tracklane_previous_secret_used_total\\{variable="${variable}"\\} (\\d+)$`, "m"));
  return m ? Number(m[1]) : 0;
}

const warnings = (variable: string) =>
  t.logLines.filter((line) => {
    const entry = JSON.parse(line) as { level?: number; variable?: string };
    return entry.level === 40 && entry.variable === variable;
  });

let n = 0;
const event = () => {
  n++;
  return { client_order_id: `ROT-${n}`, svc_order_id: String(880_000 + n), order_status: "ALLOTTED", timestamp: "2026-11-23T10:00:00Z" };
};

async function stored(clientOrderId: string): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = ${clientOrderId}`;
  return row!.n;
}

describe("CALLBACK_SECRET_PREVIOUS", () => {
  it("stores callbacks sent with the new secret, and with the old one in the path or the header, each counted when old", async () => {
    const counted = await previousUsed("CALLBACK_SECRET_PREVIOUS");
    const withNew = event();
    assert.equal((await t.callback(withNew)).status, 200);
    assert.equal(await previousUsed("CALLBACK_SECRET_PREVIOUS"), counted, "the new secret is not counted as the old");

    const inPath = event();
    assert.equal((await t.callback(inPath, { path: `/callbacks/${OLD_SECRET}` })).status, 200);
    const location = { ...event(), order_status: undefined, rider_latitude: 12.9, rider_longitude: 77.6 };
    assert.equal((await t.callback(location, { path: `/callbacks/${OLD_SECRET}/location` })).status, 200);
    const inHeader = event();
    assert.equal((await t.callback(inHeader, { path: "/callbacks", headers: { "x-callback-secret": OLD_SECRET } })).status, 200);
    for (const e of [withNew, inPath, location, inHeader]) assert.equal(await stored(e.client_order_id), 1, e.client_order_id);
    assert.equal(await previousUsed("CALLBACK_SECRET_PREVIOUS"), counted + 3);
  });

  it("warns once that the provider still uses the old URL, naming the variable and never the secret", async () => {
    for (let i = 0; i < 5; i++) assert.equal((await t.callback(event(), { path: `/callbacks/${OLD_SECRET}` })).status, 200);
    const lines = warnings("CALLBACK_SECRET_PREVIOUS");
    assert.equal(lines.length, 1, "one warning, not one per callback");
    assert.match(lines[0]!, /old callback URL/);
    assert.ok(!t.logLines.some((line) => line.includes(OLD_SECRET)), "the old secret is in a log line");
  });

  it("still refuses any other secret with 401, storing nothing", async () => {
    for (const path of [`/callbacks/${OLD_SECRET}x`, `/callbacks/${OLD_SECRET.slice(0, -1)}`, "/callbacks/not-the-secret-at-all-123"]) {
      const e = event();
      assert.equal((await t.callback(e, { path })).status, 401, path);
      assert.equal(await stored(e.client_order_id), 0);
    }
  });
});

describe("API_TOKEN_PREVIOUS", () => {
  it("lets the old token call /v1, counted and warned about once; the new one is not counted", async () => {
    const counted = await previousUsed("API_TOKEN_PREVIOUS");
    assert.equal((await t.request("/v1/awb/pool", { token: API_TOKEN })).status, 200);
    assert.equal(await previousUsed("API_TOKEN_PREVIOUS"), counted);
    for (let i = 0; i < 3; i++) assert.equal((await t.request("/v1/awb/pool", { token: OLD_TOKEN })).status, 200);
    assert.equal(await previousUsed("API_TOKEN_PREVIOUS"), counted + 3);
    assert.equal(warnings("API_TOKEN_PREVIOUS").length, 1);
    assert.ok(!t.logLines.some((line) => line.includes(OLD_TOKEN)), "the old token is in a log line");
  });

  it("refuses any other token with 401", async () => {
    for (const token of [`${OLD_TOKEN}x`, "not-the-token-at-all-0123456"]) {
      assert.equal((await t.request("/v1/awb/pool", { token })).status, 401, token);
    }
  });

  it("does not sign in to the console: people sign in with the new token", async () => {
    const form = (token: string) =>
      fetch(`${base}/sign-in`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
        body: new URLSearchParams({ token }),
      });
    assert.equal((await form(OLD_TOKEN)).status, 403);
    assert.equal((await form(API_TOKEN)).status, 303);
  });
});

describe("without the previous secrets", () => {
  it("the old values are refused like any wrong one", async () => {
    const plain = await createTestApp();
    try {
      assert.equal((await plain.callback(event(), { path: `/callbacks/${OLD_SECRET}` })).status, 401);
      assert.equal((await plain.request("/v1/awb/pool", { token: OLD_TOKEN })).status, 401);
      assert.equal((await plain.callback(event(), { path: `/callbacks/${CALLBACK_SECRET}` })).status, 200);
    } finally {
      await plain.close();
    }
  });
});
