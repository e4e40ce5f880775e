/**
 * GET /v1/commands (every order's commands, newest first) and POST /v1/commands/{id}/retry
 * over the app. No provider is configured, so every command that runs ends `failed`
 * ("no provider configured") with a known outcome: material for the retry.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import type { Command } from "../helpers/api.ts";

const json = async <T>(res: Response) => (await res.json()) as T;
type Err = { error: { code: string; message: string; issues?: { path: string }[] } };
type Page = { items: Command[]; next_cursor: string | null };

let t: TestApp;
/** client_order_ids of the orders placed (P-0, P-1, P-2) and of the external one. */
const placed: string[] = [];

async function place(coid: string): Promise<void> {
  const res = await t.request("/v1/orders", { method: "POST", json: placeOrderBody({ clientOrderId: coid }) });
  assert.equal(res.status, 202, await res.clone().text());
}

async function commandJobs(id: string): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`
    select count(*)::int as n from graphile_worker.jobs
    where task_identifier = 'command__execute' and key = ${`command:${id}`}`;
  return row!.n;
}

const placement = async (coid: string) => (await json<{ placement: { state: string; error: string | null } }>(await t.request(`/v1/orders/${coid}`))).placement;
const commandsOf = async (coid: string) => (await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`))).items;

before(async () => {
  t = await createTestApp({ COMMAND_RETRY_BASE_MS: "5" });
  for (let i = 0; i < 3; i++) {
    placed.push(`P-${i}`);
    await place(`P-${i}`);
  }
  // An order known from callbacks (it has a provider id): cancel and stop-reattempt on it.
  await t.callback({ sfx_order_id: 9001, client_order_id: "EXT-1", order_status: "ALLOTTED", event_time: "2026-11-22T10:00:00Z" });
  await t.runJobs();
  for (const path of ["cancel", "stop-reattempt"]) {
    const res = await t.request(`/v1/orders/EXT-1/${path}`, { method: "POST", json: path === "cancel" ? { reason: "customer changed mind", user: "Customer" } : undefined });
    assert.equal(res.status, 202, await res.clone().text());
  }
  await t.runJobs();
});
after(async () => t.close());

describe("GET /v1/commands", () => {
  it("lists the commands of every order, newest first, with their order's ids", async () => {
    const page = await json<Page>(await t.request("/v1/commands"));
    assert.equal(page.next_cursor, null);
    assert.equal(page.items.length, 5);
    const ids = page.items.map((c) => Number(c.id));
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a));
    assert.deepEqual(
      page.items.map((c) => [c.kind, c.order!.client_order_id]),
      [["stop_reattempt", "EXT-1"], ["cancel", "EXT-1"], ["place", "P-2"], ["place", "P-1"], ["place", "P-0"]],
    );
    assert.equal(page.items[0]!.order!.svc_order_id, "9001");
    assert.equal(page.items[4]!.order!.svc_order_id, null);
    // The fields of the per-order list, and the order.
    const perOrder = (await commandsOf("P-0"))[0]!;
    const { order, ...rest } = page.items[4]!;
    assert.deepEqual(rest, perOrder);
    assert.deepEqual(order, { client_order_id: "P-0", svc_order_id: null });
    assert.ok(page.items.every((c) => c.state === "failed" && /no provider configured/.test(c.last_error!)));
  });

  it("filters by state and kind", async () => {
    const places = await json<Page>(await t.request("/v1/commands?kind=place"));
    assert.deepEqual(places.items.map((c) => c.order!.client_order_id), ["P-2", "P-1", "P-0"]);
    const cancels = await json<Page>(await t.request("/v1/commands?kind=cancel&state=failed"));
    assert.deepEqual(cancels.items.map((c) => c.kind), ["cancel"]);
    assert.deepEqual((await json<Page>(await t.request("/v1/commands?state=succeeded"))).items, []);
    assert.deepEqual((await json<Page>(await t.request("/v1/commands?state=pending&kind=place"))).items, []);
  });

  it("pages with a keyset cursor through every command exactly once", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const url: string = `/v1/commands?limit=2${cursor ? `&cursor=${cursor}` : ""}`;
      const page: Page = await json<Page>(await t.request(url));
      seen.push(...page.items.map((c) => c.id));
      cursor = page.next_cursor;
      pages++;
    } while (cursor !== null && pages < 10);
    assert.equal(pages, 3);
    const all = (await json<Page>(await t.request("/v1/commands"))).items.map((c) => c.id);
    assert.deepEqual(seen, all);
  });

  it("400 naming each bad parameter; a cursor of another list is refused", async () => {
    for (const [query, param] of [["state=done", "state"], ["kind=teleport", "kind"], ["limit=0", "limit"], ["limit=501", "limit"], ["cursor=nope", "cursor"]] as const) {
      const res = await t.request(`/v1/commands?${query}`);
      assert.equal(res.status, 400, query);
      const err = await json<Err>(res);
      assert.equal(err.error.code, "invalid_parameter");
      assert.deepEqual(err.error.issues?.map((i) => i.path), [param], query);
    }
    const orders = await json<{ next_cursor: string | null }>(await t.request("/v1/orders?limit=1"));
    assert.ok(orders.next_cursor);
    assert.equal((await t.request(`/v1/commands?cursor=${orders.next_cursor}`)).status, 400);
  });

  it("401 without the token", async () => {
    assert.equal((await t.request("/v1/commands", { token: null })).status, 401);
    assert.equal((await t.request("/v1/commands/1/retry", { method: "POST", token: null })).status, 401);
  });

  it("is in the OpenAPI document", async () => {
    const doc = await json<{ paths: Record<string, Record<string, unknown>> }>(await t.request("/openapi.json", { token: null }));
    assert.ok(doc.paths["/v1/commands"]?.get);
    assert.ok(doc.paths["/v1/commands/{id}/retry"]?.post);
  });
});

describe("POST /v1/commands/{id}/retry", () => {
  it("re-queues a refused place as a new attempt of the same command; its order's placement goes back to pending", async () => {
    const [before] = await commandsOf("P-0");
    assert.equal(before!.state, "failed");
    assert.equal((await placement("P-0")).state, "failed");
    assert.equal(await commandJobs(before!.id), 0);

    const res = await t.request(`/v1/commands/${before!.id}/retry`, { method: "POST" });
    assert.equal(res.status, 202, await res.clone().text());
    const queued = await json<Command>(res);
    assert.deepEqual(
      [queued.id, queued.kind, queued.state, queued.attempts, queued.last_error, queued.completed_at],
      [before!.id, "place", "pending", 0, before!.last_error, null],
    );
    assert.deepEqual(await placement("P-0"), { state: "pending", error: null });
    assert.equal(await commandJobs(before!.id), 1);
    assert.equal((await commandsOf("P-0")).length, 1, "no new command row");

    // Pending now: a second retry is refused, and queues nothing more.
    const again = await t.request(`/v1/commands/${before!.id}/retry`, { method: "POST" });
    assert.equal(again.status, 409);
    assert.match((await json<Err>(again)).error.message, /is pending: only a failed command/);

    // It ran again (and failed again: there is still no provider).
    await t.runJobs();
    const [after] = await commandsOf("P-0");
    assert.equal(after!.state, "failed");
    assert.ok(after!.completed_at! > before!.completed_at!);
    assert.equal(await commandJobs(before!.id), 0);
    assert.equal((await placement("P-0")).state, "failed");
  });

  it("re-queues a failed cancel; refuses it once the order is delivered (the state checks apply again)", async () => {
    const cancel = (await commandsOf("EXT-1")).find((c) => c.kind === "cancel")!;
    const res = await t.request(`/v1/commands/${cancel.id}/retry`, { method: "POST" });
    assert.equal(res.status, 202);
    assert.equal((await commandsOf("EXT-1")).find((c) => c.kind === "cancel")!.state, "pending");
    await t.runJobs();
    const ran = (await commandsOf("EXT-1")).find((c) => c.kind === "cancel")!;
    assert.equal(ran.state, "failed");
    assert.ok(ran.completed_at! > cancel.completed_at!);

    await t.callback({ sfx_order_id: 9001, client_order_id: "EXT-1", order_status: "DELIVERED", event_time: "2026-11-22T11:00:00Z" });
    await t.runJobs();
    const refused = await t.request(`/v1/commands/${cancel.id}/retry`, { method: "POST" });
    assert.equal(refused.status, 409);
    assert.match((await json<Err>(refused)).error.message, /already DELIVERED/);
    assert.equal((await commandsOf("EXT-1")).find((c) => c.kind === "cancel")!.state, "failed");
    assert.equal(await commandJobs(cancel.id), 0);
  });

  it("409 for a place whose outcome is unknown, pointing to …/placement/retry; nothing changes", async () => {
    const [command] = await commandsOf("P-1");
    await t.database.sql`update commands set outcome_unknown = true where id = ${command!.id}`;
    await t.database.sql`update orders set placement_state = 'unconfirmed' where client_order_id = 'P-1'`;
    const res = await t.request(`/v1/commands/${command!.id}/retry`, { method: "POST" });
    assert.equal(res.status, 409);
    const err = await json<Err>(res);
    assert.equal(err.error.code, "conflict");
    assert.match(err.error.message, /outcome is unknown/);
    assert.match(err.error.message, /POST \/v1\/orders\/P-1\/placement\/retry/);
    assert.match(err.error.message, /duplicate/);
    assert.equal((await placement("P-1")).state, "unconfirmed");
    assert.equal((await commandsOf("P-1"))[0]!.state, "failed");
    assert.equal(await commandJobs(command!.id), 0);

    // The order unconfirmed is enough (a later place of the same order may be the unknown one).
    await t.database.sql`update commands set outcome_unknown = false where id = ${command!.id}`;
    assert.equal((await t.request(`/v1/commands/${command!.id}/retry`, { method: "POST" })).status, 409);
  });

  it("409 for a refused place of an order that is placed (or being placed) by now: no second order", async () => {
    const [command] = await commandsOf("P-2");
    await t.database.sql`update orders set placement_state = 'placed', svc_order_id = '777' where client_order_id = 'P-2'`;
    const res = await t.request(`/v1/commands/${command!.id}/retry`, { method: "POST" });
    assert.equal(res.status, 409);
    assert.match((await json<Err>(res)).error.message, /already placed as 777/);
    assert.equal(await commandJobs(command!.id), 0);
  });

  it("409 for a command that succeeded; 404 command_not_found for an unknown id; 400 for an id that is not one", async () => {
    const stop = (await commandsOf("EXT-1")).find((c) => c.kind === "stop_reattempt")!;
    await t.database.sql`update commands set state = 'succeeded', completed_at = now() where id = ${stop.id}`;
    const done = await t.request(`/v1/commands/${stop.id}/retry`, { method: "POST" });
    assert.equal(done.status, 409);
    assert.match((await json<Err>(done)).error.message, /is succeeded/);

    const missing = await t.request("/v1/commands/999999/retry", { method: "POST" });
    assert.equal(missing.status, 404);
    assert.equal((await json<Err>(missing)).error.code, "command_not_found");

    for (const bad of ["abc", "0", "-1", "1.5", "1".repeat(16)]) {
      const res = await t.request(`/v1/commands/${bad}/retry`, { method: "POST" });
      assert.equal(res.status, 400, bad);
      assert.equal((await json<Err>(res)).error.code, "invalid_parameter");
    }
  });
});
