/**
 * The real provider's variants (PRODUCT.md §10), end to end over real HTTP against the
 * emulator in its realistic mode: it accepts a repeated client_order_id, answers places
 * with a numeric `sfx_order_id` and no track_url, calls back in the nested, Unified and sparse
 * shapes with zone-less times (Asia/Kolkata), and can create an order and then lose the
 * answer. Provider orders are counted at the emulator.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { ANSWERED_TIMEOUT_MS, HANG_TIMEOUT_MS, placeOrderBody, TEST_TOKEN } from "../helpers/emulator.ts";
import type { PairOptions } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

interface TimelineEvent {
  kind: string;
  source: string;
  status: string | null;
  occurred_at: string;
  payload: Record<string, unknown>;
}

const PLACE_PATH = "/api/v2/stores/orders/";
const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

/** tracklane against the realistic emulator; PROVIDER_TIMEZONE matches the emulator's zone. */
async function realistic(env: Record<string, string> = {}, pairOptions: PairOptions = {}): Promise<Stack> {
  const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_TIMEZONE: "Asia/Kolkata", ...env }, pairOptions);
  const res = await s.pair.control.send("PUT", "/behaviour", { realistic: true });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return s;
}

async function order(s: Stack, coid: string): Promise<Order> {
  const res = await s.t.request(`/v1/orders/${encodeURIComponent(coid)}`);
  assert.equal(res.status, 200, await res.clone().text());
  return json<Order>(res);
}

async function place(s: Stack, body: unknown = placeOrderBody()): Promise<{ coid: string; order: Order }> {
  const res = await s.t.request("/v1/orders", { method: "POST", json: body });
  assert.equal(res.status, 202, await res.clone().text());
  const coid = (body as { order_details: { client_order_id: string } }).order_details.client_order_id;
  await settle(s.t, s.pair);
  return { coid, order: await order(s, coid) };
}

