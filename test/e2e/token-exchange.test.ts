/**
 * A failed OAuth token exchange (Quick Commerce: OAuth only) means the call that needed
 * the token was never sent: every command retries it like any unsent call, a place never
 * ends `unconfirmed` for it, and the recorded error says the token request failed.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { HANG_TIMEOUT_MS, placeOrderBody } from "../helpers/emulator.ts";
import { parsePrometheus, valueOf } from "../helpers/prometheus.ts";
import type { PairOptions } from "../helpers/emulator.ts";
import { placeAndSettle, settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command } from "../helpers/api.ts";

const HOUR = 3_600_000;
const PLACE_PATH = "/api/v2/stores/orders/";
const TOKEN_PATH = "/oauth/token/";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

async function commandsOf(s: Stack, coid: string): Promise<Command[]> {
  return (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
}

async function requestsTo(s: Stack, path: string, method?: string) {
  return (await s.pair.control.requests()).filter((r) => r.path === path && (method === undefined || r.method === method));
}

/** The client's cached token is past its lifetime: its next call exchanges again. */
const expireClientToken = (s: Stack) => s.pair.advanceClientClock(2 * HOUR);

/** Waits until the emulator's fault rule `ruleId` has caught a request (the exchange it holds is under way). */
async function heldBy(s: Stack, ruleId: unknown): Promise<boolean> {
  const held = async () => {
    const { rules } = (await s.pair.control.get<{ rules: { id: number; applied: number }[] }>("/faults")).body;
    return (rules.find((r) => r.id === ruleId)?.applied ?? 0) > 0;
  };
  for (const deadline = Date.now() + 10_000; Date.now() < deadline && !(await held()); ) await new Promise((r) => setTimeout(r, 5));
  return await held();
}

/** The order commands other than a place, as the API takes them: kind, method, path and body. */
const orderCommands = (coid: string): [string, string, string, unknown][] => [
  ["edit", "PATCH", `/v1/orders/${coid}`, { order_details: { order_value: 321 } }],
  ["dispatch_ready", "POST", `/v1/orders/${coid}/dispatch-ready`, undefined],
  ["stop_reattempt", "POST", `/v1/orders/${coid}/stop-reattempt`, undefined],
  ["cancel", "POST", `/v1/orders/${coid}/cancel`, { reason: "changed mind", user: "Customer" }],
];

const oauthStack = (pairOptions: PairOptions = {}) => startStack({ COMMAND_MAX_ATTEMPTS: "3" }, { product: "quick_commerce", auth: "oauth", ...pairOptions });

