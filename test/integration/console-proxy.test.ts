/**
 * The console behind a reverse proxy (TRUSTED_PROXIES, docs/console.md): the sign-in limit
 * and its log lines count the client X-Forwarded-For names only when the socket's peer
 * is a trusted proxy. Real HTTP on loopback: the test client is the "proxy" at 127.0.0.1,
 * trusted by one app and not by the other.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { API_TOKEN, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

interface Served {
  t: TestApp;
  server: { url: string; close(): Promise<void> };
}

async function serve(trustedProxies: string): Promise<Served> {
  const t = await createTestApp({ TRUSTED_PROXIES: trustedProxies });
  return { t, server: await t.listen() };
}

/** A sign-in post from the test client, with X-Forwarded-For when given. */
function signIn(base: string, token: string, forwardedFor?: string): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/x-www-form-urlencoded", origin: base };
  if (forwardedFor !== undefined) headers["x-forwarded-for"] = forwardedFor;
  return fetch(`${base}/sign-in`, { method: "POST", redirect: "manual", headers, body: new URLSearchParams({ token, next: "/" }) });
}

async function failFiveTimes(base: string, forwardedFor: (i: number) => string | undefined): Promise<void> {
  for (let i = 0; i < 5; i++) assert.equal((await signIn(base, `wrong-${i}`, forwardedFor(i))).status, 403);
}

/** The addresses "console sign-in failed" lines name. */
const failedAddresses = (t: TestApp) =>
  t.logLines.filter((l) => l.includes("console sign-in failed")).map((l) => (JSON.parse(l) as { address: string }).address);

describe("a direct connection (its peer is no trusted proxy)", () => {
  let s: Served;
  before(async () => {
    s = await serve("10.0.0.0/8");
  });
  after(async () => {
    await s.server.close();
    await s.t.close();
  });

  it("X-Forwarded-For is ignored: a new spoofed address each try still counts against the peer", async () => {
    const base = s.server.url;
    await failFiveTimes(base, (i) => `198.51.100.${i + 1}`);
    const res = await signIn(base, API_TOKEN, "198.51.100.99");
    assert.equal(res.status, 429);
    assert.deepEqual(failedAddresses(s.t), Array<string>(5).fill("127.0.0.1"), "the log names the peer, not what the client wrote");
  });
});

describe("behind a trusted proxy (127.0.0.1)", () => {
  let s: Served;
  before(async () => {
    s = await serve("127.0.0.1, fd00::/8");
  });
  after(async () => {
    await s.server.close();
    await s.t.close();
  });

  it("each forwarded client is limited on its own, and the log names it", async () => {
    const base = s.server.url;
    await failFiveTimes(base, () => "198.51.100.7");
    assert.equal((await signIn(base, API_TOKEN, "198.51.100.7")).status, 429, "the client that failed is held back");
    // What a client wrote itself sits left of the address the proxy added: never read.
    assert.equal((await signIn(base, API_TOKEN, "203.0.113.50, 198.51.100.7")).status, 429);
    // A trusted hop at the right end is passed over.
    assert.equal((await signIn(base, API_TOKEN, "198.51.100.7, 127.0.0.1")).status, 429);
    // Another client behind the same proxy is not.
    assert.equal((await signIn(base, API_TOKEN, "198.51.100.8")).status, 303);
    assert.equal((await signIn(base, API_TOKEN, "198.51.100.7, 203.0.113.51")).status, 303, "nor one that wrote the held-back address itself");
    assert.equal((await signIn(base, API_TOKEN)).status, 303, "nor the proxy's own address");
    assert.deepEqual(failedAddresses(s.t), Array<string>(5).fill("198.51.100.7"));
  });

  it("a malformed X-Forwarded-For counts against the peer", async () => {
    const base = s.server.url;
    await failFiveTimes(base, (i) => ["unknown", "", "198.51.100.300", "_hidden, 127.0.0.1", "1.2.3.4/8"][i]);
    assert.equal((await signIn(base, API_TOKEN)).status, 429, "the proxy's own address is held back");
    assert.equal((await signIn(base, API_TOKEN, "garbage")).status, 429);
    assert.equal((await signIn(base, API_TOKEN, "198.51.100.9")).status, 303, "a well-formed forwarded client is not");
    assert.deepEqual(failedAddresses(s.t).slice(-5), Array<string>(5).fill("127.0.0.1"));
  });
});