const commands = async (s: Stack, coid: string) => (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
const providerOrders = (s: Stack, coid: string) => s.pair.control.orders(coid);
const placeRequests = async (s: Stack) => (await s.pair.control.requests()).filter((r) => r.method === "POST" && r.path === PLACE_PATH);
const ordersRows = async (s: Stack) => (await s.t.database.sql<{ n: number }[]>`select count(*)::int as n from orders`)[0]!.n;

/**
 * Moves the provider's order (by its id) through the sandbox, as the provider's staff would;
 * over `client` when the stack's gives up too soon for an answered call.
 */
async function allotAtProvider(s: Stack, svc: string, client: ProviderClient = s.pair.client): Promise<void> {
  await client.allot(svc, { rider_id: 701 });
  await s.pair.emulator.callbacks.idle();
  await settle(s.t, s.pair);
}

describe("§10 placement: a provider that does not refuse duplicates", () => {
  let s: Stack;
  // Every answer here arrives: the client waits the pair's default. The cases that lose an
  // answer past the timeout have a stack of their own (below).
  before(async () => (s = await realistic()));
  after(async () => s.close());
  beforeEach(async () => {
    await s.pair.control.send("DELETE", "/faults");
  });

  it("the real answer {message, data: {sfx_order_id: <number>}} places the order once: no re-send, track_url absent", async () => {
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "placed");
    const [provider] = await providerOrders(s, coid);
    assert.equal(o.svc_order_id, String(provider!.svc_order_id));
    assert.deepEqual(o.svc_order_ids, [o.svc_order_id]);
    assert.equal(o.track_url, null);
    assert.equal((await providerOrders(s, coid)).length, 1, "exactly one provider order");
    assert.deepEqual((await commands(s, coid)).map((c) => [c.kind, c.state, c.attempts]), [["place", "succeeded", 1]]);
  });

  it("the connection closed after the request was written: unconfirmed, one provider order", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "close_after" });
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "unconfirmed");
    assert.equal((await providerOrders(s, coid)).length, 1);
  });

  it("an HTML 502: unconfirmed, its status and a short excerpt kept", async () => {
    await s.pair.control.addFault({
      method: "POST",
      path: PLACE_PATH,
      times: 1,
      action: "status",
      status: 502,
      body: "<html><head><title>502</title></head><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>",
      content_type: "text/html",
    });
    const { order: o } = await place(s);
    assert.equal(o.placement.state, "unconfirmed");
    assert.match(o.placement.error!, /server 502: 502 502 Bad Gateway nginx/);
  });

  it("refused before acting (503, then 429) is re-sent: one provider order", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 503 });
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 429 });
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "placed");
    assert.equal((await providerOrders(s, coid)).length, 1);
    assert.deepEqual((await commands(s, coid)).map((c) => [c.state, c.attempts]), [["succeeded", 3]]);
  });

  it("a 2xx that names no order is a refusal with the provider's words, not retried", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 200, body: { message: "Order in non-serviceable area" } });
    const before = (await placeRequests(s)).length;
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "failed");
    assert.match(o.placement.error!, /Order in non-serviceable area/);
    assert.equal((await placeRequests(s)).length - before, 1);
    assert.equal((await providerOrders(s, coid)).length, 0);
  });

  it("confirm by hand adopts the order found at the provider; idempotent; refused for another id or a pending order", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "close_after" });
    const { coid } = await place(s);
    const [provider] = await providerOrders(s, coid);
    const svc = String(provider!.svc_order_id);
    const confirm = (id: string | number) => s.t.request(`/v1/orders/${coid}/placement/confirm`, { method: "POST", json: { svc_order_id: id } });
    const first = await confirm(Number(svc));
    assert.equal(first.status, 200, await first.clone().text());
    const command = await json<Command>(first);
    assert.deepEqual([command.kind, command.state], ["confirm_placement", "succeeded"]);
    const again = await confirm(svc);
    assert.equal(again.status, 200);
    assert.equal((await json<Command>(again)).id, command.id);
    const other = await confirm("99999999");
    assert.equal(other.status, 409);
    const placed = await order(s, coid);
    assert.deepEqual([placed.placement.state, placed.svc_order_id], ["placed", svc]);
    // The provider's callbacks for that id land on this order.
    await allotAtProvider(s, svc);
    assert.equal((await order(s, coid)).status, "ALLOTTED");
    assert.deepEqual((await commands(s, coid)).map((c) => [c.kind, c.state]), [["place", "succeeded"], ["confirm_placement", "succeeded"]]);

    const res = await s.t.request("/v1/orders", { method: "POST", json: placeOrderBody() });
    const pending = await json<Order>(res);
    const refused = await s.t.request(`/v1/orders/${pending.client_order_id}/placement/confirm`, { method: "POST", json: { svc_order_id: "1" } });
    assert.equal(refused.status, 409);
    await settle(s.t, s.pair);
  });

  it("a place answered with another client order's provider id is not linked: unconfirmed, and neither order is merged", async () => {
    // B, placed outside tracklane, is known from its callback as 88800002; C is placed by tracklane.
    const b = `B-${Date.now()}`;
    assert.equal((await s.t.callback({ sfx_order_id: 88800002, client_order_id: b, order_status: "ACCEPTED" })).status, 200);
    const { coid: c, order: placedC } = await place(s);
    assert.equal(placedC.placement.state, "placed");
    for (const [taken, owner] of [["88800002", b], [placedC.svc_order_id!, c]] as const) {
      const rows = await ordersRows(s);
      // The provider's answer to A's place names the other order's id.
      const answer = { message: "Order created", data: { sfx_order_id: Number(taken) } };
      await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 200, body: answer });
      const { coid: a, order: placedA } = await place(s);
      assert.deepEqual([placedA.placement.state, placedA.svc_order_id], ["unconfirmed", null]);
      assert.match(placedA.placement.error!, new RegExp(`another order's id: provider order ${taken} .*belongs to order ${owner}`));
      const [command] = await commands(s, a);
      assert.deepEqual([command!.kind, command!.state], ["place", "failed"]);
      const kept = await order(s, owner);
      assert.equal(kept.svc_order_id, taken);
      assert.equal(kept.client_order_id, owner);
      assert.equal(await ordersRows(s), rows + 1, "A has its own row; nothing was merged");
    }
  });

  it("a place answered with another order's second provider id is not linked either, nor is it confirmed by hand", async () => {
    // D, known from its callbacks, has two provider orders: 88800011, then 88800012.
    const d = `D-${Date.now()}`;
    for (const id of [88800011, 88800012]) {
      assert.equal((await s.t.callback({ sfx_order_id: id, client_order_id: d, order_status: "ACCEPTED" })).status, 200);
    }
    await settle(s.t, s.pair);
    const known = await order(s, d);
    assert.deepEqual(known.svc_order_ids, ["88800011", "88800012"]);
    const other = known.svc_order_ids.find((id) => id !== known.svc_order_id)!;
    const rows = await ordersRows(s);
    const answer = { message: "Order created", data: { sfx_order_id: Number(other) } };
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 200, body: answer });
    const { coid: a, order: placedA } = await place(s);
    assert.deepEqual([placedA.placement.state, placedA.svc_order_id], ["unconfirmed", null], placedA.placement.error ?? "");
    assert.match(placedA.placement.error!, new RegExp(`another order's id: provider order ${other} .*belongs to order ${d}`));
    const confirm = await s.t.request(`/v1/orders/${a}/placement/confirm`, { method: "POST", json: { svc_order_id: other } });
    assert.equal(confirm.status, 409, await confirm.clone().text());
    await settle(s.t, s.pair);
    assert.equal(await ordersRows(s), rows + 1, "A has its own row; nothing was merged");
    assert.deepEqual((await order(s, d)).client_order_id, d);
  });

  it("a provider id past 2^53 in a place's answer is kept digit for digit, not rounded to another order's id", async () => {
    const answer = '{"message":"Order created","data":{"sfx_order_id":12345678901234567891}}';
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 200, body: answer, content_type: "application/json" });
    const { order: o } = await place(s);
    assert.deepEqual([o.placement.state, o.svc_order_id], ["placed", "12345678901234567891"]);
  });

  it("the provider's callbacks naming the order by its client id alone: a pending place's retry is not sent", async () => {
    // Unified-shape status callbacks name the order by `order_id` (the client's id) only. A place
    // waiting for its retry after a 503, when such a callback arrives: not sent.
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 503, process: true });
    const body = placeOrderBody();
    const second = body.order_details.client_order_id;
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    const [command] = await s.t.database.sql<{ id: number }[]>`
      select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${second}`;
    const { executeCommand } = await import("../../src/commands/execute.ts");
    const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
    await executeCommand(deps, command!.id);
    assert.equal((await s.t.callback({ order_id: second, status: "ACCEPTED", event_timestamp: "2026-11-23 10:00:00" })).status, 200);
    await settle(s.t, s.pair);
    const o = await order(s, second);
    assert.equal(o.placement.state, "unconfirmed", o.placement.error ?? "");
    assert.match(o.placement.error!, /callbacks name the order/);
    assert.equal((await providerOrders(s, second)).length, 1, "the retry was not sent");
  });

  it("/metrics counts orders per placement state", async () => {
    // An unconfirmed order of its own (the connection closed after the place was written).
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "close_after" });
    assert.equal((await place(s)).order.placement.state, "unconfirmed");
    const res = await s.t.request("/metrics", { token: null });
    const text = await res.text();
    const unconfirmed = /tracklane_orders_placement\{state="unconfirmed"\} (\d+)/.exec(text);
    assert.ok(unconfirmed, text.slice(0, 200));
    const [row] = await s.t.database.sql<{ n: number }[]>`select count(*)::int as n from orders where placement_state = 'unconfirmed'`;
    assert.equal(Number(unconfirmed[1]), row!.n);
    assert.ok(row!.n >= 1);
  });
});

