/**
 * Reconciliation's selection, pacing and switches (src/reconcile/reconcile.ts), and the
 * place whose job died mid-call, against the emulator over real HTTP. The end-to-end story
 * (a dropped callback recovered by a poll) is in test/e2e/real-provider.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { executeCommand } from "../../src/commands/execute.ts";
import { pollPayload, reconcileDue, resetEndpointMissing } from "../../src/reconcile/reconcile.ts";
import { silentOrders } from "../../src/orders/read.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

describe("reconciliation", () => {
  let s: Stack;
  before(async () => (s = await startStack({ COMMAND_MAX_ATTEMPTS: "3" })));
  after(async () => {
    resetEndpointMissing();
    await s.close();
  });
  const deps = (over: Partial<Parameters<typeof reconcileDue>[0]> = {}) => ({
    sql: s.t.database.sql,
    provider: s.pair.client,
    log: s.t.log,
    afterMin: 1,
    timeZone: "UTC",
    spacingMs: 0,
    ...over,
  });
  const statusPolls = async () => (await s.pair.control.requests()).filter((r) => r.path.endsWith("/status/")).length;

  async function placed(): Promise<{ coid: string; svc: string }> {
    const body = placeOrderBody();
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(s.t, s.pair);
    const o = await json<{ svc_order_id: string }>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
    return { coid: body.order_details.client_order_id, svc: o.svc_order_id };
  }

  /** Makes every order look silent for `minutes`. */
  const age = (minutes: number) =>
    s.t.database.sql`update orders set last_event_at = now() - make_interval(mins => ${minutes}), created_at = now() - make_interval(mins => ${minutes}), reconciled_at = null`;

  it("asks only active orders silent longer than RECONCILE_AFTER_MIN, each once per period; none when set to 0", async () => {
    const a = await placed();
    const b = await placed();
    await s.pair.client.deliver(b.svc, { status: "DELIVERED" });
    await s.pair.emulator.callbacks.idle();
    await settle(s.t, s.pair);

    assert.equal((await reconcileDue(deps())).asked, 0, "nothing is silent yet");
    await age(5);
    assert.deepEqual(await reconcileDue(deps({ afterMin: 0 })), { asked: 0, learned: 0, failed: 0, off: true });
    const before = await statusPolls();
    const report = await reconcileDue(deps());
    assert.equal(report.asked, 1, "the delivered order is not asked about");
    assert.equal((await statusPolls()) - before, 1);
    assert.equal((await reconcileDue(deps())).asked, 0, "asked once per period");
    const [row] = await s.t.database.sql<{ reconciled: boolean }[]>`
      select reconciled_at is not null as reconciled from orders where client_order_id = ${a.coid}`;
    assert.equal(row!.reconciled, true);
  });

  it("paces its calls and caps a run", async () => {
    await placed();
    await placed();
    await placed();
    await age(5);
    const started = Date.now();
    const report = await reconcileDue(deps({ spacingMs: 150, batch: 2 }));
    assert.equal(report.asked, 2);
    assert.ok(Date.now() - started >= 150, "the second call waited");
  });

  it("a rate-limited answer ends the run; an unknown order (JSON 404) is skipped, not a missing endpoint", async () => {
    await age(5);
    await s.pair.control.addFault({ path_regex: "/status/$", times: 1, action: "status", status: 429 });
    const limited = await reconcileDue(deps());
    assert.deepEqual([limited.asked, limited.failed, limited.off], [1, 1, false]);
    await age(5);
    await s.pair.control.addFault({ path_regex: "/status/$", times: 1, action: "status", status: 404, body: { detail: "Not found." } });
    const report = await reconcileDue(deps());
    assert.equal(report.off, false);
    assert.ok(report.asked > 1, "went on after the order-level 404");
    await age(5);
    await s.pair.control.addFault({ path_regex: "/status/$", times: 1, action: "status", status: 404, body: "" });
    assert.equal((await reconcileDue(deps())).off, false, "an empty 404 is an unknown order too, not a missing endpoint");
  });

  it("refused credentials end the run: not one refused call per silent order", async () => {
    await placed();
    await placed();
    await age(5);
    await s.pair.control.addFault({ path_regex: "/status/$", action: "status", status: 401, body: { detail: "Invalid token." } });
    try {
      const report = await reconcileDue(deps());
      assert.deepEqual([report.asked, report.failed, report.off], [1, 1, false]);
    } finally {
      await s.pair.control.send("DELETE", "/faults");
    }
  });

  it("a 5xx ends the run: not one failing call per silent order", async () => {
    await placed();
    await placed();
    await age(5);
    await s.pair.control.addFault({ path_regex: "/status/$", action: "status", status: 503, body: { detail: "Service unavailable" } });
    try {
      const before = await statusPolls();
      const report = await reconcileDue(deps());
      assert.deepEqual([report.asked, report.failed, report.off], [1, 1, false]);
      assert.equal((await statusPolls()) - before, 1);
    } finally {
      await s.pair.control.send("DELETE", "/faults");
    }
  });

  it("an answer naming another order is not recorded: the two orders are not merged", async () => {
    const a = await placed();
    const b = await placed();
    await age(5);
    // Asked about B, the provider answers with A's provider id (and no client id), or with B's
    // provider id and another client_order_id.
    const answer = (data: Record<string, unknown>) => ({ action: "status", status: 200, body: { message: "Success", data } });
    await s.pair.control.addFault({ path_regex: `/${b.svc}/status/$`, times: 1, ...answer({ status: "DELIVERED", sfx_order_id: Number(a.svc) }) });
    await s.pair.control.addFault({ path_regex: `/${a.svc}/status/$`, times: 1, ...answer({ status: "CANCELLED", sfx_order_id: Number(a.svc), client_order_id: b.coid }) });
    try {
      const report = await reconcileDue(deps());
      await settle(s.t, s.pair);
      for (const o of [a, b]) {
        const res = await s.t.request(`/v1/orders/${o.coid}`);
        assert.equal(res.status, 200);
        const row = await json<{ svc_order_id: string; svc_order_ids: string[]; status: string }>(res);
        assert.deepEqual([row.svc_order_id, row.svc_order_ids], [o.svc, [o.svc]], `${o.coid} keeps its own provider id only`);
        assert.equal(row.status, "CREATED");
      }
      const [polls] = await s.t.database.sql<{ n: number }[]>`
        select count(*)::int as n from order_events where source = 'poll' and provider_status in ('DELIVERED', 'CANCELLED')`;
      assert.equal(polls!.n, 0);
      assert.ok(report.failed >= 2, `both answers counted as failed: ${JSON.stringify(report)}`);
    } finally {
      await s.pair.control.send("DELETE", "/faults");
    }
  });

  it("the rider's position in an answer is dated when it was answered, not at the status's step: the newest poll's position is shown", async () => {
    const a = await placed();
    await age(5);
    await s.t.database.sql`update orders set reconciled_at = now() where client_order_id <> ${a.coid}`;
    const dispatched = "2026-01-02T03:04:05Z";
    const answer = (latitude: string, longitude: string) => ({
      path_regex: `/${a.svc}/status/$`,
      times: 1,
      action: "status",
      status: 200,
      body: {
        message: "Success",
        data: {
          status: "COLLECTED",
          sfx_order_id: Number(a.svc),
          client_order_id: a.coid,
          rider_details: { rider_id: 7, rider_name: "Rider 7", rider_location: { latitude, longitude } },
          order_details: { allot_time: "2026-01-02T03:00:00Z", dispatch_time: dispatched },
        },
      },
    });
    const poll = async (latitude: string, longitude: string) => {
      // Silent again (a position just learned is an event of now).
      await s.t.database.sql`update orders set last_event_at = now() - interval '5 minutes', reconciled_at = null where client_order_id = ${a.coid}`;
      await s.pair.control.addFault(answer(latitude, longitude));
      const report = await reconcileDue(deps());
      await settle(s.t, s.pair);
      return report;
    };
    const events = async () =>
      (await s.t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where source = 'poll' and client_order_id = ${a.coid}`)[0]!.n;
    try {
      assert.equal((await poll("12.9100", "77.6100")).learned, 1);
      const started = Date.now();
      assert.equal((await poll("12.9200", "77.6200")).learned, 1);
      const o = await json<{ status: string; status_at: string; rider: { latitude: number; longitude: number; location_at: string } }>(
        await s.t.request(`/v1/orders/${a.coid}`),
      );
      assert.equal(o.status, "COLLECTED");
      assert.equal(o.status_at, "2026-01-02T03:04:05.000Z", "the status keeps its step time");
      assert.deepEqual([o.rider.latitude, o.rider.longitude], [12.92, 77.62], "the newest poll's position");
      assert.ok(new Date(o.rider.location_at).getTime() >= started - 1000, `location_at ${o.rider.location_at} is when it was answered`);
      const n = await events();
      const again = await poll("12.9200", "77.6200");
      assert.equal(again.learned, 0, "the same answer again is nothing new");
      assert.equal(await events(), n, "no event added by the same answer");
    } finally {
      await s.pair.control.send("DELETE", "/faults");
    }
  });

  it("silence is measured on tracklane's clock: an event the provider dated hours ahead does not keep a silent order from its poll, nor from the stuck list", async () => {
    const a = await placed();
    await s.t.database.sql`update orders set reconciled_at = now() where client_order_id <> ${a.coid}`;
    // A provider clock 3 h fast (or zone-less local times read as UTC): received now, dated 3 h on.
    const ahead = new Date(Date.now() + 3 * 3_600_000).toISOString();
    const res = await s.t.callback({ svc_order_id: a.svc, client_order_id: a.coid, order_status: "ALLOTTED", event_time: ahead });
    assert.equal(res.status, 200);
    await settle(s.t, s.pair);
    // 30 minutes go by with no word from the provider (every time the row holds, moved back).
    await s.t.database.sql`
      update orders set created_at = created_at - interval '30 minutes', updated_at = updated_at - interval '30 minutes',
        last_event_at = last_event_at - interval '30 minutes', reconciled_at = null
      where client_order_id = ${a.coid}`;
    const [row] = await s.t.database.sql<{ future: boolean }[]>`select last_event_at > now() as future from orders where client_order_id = ${a.coid}`;
    assert.equal(row!.future, true, "the event's own time is still ahead");
    const stuck = await silentOrders(s.t.database.sql, ["ALLOTTED"], 15, 100);
    assert.ok(
      stuck.rows.some((o) => o.client_order_id === a.coid),
      "listed as silent for 15 minutes",
    );
    const silent = stuck.rows.find((o) => o.client_order_id === a.coid)!;
    assert.ok(silent.silent_since.getTime() <= Date.now() - 29 * 60_000, `silent since it was last heard of, not ${silent.silent_since.toISOString()}`);
    const before = await statusPolls();
    assert.equal((await reconcileDue(deps({ afterMin: 15 }))).asked, 1, "polled after 30 minutes without an event");
    assert.equal((await statusPolls()) - before, 1);
  });

  it("a poll's payload keeps the answer and adds only the ids it leaves out", () => {
    assert.deepEqual(pollPayload({ status: "ALLOTTED" }, { svc_order_id: "9", client_order_id: "C" }), { status: "ALLOTTED", svc_order_id: "9", client_order_id: "C" });
    assert.deepEqual(pollPayload({ status: "X", sfx_order_id: 9, client_order_id: "C2" }, { svc_order_id: "9", client_order_id: "C" }), { status: "X", sfx_order_id: 9, client_order_id: "C2" });
  });
});

describe("reconciliation of an order with two provider ids", () => {
  let s: Stack;
  before(async () => {
    s = await startStack();
    assert.equal((await s.pair.control.send("PUT", "/behaviour", { accept_duplicate_orders: true })).status, 200);
  });
  after(async () => {
    resetEndpointMissing();
    await s.close();
  });

  it("asks about each of them: a lost DELIVERED of the provider order that is not the order's svc_order_id is recovered", async () => {
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(s.t, s.pair);
    // The provider made a second order for the same client_order_id; its allotment names both ids.
    const second = String((await s.pair.client.placeOrder(body)).data.svc_order_id);
    await s.pair.client.allot(second, { rider_id: 7 });
    await s.pair.emulator.callbacks.idle();
    await settle(s.t, s.pair);
    let o = await json<{ status: string; svc_order_id: string; svc_order_ids: string[] }>(await s.t.request(`/v1/orders/${coid}`));
    assert.equal(o.svc_order_ids.length, 2);
    const other = o.svc_order_ids.find((id) => id !== o.svc_order_id)!;
    // The delivery callback of the provider order that is not the order's svc_order_id is lost.
    await s.pair.control.addFault({ action: "drop", kind: "status" });
    await s.pair.client.deliver(other, { status: "DELIVERED" });
    await s.pair.emulator.callbacks.idle();
    await settle(s.t, s.pair);
    assert.equal((await json<{ status: string }>(await s.t.request(`/v1/orders/${coid}`))).status, "ALLOTTED");

    await s.t.database.sql`update orders set last_event_at = now() - interval '5 minutes', created_at = now() - interval '5 minutes', reconciled_at = null`;
    const report = await reconcileDue({ sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, afterMin: 1, timeZone: "UTC", spacingMs: 0 });
    assert.equal(report.asked, 2, "both provider ids asked about");
    await settle(s.t, s.pair);
    o = await json(await s.t.request(`/v1/orders/${coid}`));
    assert.equal(o.status, "DELIVERED");
  });
});

describe("a place whose job died during the call", () => {
  const deps = (s: Stack) => ({ sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false });
  const places = async (s: Stack) => (await s.pair.control.requests()).filter((r) => r.path === "/api/v2/stores/orders/").length;

  it("is not sent again when the run died after marking it as sending: unconfirmed (PROVIDER_DEDUPES_ORDERS=false)", async () => {
    const s = await startStack();
    try {
      const body = placeOrderBody();
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`select id::int from commands where kind = 'place'`;
      // What a run that died during the call leaves behind: the mark set before sending.
      await s.t.database.sql`update commands set outcome_unknown = true where id = ${command!.id}`;
      await executeCommand(deps(s), command!.id);
      const o = await json<{ placement: { state: string; error: string } }>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
      assert.equal(o.placement.state, "unconfirmed");
      assert.match(o.placement.error, /an earlier attempt ended without an answer/);
      assert.equal(await places(s), 0, "not sent");
    } finally {
      await s.close();
    }
  });

  it("is sent when the run died before the call (no mark), and a definite answer clears the mark", async () => {
    const s = await startStack();
    try {
      const body = placeOrderBody();
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`select id::int from commands where kind = 'place'`;
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 503 });
      await executeCommand(deps(s), command!.id);
      const [row] = await s.t.database.sql<{ outcome_unknown: boolean; state: string }[]>`select outcome_unknown, state from commands where id = ${command!.id}`;
      assert.deepEqual([row!.state, row!.outcome_unknown], ["pending", false], "a 503 is a refusal: the mark is cleared");
      await executeCommand(deps(s), command!.id);
      const o = await json<{ placement: { state: string } }>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
      assert.equal(o.placement.state, "placed");
      assert.equal(await places(s), 2);
      assert.equal((await s.pair.control.orders(body.order_details.client_order_id)).length, 1);
    } finally {
      await s.close();
    }
  });
});