describe("a failed token exchange: the call was never sent", () => {
  let s: Stack;
  before(async () => {
    s = await oauthStack();
  });
  after(async () => s.close());
  // A fault a failing test left unused must not break the next one.
  afterEach(async () => {
    await s.pair.control.send("DELETE", "/faults");
  });

  it("a 502 from the token endpoint: the place is retried and placed, sent exactly once", async () => {
    await s.pair.control.addFault({
      method: "POST",
      path: TOKEN_PATH,
      times: 1,
      action: "status",
      status: 502,
      body: "<html>502 Bad Gateway</html>",
      content_type: "text/html",
    });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const order = await placeAndSettle(s, body);
    assert.equal(order.placement.state, "placed");
    assert.equal((await requestsTo(s, PLACE_PATH, "POST")).length, 1);
    assert.equal((await s.pair.control.orders(coid)).length, 1);
    assert.deepEqual((await commandsOf(s, coid)).map((c) => [c.kind, c.state, c.attempts]), [["place", "succeeded", 2]]);
    const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`select outcome_unknown from commands where kind = 'place' and request->'order_details'->>'client_order_id' = ${coid}`;
    assert.equal(row?.outcome_unknown, false, "never recorded as possibly sent");
  });

  for (const [name, fault] of [
    ["no answer within the timeout", { action: "timeout_before" }],
    ["the connection closed", { action: "close_before" }],
    ["a 2xx that is not JSON", { action: "malformed" }],
    ["a 200 without token_type", { action: "status", status: 200, body: { access_token: "x", expires_in: 3600 } }],
    ["a 500", { action: "status", status: 500 }],
  ] as const) {
    it(`${name} at the token endpoint: the place is retried and placed, sent exactly once`, async () => {
      // The timeout: a stack whose client gives up on the held exchange long before HANG_MS.
      const own = fault.action === "timeout_before" ? await oauthStack({ client: { timeoutMs: HANG_TIMEOUT_MS } }) : undefined;
      const st = own ?? s;
      try {
        expireClientToken(st);
        const placesBefore = (await requestsTo(st, PLACE_PATH, "POST")).length;
        await st.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, ...fault });
        const body = placeOrderBody();
        const order = await placeAndSettle(st, body);
        assert.equal(order.placement.state, "placed", JSON.stringify(order.placement));
        assert.equal((await requestsTo(st, PLACE_PATH, "POST")).length, placesBefore + 1);
        assert.deepEqual((await commandsOf(st, body.order_details.client_order_id)).map((c) => [c.state, c.attempts]), [["succeeded", 2]]);
      } finally {
        await own?.close();
      }
    });
  }

  it("while the token is being exchanged the place is not yet marked as possibly sent: a run dying then sent nothing", async () => {
    expireClientToken(s);
    // Held long enough to look at the command while it lasts, even on a loaded machine.
    const rule = await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "delay", delay_ms: 2000 });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    const marked = async () => {
      const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`
        select outcome_unknown from commands where kind = 'place' and request->'order_details'->>'client_order_id' = ${coid}`;
      return row!.outcome_unknown;
    };
    const settled = settle(s.t, s.pair);
    // The exchange is under way: its request reached the emulator, which holds it 2 s.
    assert.ok(await heldBy(s, rule["id"]), "the exchange started");
    assert.equal(await marked(), false, "not marked while only the token is asked for");
    await settled;
    const order = await json<{ placement: { state: string } }>(await s.t.request(`/v1/orders/${coid}`));
    assert.equal(order.placement.state, "placed");
    assert.equal(await marked(), false, "a definite outcome clears the mark");
  });

  it("edit, dispatch-ready, stop-reattempt and cancel: not marked as possibly sent while only the token is asked for", async () => {
    // A run dying during the exchange has sent nothing: its command must not be left
    // marked, or its end would read "outcome unknown".
    const order = await placeAndSettle(s);
    const coid = order.client_order_id!;
    await s.pair.control.send("POST", `/orders/${order.svc_order_id}/reattempt`, { in_seconds: 3600 });
    for (const [kind, method, path, body] of orderCommands(coid)) {
      expireClientToken(s);
      const rule = await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "delay", delay_ms: 2000 });
      const res = await s.t.request(path, { method, ...(body === undefined ? {} : { json: body }) });
      assert.equal(res.status, 202, `${kind}: ${await res.clone().text()}`);
      const { id } = await json<{ id: string }>(res);
      const marked = async () => {
        const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`select outcome_unknown from commands where id = ${id}`;
        return row!.outcome_unknown;
      };
      const settled = settle(s.t, s.pair);
      assert.ok(await heldBy(s, rule["id"]), `${kind}: the exchange started`);
      assert.equal(await marked(), false, `${kind}: not marked while only the token is asked for`);
      await settled;
      const command = (await commandsOf(s, coid)).find((c) => c.id === id);
      assert.equal(command?.state, "succeeded", kind);
    }
  });

  it("an exchange that keeps failing: the place ends failed (not unconfirmed), nothing sent, the error names the token request", async () => {
    expireClientToken(s);
    const placesBefore = (await requestsTo(s, PLACE_PATH, "POST")).length;
    await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 3, action: "status", status: 502, body: "<html>502 Bad Gateway</html>", content_type: "text/html" });
    const body = placeOrderBody();
    const order = await placeAndSettle(s, body);
    assert.equal(order.placement.state, "failed");
    assert.match(order.placement.error!, /^gave up after 3 attempts: token request failed: server 502: 502 Bad Gateway/);
    assert.equal((await requestsTo(s, PLACE_PATH, "POST")).length, placesBefore);
    const [command] = await commandsOf(s, body.order_details.client_order_id);
    assert.deepEqual([command!.state, command!.attempts], ["failed", 3]);
    assert.match(command!.last_error!, /token request failed: server 502/);
  });

  it("a refused token (expired on the provider's clock) whose renewal fails: retried, one provider order", async () => {
    // Fresh on the client's clock, expired on the provider's: the place gets a 401 (refused,
    // nothing created), the renewal then fails (never sent), the retry goes through.
    await s.pair.client.exchangeToken();
    await s.pair.control.advanceClock(7300);
    await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "status", status: 504 });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const order = await placeAndSettle(s, body);
    assert.equal(order.placement.state, "placed", JSON.stringify(order.placement));
    assert.equal((await s.pair.control.orders(coid)).length, 1);
    const places = (await requestsTo(s, PLACE_PATH, "POST")).slice(-2);
    assert.deepEqual(places.map((r) => r.status), [401, 200]);
  });

  it("edit, dispatch-ready, stop-reattempt and cancel: each retried after a failed exchange, sent once", async () => {
    const order = await placeAndSettle(s);
    const coid = order.client_order_id!;
    await s.pair.control.send("POST", `/orders/${order.svc_order_id}/reattempt`, { in_seconds: 3600 });
    for (const [kind, method, path, body] of orderCommands(coid)) {
      expireClientToken(s);
      await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "status", status: 502 });
      const before = (await s.pair.control.requests()).length;
      const res = await s.t.request(path, { method, ...(body === undefined ? {} : { json: body }) });
      assert.equal(res.status, 202, `${kind}: ${await res.clone().text()}`);
      await settle(s.t, s.pair);
      const command = (await commandsOf(s, coid)).find((c) => c.kind === kind);
      assert.deepEqual([command?.state, command?.attempts], ["succeeded", 2], kind);
      const sent = (await s.pair.control.requests()).slice(before).filter((r) => r.path !== TOKEN_PATH && !r.path.startsWith("/__emulator"));
      assert.equal(sent.length, 1, `${kind}: ${JSON.stringify(sent)}`);
      // The retry was for a call never sent, and says where it failed.
      const retried = s.t.logLines
        .map((l) => JSON.parse(l) as { msg?: string; kind?: string; commandId?: unknown; error?: string })
        .find((l) => l.msg === "provider call failed; will retry" && String(l.commandId) === command!.id);
      assert.match(retried?.error ?? "", /^token request failed: server 502/, kind);
    }
    assert.equal((await s.pair.control.order(order.svc_order_id!)).status, "CANCELLED");
  });
});