describe("§10 placement: answers lost past the timeout", () => {
  let s: Stack;
  /** The provider's staff: the sandbox's moves wait for their answers as long as the pair's default. */
  let staff: ProviderClient;
  // Each case holds the place's answer (HANG_MS) past this stack's HANG_TIMEOUT_MS: an
  // unconfirmed placement. The only answered call over that client is the place retried by hand.
  before(async () => {
    s = await realistic({}, { client: { timeoutMs: HANG_TIMEOUT_MS } });
    staff = createProviderClient({ baseUrl: s.pair.url, auth: { method: "token", token: TEST_TOKEN }, timeoutMs: ANSWERED_TIMEOUT_MS });
  });
  after(async () => s.close());

  it("the answer lost after the order was created (held past the timeout): unconfirmed, sent once, one provider order", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "timeout_after" });
    const before = (await placeRequests(s)).length;
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "unconfirmed");
    assert.match(o.placement.error!, /outcome unknown, not re-sent/);
    assert.equal((await placeRequests(s)).length - before, 1, "the place went out once");
    assert.equal((await providerOrders(s, coid)).length, 1, "exactly one provider order");
    const unconfirmed = await json<{ items: Order[] }>(await s.t.request("/v1/orders?placement=unconfirmed"));
    assert.ok(unconfirmed.items.some((i) => i.client_order_id === coid));
  });

  it("evidence confirms an unconfirmed placement: the provider's callback naming both ids makes it placed", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "timeout_after" });
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "unconfirmed");
    const [provider] = await providerOrders(s, coid);
    await allotAtProvider(s, String(provider!.svc_order_id), staff);
    const confirmed = await order(s, coid);
    assert.equal(confirmed.placement.state, "placed");
    assert.equal(confirmed.placement.error, null);
    assert.equal(confirmed.svc_order_id, String(provider!.svc_order_id));
    assert.equal(confirmed.status, "ALLOTTED");
    assert.deepEqual((await commands(s, coid)).map((c) => [c.kind, c.state]), [["place", "succeeded"]]);
    assert.ok(s.t.logLines.some((l) => l.includes("unconfirmed placement confirmed")));
  });

  it("confirm by hand refuses the provider id of another client order known from callbacks, which stays as it is", async () => {
    // An order placed outside tracklane, known from its callback: the provider's 88800001 is B's.
    const other = `B-${Date.now()}`;
    assert.equal((await s.t.callback({ sfx_order_id: 88800001, client_order_id: other, order_status: "ACCEPTED" })).status, 200);
    await settle(s.t, s.pair);
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "timeout_after" });
    const { coid } = await place(s);
    const refused = await s.t.request(`/v1/orders/${coid}/placement/confirm`, { method: "POST", json: { svc_order_id: "88800001" } });
    assert.equal(refused.status, 409, await refused.clone().text());
    assert.match((await json<{ error: { message: string } }>(refused)).error.message, new RegExp(`belongs to order ${other}`));
    await settle(s.t, s.pair);
    const b = await order(s, other);
    assert.deepEqual([b.svc_order_id, b.placement.state], ["88800001", "external"]);
    const a = await order(s, coid);
    assert.deepEqual([a.svc_order_id, a.placement.state], [null, "unconfirmed"]);
  });

  it("the provider's callbacks naming the order by its client id alone: not sent again by hand", async () => {
    // Unified-shape status callbacks name the order by `order_id` (the client's id) only:
    // no provider id, so the placement stays unconfirmed, but the provider has the order.
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "timeout_after" });
    const { coid } = await place(s);
    assert.equal((await s.t.callback({ order_id: coid, status: "ALLOTTED", event_timestamp: "2026-11-23 10:00:00" })).status, 200);
    await settle(s.t, s.pair);
    assert.deepEqual([(await order(s, coid)).status, (await order(s, coid)).placement.state], ["ALLOTTED", "unconfirmed"]);
    const retried = await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" });
    assert.equal(retried.status, 409, await retried.clone().text());
    assert.match((await json<{ error: { message: string } }>(retried)).error.message, /callbacks name order .* ALLOTTED/);
    await settle(s.t, s.pair);
    assert.equal((await providerOrders(s, coid)).length, 1, "one provider order");
  });

  it("retry by hand sends the place again; a second provider order shows on the order with a warning, once", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "timeout_after" });
    const { coid } = await place(s);
    const retried = await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" });
    assert.equal(retried.status, 202, await retried.clone().text());
    assert.equal((await json<Command>(retried)).kind, "place");
    await settle(s.t, s.pair);
    const providers = await providerOrders(s, coid);
    assert.equal(providers.length, 2, "this provider does not refuse duplicates: a person's retry made a second order");
    for (const p of providers) await allotAtProvider(s, String(p.svc_order_id), staff);
    const o = await order(s, coid);
    assert.equal(o.placement.state, "placed");
    assert.deepEqual(o.svc_order_ids, providers.map((p) => String(p.svc_order_id)).sort());
    const warnings = s.t.logLines.filter((l) => l.includes("several orders for one client_order_id") && l.includes(o.svc_order_ids[1]!));
    assert.equal(warnings.length, 1, "warned once");
    for (const svc of o.svc_order_ids) {
      const found = await s.t.request(`/v1/orders/by-svc-id/${svc}`);
      assert.equal(found.status, 200, `found by its provider id ${svc}: ${await found.clone().text()}`);
      assert.equal((await json<{ client_order_id: string }>(found)).client_order_id, coid);
    }
    // The sandbox by provider id drives the provider order named, not the order's other one.
    const second = o.svc_order_ids.find((id) => id !== o.svc_order_id)!;
    const collected = await s.t.request(`/v1/sandbox/orders/by-svc-id/${second}/collect`, { method: "POST", json: { status: "COLLECTED" } });
    assert.equal(collected.status, 200, await collected.clone().text());
    const atProvider = await providerOrders(s, coid);
    assert.deepEqual(
      atProvider.map((p) => [String(p.svc_order_id), p.status]).sort(),
      o.svc_order_ids.map((id) => [id, id === second ? "COLLECTED" : "ALLOTTED"]).sort(),
    );
    assert.equal((await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" })).status, 409, "a placed order is not re-sent");
  });
});