describe("a failed token exchange during an AWB top-up", () => {
  it("a refused exchange is recorded on the request, naming the token request; nothing is asked of the AWB endpoint", async () => {
    const s = await startStack({ AWB_MODE: "pool" }, { product: "quick_commerce", auth: "oauth" });
    try {
      await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "status", status: 400, body: { error: "invalid_client" } });
      assert.equal((await s.t.request("/v1/awb/replenish", { method: "POST", json: { count: 5 } })).status, 202);
      await s.t.runJobs();
      const [latest] = await s.t.database.sql<{ status: string; last_error: string | null }[]>`select status, last_error from awb_requests order by id desc limit 1`;
      assert.equal(latest?.status, "failed");
      assert.equal(latest?.last_error, "token request failed: auth 400: invalid_client");
      assert.equal((await s.pair.control.requests()).filter((r) => r.path.includes("generate_marketplace_awb")).length, 0);
    } finally {
      await s.close();
    }
  });
});

describe("token exchanges in the provider metrics", () => {
  it("each exchange is counted and timed as operation token, a failed one by why it failed, though the command asked for it before its call", async () => {
    const s = await oauthStack();
    try {
      const scrape = async () => {
        const res = await s.t.request("/metrics", { token: null });
        assert.equal(res.status, 200);
        return parsePrometheus(await res.text());
      };
      const token = (families: Awaited<ReturnType<typeof scrape>>, outcome: string) =>
        valueOf(families, "tracklane_provider_requests_total", { operation: "token", outcome }) ?? 0;
      const was = await scrape();
      const timedBefore = valueOf(was, "tracklane_provider_request_duration_seconds_count", { operation: "token" }) ?? 0;
      expireClientToken(s);
      await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "status", status: 502 });
      const order = await placeAndSettle(s, placeOrderBody());
      assert.equal(order.placement.state, "placed");
      const now = await scrape();
      const exchanges = (await requestsTo(s, TOKEN_PATH, "POST")).length;
      // The failed exchange was the only request of the first attempt: it shows here, and nowhere else.
      assert.equal(token(now, "server") - token(was, "server"), 1);
      assert.ok(token(now, "ok") - token(was, "ok") >= 1, "the retry's exchange");
      assert.equal(valueOf(now, "tracklane_provider_requests_total", { operation: "placeOrder", outcome: "server" }), undefined);
      // Every exchange the emulator saw, counted once and timed once.
      assert.equal(token(now, "ok") + token(now, "server"), exchanges);
      assert.equal((valueOf(now, "tracklane_provider_request_duration_seconds_count", { operation: "token" }) ?? 0) - timedBefore, token(now, "ok") + token(now, "server") - token(was, "ok") - token(was, "server"));
    } finally {
      await s.close();
    }
  });
});