describe("§10 place requests as merchants send them", () => {
  let s: Stack;
  before(async () => (s = await realistic()));
  after(async () => s.close());

  it("paid as \"true\", amounts and coordinates as strings, no payment_mode, and every extra field reaches the provider unchanged", async () => {
    const base = placeOrderBody();
    const body = {
      store_code: base.store_code,
      order_details: { client_order_id: base.order_details.client_order_id, order_value: "250.50", paid: "true", scheduled_time: "2026-11-24 10:30:00" },
      customer_details: {
        name: "Asha Rao",
        contact_number: "9876543210",
        address_line_1: "12 MG Road",
        latitude: "12.9716",
        longitude: "77.5946",
        landmark: "Opposite the temple",
        geo: { source: "pin", accuracy_m: 12 },
      },
      product_details: [{ id: "SKU-1", name: "Masala tea", price: "125", quantity: "2", tags: ["hot"] }],
      delivery_instruction: "Leave at the gate",
    };
    const res = await s.t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(res.status, 202, await res.clone().text());
    await settle(s.t, s.pair);
    const [provider] = await providerOrders(s, body.order_details.client_order_id);
    const sent = provider!.body as typeof body & { order_details: Record<string, unknown>; customer_details: Record<string, unknown> };
    assert.equal(sent.order_details.paid, true);
    assert.equal(sent.order_details.order_value, 250.5);
    assert.equal(sent.order_details.scheduled_time, "2026-11-24 10:30:00");
    assert.equal(sent.customer_details.latitude, 12.9716);
    assert.equal(sent.customer_details.landmark, "Opposite the temple");
    assert.deepEqual(sent.customer_details.geo, { source: "pin", accuracy_m: 12 });
    assert.deepEqual(sent.product_details[0], { id: "SKU-1", name: "Masala tea", price: 125, quantity: 2, tags: ["hot"] });
    assert.equal(sent.delivery_instruction, "Leave at the gate");

    // The same order spelled with a boolean and numbers is the same order (200), not a conflict.
    const spelled = {
      ...body,
      order_details: { ...body.order_details, order_value: 250.5, paid: true },
      customer_details: { ...body.customer_details, latitude: 12.9716, longitude: 77.5946 },
      product_details: [{ ...body.product_details[0]!, price: 125, quantity: 2 }],
    };
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: spelled })).status, 200);
    const other = { ...spelled, order_details: { ...spelled.order_details, paid: "false" } };
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: other })).status, 409);
  });

  it("still refuses what is wrong, naming the field (never a 500)", async () => {
    const body = placeOrderBody() as unknown as { order_details: Record<string, unknown>; customer_details: Record<string, unknown> };
    body.order_details.paid = "yes";
    body.customer_details.latitude = "north";
    delete body.customer_details.address_line_1;
    const res = await s.t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(res.status, 422);
    const err = await json<{ error: { issues: { path: string }[] } }>(res);
    assert.deepEqual(err.error.issues.map((i) => i.path).sort(), ["customer_details.address_line_1", "customer_details.latitude", "order_details.paid"]);
  });
});

describe("§10 evidence settles a placement whatever state it is in", () => {
  let s: Stack;
  before(async () => (s = await realistic()));
  after(async () => s.close());

  /** The provider's callback for an order it has as `svc`, in its real (nested) shape. */
  const evidence = (coid: string, svc: string) =>
    s.t.callback({ sfx_order_id: Number(svc), client_order_id: coid, order_status: "ACCEPTED", accept_time: "2026-11-23 10:00:00" });

  it("a pending place whose order the provider has already named is adopted, not sent again", async () => {
    // The first attempt is refused (503: retried later); the provider's callback names the
    // order before the retry runs, as if an earlier attempt had reached it after all.
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 503 });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const before = (await placeRequests(s)).length;
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    const [command] = await s.t.database.sql<{ id: number }[]>`
      select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
    const { executeCommand } = await import("../../src/commands/execute.ts");
    const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
    await executeCommand(deps, command!.id);
    assert.equal((await evidence(coid, "98765001")).status, 200);
    // Projected before the retry runs (in production the retry waits seconds, the
    // projection some tens of milliseconds).
    const { projectOrders } = await import("../../src/projection/project.ts");
    await projectOrders(s.t.database.sql, [{ svcOrderId: "98765001", clientOrderId: coid }]);
    await settle(s.t, s.pair);
    const o = await order(s, coid);
    assert.deepEqual([o.placement.state, o.svc_order_id], ["placed", "98765001"]);
    assert.equal((await placeRequests(s)).length - before, 1, "sent once: the refused attempt only");
    assert.deepEqual((await commands(s, coid)).map((c) => [c.kind, c.state]), [["place", "succeeded"]]);
  });

  it("a place the provider refused, whose order it then names, becomes placed (and cannot be re-sent)", async () => {
    await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 200, body: { message: "Store closed" } });
    const { coid, order: o } = await place(s);
    assert.equal(o.placement.state, "failed");
    assert.equal((await evidence(coid, "98765002")).status, 200);
    await settle(s.t, s.pair);
    const after = await order(s, coid);
    assert.deepEqual([after.placement.state, after.svc_order_id], ["placed", "98765002"]);
    assert.deepEqual((await commands(s, coid)).map((c) => [c.kind, c.state]), [["place", "succeeded"]]);
    assert.equal((await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" })).status, 409);
  });
});

describe("§10 callbacks in the real shapes", () => {
  it("nested rider_details with string coordinates and zone-less times read in PROVIDER_TIMEZONE", async () => {
    const s = await realistic();
    try {
      const { coid, order: o } = await place(s);
      await s.pair.client.allot(o.svc_order_id!, { rider_id: 88 });
      await s.pair.client.riderLocation(o.svc_order_id!, { latitude: 12.95, longitude: 77.61 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      const moved = await order(s, coid);
      assert.equal(moved.status, "ALLOTTED");
      assert.equal(moved.rider?.id, "88");
      assert.ok(moved.rider?.name);
      assert.ok(moved.rider?.contact);
      assert.deepEqual([moved.rider?.latitude, moved.rider?.longitude], [12.95, 77.61]);
      // The emulator wrote the allot time as Kolkata wall-clock time without a zone: read
      // in Asia/Kolkata it is the emulator's instant (within the second it was written).
      const history = (await s.pair.control.order(o.svc_order_id!)).history as { status: string; at: string }[];
      const allotted = history.find((h) => h.status === "ALLOTTED")!;
      assert.ok(Math.abs(Date.parse(moved.status_at!) - Date.parse(allotted.at)) < 1000, `${moved.status_at} vs ${allotted.at}`);
      const events = await json<{ items: TimelineEvent[] }>(await s.t.request(`/v1/orders/${coid}/events`));
      assert.ok(events.items.some((e) => e.kind === "location"), "the nested location callback is a location event");
      assert.equal(await ordersRows(s), 1);
    } finally {
      await s.close();
    }
  });

  it("Unified shape: order_id alone (the client's id) lands on the order; order_id as the provider's id beside the client's makes no phantom", async () => {
    const s = await realistic();
    try {
      const res = await s.pair.control.send("PUT", "/behaviour", { callback_shape: "unified" });
      assert.equal(res.status, 200);
      const { coid, order: o } = await place(s);
      await s.pair.client.allot(o.svc_order_id!, { rider_id: 12 });
      await s.pair.client.riderLocation(o.svc_order_id!, { latitude: 12.9, longitude: 77.6 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      const delivered = s.pair.emulator.callbacks.deliveries().map((d) => d.payload);
      assert.ok(delivered.some((p) => p.order_id === coid && p.client_order_id === undefined), "a status callback with order_id only");
      assert.equal(await ordersRows(s), 1, "no phantom order");
      const moved = await order(s, coid);
      assert.equal(moved.status, "ALLOTTED");
      assert.deepEqual([moved.rider?.latitude, moved.rider?.longitude], [12.9, 77.6]);
      assert.ok(moved.rider?.contact, "masked_rider_contact read");
    } finally {
      await s.close();
    }
  });

  it("Sparse shape: order_id alone as the provider's id, rider_phone, masked_rider_contact.contact and string coordinates carry an order to DELIVERED", async () => {
    const s = await realistic();
    try {
      assert.equal((await s.pair.control.send("PUT", "/behaviour", { callback_shape: "sparse" })).status, 200);
      const { coid, order: o } = await place(s);
      const svc = o.svc_order_id!;
      await s.pair.client.allot(svc, { rider_id: 31 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      const allotted = await order(s, coid);
      const rider = (await s.pair.control.order(svc)).rider as { contact: string };
      assert.equal(allotted.status, "ALLOTTED");
      assert.equal(allotted.rider?.id, "31");
      assert.equal(allotted.rider?.contact, rider.contact, "the status callback's masked_rider_contact.contact");

      // A minute apart at the emulator: zone-less times have whole seconds, and events of one
      // second tie (broken by their dedupe keys, not by arrival).
      const steps: (() => Promise<unknown>)[] = [
        () => s.pair.client.collect(svc, { status: "COLLECTED", pickup_lat: 12.9, pickup_lng: 77.6 }),
        () => s.pair.client.riderLocation(svc, { latitude: 12.93, longitude: 77.62 }),
        () => s.pair.client.doorstepArrival(svc, { arrival_lat: 12.95, arrival_lng: 77.64 }),
        () => s.pair.client.deliver(svc, { status: "DELIVERED" }),
      ];
      for (const step of steps) {
        await s.pair.control.advanceClock(60);
        await step();
      }
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);

      const payloads = s.pair.emulator.callbacks.deliveries().map((d) => d.payload);
      assert.ok(payloads.length >= 5);
      for (const p of payloads) {
        assert.equal(p.order_id, svc, "every callback names the order by the provider's id alone");
        assert.equal(p.client_order_id, undefined);
        assert.equal(p.sfx_order_id, undefined);
      }
      assert.ok(payloads.some((p) => typeof p.rider_latitude === "string" && p.rider_phone !== undefined), "a location callback with rider_phone");
      assert.ok(payloads.some((p) => (p.masked_rider_contact as { contact?: string } | undefined)?.contact), "masked_rider_contact.contact");

      assert.equal(await ordersRows(s), 1, "the provider's id resolved to the placed order: no phantom");
      const done = await order(s, coid);
      assert.equal(done.status, "DELIVERED");
      assert.equal(done.rider?.id, "31");
      // The doorstep arrival's string coordinates are the last position sent.
      assert.deepEqual([done.rider?.latitude, done.rider?.longitude], [12.95, 77.64]);
      const events = await json<{ items: TimelineEvent[] }>(await s.t.request(`/v1/orders/${coid}/events?limit=100`));
      const fromProvider = events.items.filter((e) => e.source === "provider");
      assert.deepEqual(
        fromProvider.map((e) => e.status),
        ["ALLOTTED", "COLLECTED", null, "CUSTOMER_DOOR_STEP", "DELIVERED"],
        "every sparse callback stored under the order, the location one without a status",
      );
      assert.ok(events.items.some((e) => e.kind === "location"), "the sparse location callback is a location event");
    } finally {
      await s.close();
    }
  });
});

describe("§10 lost callbacks: reconciliation", () => {
  it("a dropped callback is recovered by polling the provider's status endpoint; a provider without it turns polling off once, and it is asked again an hour later", async () => {
    const s = await realistic({ RECONCILE_AFTER_MIN: "0.001" });
    const { reconcileDue, resetEndpointMissing } = await import("../../src/reconcile/reconcile.ts");
    const deps = () => ({ sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, afterMin: 0.001, timeZone: "Asia/Kolkata", spacingMs: 0 });
    try {
      const { coid, order: o } = await place(s);
      await s.pair.control.addFault({ action: "drop", kind: "status" });
      await s.pair.client.allot(o.svc_order_id!, { rider_id: 5 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      assert.equal((await order(s, coid)).status, "CREATED", "the allot callback was dropped");
      assert.ok(s.pair.emulator.callbacks.deliveries().some((d) => d.fault === "dropped"));

      await new Promise((r) => setTimeout(r, 100));
      const report = await reconcileDue(deps());
      assert.equal(report.learned, 1);
      await settle(s.t, s.pair);
      const recovered = await order(s, coid);
      assert.equal(recovered.status, "ALLOTTED");
      assert.equal(recovered.rider?.id, "5");
      const events = await json<{ items: TimelineEvent[] }>(await s.t.request(`/v1/orders/${coid}/events`));
      assert.deepEqual(events.items.filter((e) => e.source === "poll").map((e) => e.status), ["ALLOTTED"]);

      // The same answer again is no new event.
      await s.t.database.sql`update orders set reconciled_at = null`;
      await new Promise((r) => setTimeout(r, 100));
      assert.equal((await reconcileDue(deps())).learned, 0);

      await s.pair.control.send("PUT", "/behaviour", { status_endpoint: false });
      await s.t.database.sql`update orders set reconciled_at = null`;
      const off = await reconcileDue(deps());
      assert.equal(off.off, true);
      assert.equal((await reconcileDue(deps())).asked, 0, "off: nothing asked again within the hour");
      assert.equal(s.t.logLines.filter((l) => l.includes("no order-status endpoint")).length, 1);

      // An hour on, one order (of the two due) is asked again: still missing is no second
      // warning, and the endpoint answering turns polling back on.
      await place(s);
      const later = () => ({ ...deps(), recheckMs: 0 });
      await s.t.database.sql`update orders set reconciled_at = null`;
      await new Promise((r) => setTimeout(r, 100));
      const still = await reconcileDue(later());
      assert.deepEqual([still.asked, still.off], [1, true], "one order asked, polling still off");
      assert.equal(s.t.logLines.filter((l) => l.includes("no order-status endpoint")).length, 1);
      await s.pair.control.send("PUT", "/behaviour", { status_endpoint: true });
      await s.t.database.sql`update orders set reconciled_at = null`;
      await new Promise((r) => setTimeout(r, 100));
      const back = await reconcileDue(later());
      assert.deepEqual([back.asked, back.off], [1, false]);
      assert.equal(s.t.logLines.filter((l) => l.includes("answers again: reconciliation is back on")).length, 1);
      await s.t.database.sql`update orders set reconciled_at = null`;
      const on = await reconcileDue(deps());
      assert.deepEqual([on.asked, on.off], [2, false], "back on: both orders asked, without waiting");
    } finally {
      resetEndpointMissing();
      await s.close();
    }
  });
});
