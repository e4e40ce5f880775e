/**
 * How a place ends after an attempt whose outcome is unknown, and how long a Retry-After
 * may hold a command back, over real HTTP to the emulator.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { abandonStranded, executeCommand } from "../../src/commands/execute.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

/** The longest Retry-After honoured (docs/provider.md). */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

describe("a place after an attempt whose outcome is unknown (PROVIDER_DEDUPES_ORDERS=true)", () => {
  it("a plain refusal after an ambiguous attempt ends the placement unconfirmed, where a person sees it, not failed", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      // The first attempt creates the order and answers 500; the second is refused in
      // words that do not name the order (no `data`), so it cannot be adopted.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 500, process: true });
      await s.pair.control.addFault({
        method: "POST",
        path: "/api/v2/stores/orders/",
        times: 1,
        action: "status",
        status: 400,
        body: { message: "Failure", errors: { client_order_id: ["duplicate"] } },
      });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);

      assert.equal((await s.pair.control.orders(coid)).length, 1, "the provider has the order");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "unconfirmed");
      assert.match(order.placement.error!, /outcome is unknown, then refused: client 400: Failure: client_order_id: duplicate/);
      const unconfirmed = await json<{ items: Order[] }>(await s.t.request("/v1/orders?placement=unconfirmed"));
      assert.deepEqual(unconfirmed.items.map((o) => o.client_order_id), [coid], "listed for a person to resolve");
      const [command] = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
      assert.deepEqual([command!.kind, command!.state, command!.attempts], ["place", "failed", 2]);
      const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`select outcome_unknown from commands where id = ${command!.id}`;
      assert.equal(row!.outcome_unknown, true);
      // Resolved through the placement, not by sending the command again.
      assert.equal((await s.t.request(`/v1/commands/${command!.id}/retry`, { method: "POST" })).status, 409);
      const provider = (await s.pair.control.orders(coid))[0]!;
      const confirmed = await s.t.request(`/v1/orders/${coid}/placement/confirm`, { method: "POST", json: { svc_order_id: String(provider["svc_order_id"]) } });
      assert.equal(confirmed.status, 200, await confirmed.clone().text());
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

describe("a place whose order the provider named while its retry waited", () => {
  it("is not sent again: the retry ends succeeded on the named order, one place request (PROVIDER_DEDUPES_ORDERS=true)", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      // The first attempt creates the order and its answer is lost (500): a retry is due.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 500, process: true });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`
        select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
      const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: true };
      await executeCommand(deps, command!.id);
      const [retrying] = await s.t.database.sql<{ state: string; attempts: number }[]>`select state, attempts from commands where id = ${command!.id}`;
      assert.deepEqual({ ...retrying }, { state: "pending", attempts: 1 }, "the 500 left a retry");
      // Before the retry runs, the provider's callbacks name the order (both ids): projected.
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now() + interval '1 hour' where key like 'command:%'`;
      const provider = await s.pair.control.orders(coid);
      assert.equal(provider.length, 1);
      const allotted = await s.t.callback({ sfx_order_id: provider[0]!["svc_order_id"], client_order_id: coid, order_status: "ALLOTTED", allot_time: new Date().toISOString() });
      assert.equal(allotted.status, 200, await allotted.clone().text());
      await s.t.runJobs();
      const named = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(named.svc_order_id, String(provider[0]!["svc_order_id"]), "the callbacks linked the provider's id");

      await executeCommand(deps, command!.id);
      const places = (await s.pair.control.requests()).filter((r) => r.method === "POST" && r.path === "/api/v2/stores/orders/");
      assert.equal(places.length, 1, "the place was not sent again: the provider already has the order");
      const [row] = await s.t.database.sql<{ state: string }[]>`select state from commands where id = ${command!.id}`;
      assert.equal(row!.state, "succeeded");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.deepEqual([order.placement.state, order.svc_order_id], ["placed", named.svc_order_id]);
    } finally {
      await s.close();
    }
  });
});

describe("a place answered 2xx without an order, by a provider that says it took it", () => {
  it("202 Accepted, or a success flag, with words that are not a success word: unconfirmed (the provider has the order), never failed", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      // Each answer replaces the real one after the emulator created the order.
      const answers = [
        { status: 202, body: { message: "Your request is being processed" } },
        { status: 200, body: { success: true, message: "Request is being processed" } },
        { status: 200, body: { status: "Success", message: "Order in queue" } },
      ];
      for (const answer of answers) {
        await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", process: true, ...answer });
        const body = placeOrderBody();
        const coid = body.order_details.client_order_id;
        assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
        await settle(s.t, s.pair);

        const label = JSON.stringify(answer);
        assert.equal((await s.pair.control.orders(coid)).length, 1, `${label}: the provider has the order`);
        const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
        assert.equal(order.placement.state, "unconfirmed", `${label}: ${order.placement.error}`);
        assert.match(order.placement.error!, /outcome unknown, not re-sent/, label);
        // Not sent again: the provider still has one order.
        assert.equal((await s.pair.control.orders(coid)).length, 1, `${label}: not sent again`);
      }
    } finally {
      await s.close();
    }
  });
});

describe("a place answered 303 See Other (the provider acted and points to the result)", () => {
  const seeOther = { method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 303, process: true, body: "" };

  it("is not sent again: unconfirmed, one provider order, the error saying it may have acted", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      await s.pair.control.addFault({ ...seeOther, headers: { location: `${s.pair.url}/api/v2/stores/orders/31000001/` } });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);

      assert.equal((await s.pair.control.orders(coid)).length, 1, "the provider has the order, once");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "unconfirmed", order.placement.error ?? "");
      assert.match(order.placement.error!, /outcome unknown, not re-sent: client 303: the provider answered 303 See Other .*may have acted/);
    } finally {
      await s.close();
    }
  });

  it("with PROVIDER_DEDUPES_ORDERS=true it is sent again, and the refusal naming the order adopts it", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      await s.pair.control.addFault(seeOther);
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);

      const provider = await s.pair.control.orders(coid);
      assert.equal(provider.length, 1, "the provider has the order, once");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "placed", order.placement.error ?? "");
      assert.equal(order.svc_order_id, String(provider[0]!["svc_order_id"]));
    } finally {
      await s.close();
    }
  });
});

describe("Retry-After", () => {
  it(`a Retry-After of a day holds a place back ${MAX_RETRY_AFTER_MS / 60_000} minutes at most`, async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 429, headers: { "retry-after": "86400" } });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await s.t.runJobs();

      const [job] = await s.t.database.sql<{ in_ms: number }[]>`
        select (extract(epoch from j.run_at - now()) * 1000)::float8 as in_ms
        from graphile_worker.jobs j join commands c on j.key = 'command:' || c.id join orders o on o.id = c.order_id
        where o.client_order_id = ${coid}`;
      assert.ok(job, "the place waits for its retry");
      assert.ok(job.in_ms <= MAX_RETRY_AFTER_MS + 1000, `retry in ${job.in_ms} ms`);
      assert.ok(job.in_ms >= MAX_RETRY_AFTER_MS - 60_000, `Retry-After honoured up to the cap: retry in ${job.in_ms} ms`);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "pending");

      // The retry, made due now, places the order.
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now()`;
      await settle(s.t, s.pair);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

/**
 * A command's job that throws on every run (an error inside tracklane, here raised by a
 * trigger in real PostgreSQL) is retried by graphile-worker until its last attempt; the
 * command then ends where a person sees it instead of staying pending with no job.
 */
describe("a command whose job fails inside tracklane until graphile-worker gives up", () => {
  const refuseWhen = async (s: Awaited<ReturnType<typeof startStack>>, condition: string) => {
    await s.t.database.sql.unsafe(`
      create function test_refuse_command() returns trigger language plpgsql as $$
      begin raise exception 'refused for the test: the command row cannot change'; end $$;
      create trigger test_refuse_command before update on commands for each row when (${condition}) execute function test_refuse_command();`);
  };
  const commandOf = async (s: Awaited<ReturnType<typeof startStack>>, coid: string) =>
    (await json<{ items: (Command & { last_error: string | null })[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items[0]!;

  it("a place that never got as far as sending ends failed (nothing at the provider), and a retry places it once the cause is gone", async () => {
    const s = await startStack({});
    try {
      await refuseWhen(s, "new.outcome_unknown and not old.outcome_unknown"); // the sending mark
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await s.t.database.sql`update graphile_worker._private_jobs set max_attempts = 2 where key like 'command:%'`;
      await s.t.runJobs();
      assert.equal((await commandOf(s, coid)).state, "pending", "the first run's error is retried");
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now() where key like 'command:%'`;
      await s.t.runJobs();

      const command = await commandOf(s, coid);
      assert.equal(command.state, "failed");
      assert.equal(command.last_error, "gave up after 2 runs that failed inside tracklane (PostgresError, P0001); the worker's log has the error");
      assert.ok(s.t.logLines.some((l) => l.includes("command abandoned: failed") && l.includes("refused for the test")), "the error itself is logged");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "failed");
      assert.equal((await s.pair.control.orders(coid)).length, 0, "nothing was sent");
      const [job] = await s.t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key like 'command:%'`;
      assert.equal(job!.n, 0, "the job is done with: the command's state says what happened");

      await s.t.database.sql`drop trigger test_refuse_command on commands`;
      assert.equal((await s.t.request(`/v1/commands/${command.id}/retry`, { method: "POST" })).status, 202);
      await settle(s.t, s.pair);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
      assert.equal((await s.pair.control.orders(coid)).length, 1);
    } finally {
      await s.close();
    }
  });

  it("a place whose last run failed after sending ends unconfirmed: the provider may have the order", async () => {
    const s = await startStack({});
    try {
      await refuseWhen(s, "new.state = 'succeeded'"); // recording the provider's answer
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await s.t.database.sql`update graphile_worker._private_jobs set max_attempts = 1 where key like 'command:%'`;
      await s.t.runJobs();

      assert.equal((await s.pair.control.orders(coid)).length, 1, "the provider created the order");
      const command = await commandOf(s, coid);
      assert.equal(command.state, "failed");
      assert.match(command.last_error!, /^outcome unknown, not re-sent: gave up after 1 runs/);
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "unconfirmed", "for a person or the provider's callback to settle, never sent again");
    } finally {
      await s.close();
    }
  });

  it("an edit whose last run failed ends failed, and its retry sends it again", async () => {
    const s = await startStack({});
    try {
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);
      await refuseWhen(s, "new.kind = 'edit' and new.state = 'succeeded'");
      const edit = await s.t.request(`/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 321 } } });
      assert.equal(edit.status, 202, await edit.clone().text());
      await s.t.database.sql`update graphile_worker._private_jobs set max_attempts = 1 where key like 'command:%'`;
      await s.t.runJobs();

      const commands = (await json<{ items: (Command & { last_error: string | null })[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
      const failed = commands.find((c) => c.kind === "edit")!;
      assert.equal(failed.state, "failed");
      // The run failed after the provider applied the edit (its answer was not recorded):
      // the failure says the outcome is unknown, not that nothing was done.
      assert.match(failed.last_error!, /^outcome unknown: .*; then gave up after 1 runs that failed inside tracklane \(PostgresError, P0001\)/);

      await s.t.database.sql`drop trigger test_refuse_command on commands`;
      assert.equal((await s.t.request(`/v1/commands/${failed.id}/retry`, { method: "POST" })).status, 202);
      await settle(s.t, s.pair);
      const retried = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items.find((c) => c.id === failed.id)!;
      assert.equal(retried.state, "succeeded");
    } finally {
      await s.close();
    }
  });

  it("the sweep ends pending commands that no job will run again: unconfirmed for a place that may have been sent, failed otherwise", async () => {
    const s = await startStack({});
    try {
      const accept = async () => {
        const body = placeOrderBody();
        assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
        const coid = body.order_details.client_order_id;
        return { coid, id: (await commandOf(s, coid)).id };
      };
      const sentThenKilled = await accept(); // marked as sending; the worker died in its last attempt
      const jobRemoved = await accept(); // never sent; someone removed its job
      const waiting = await accept(); // its job waits for a retry: left alone
      const justNow = await accept(); // out of attempts, but changed a moment ago: left alone
      const key = (id: string | number) => `command:${id}`;
      await s.t.database.sql`update commands set outcome_unknown = true where id = ${sentThenKilled.id}`;
      await s.t.database.sql`update graphile_worker._private_jobs set attempts = max_attempts where key in (${key(sentThenKilled.id)}, ${key(justNow.id)})`;
      await s.t.database.sql`delete from graphile_worker._private_jobs where key = ${key(jobRemoved.id)}`;
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now() + interval '1 hour' where key = ${key(waiting.id)}`;
      await s.t.database.sql`
        update commands set updated_at = now() - interval '6 minutes' where id in (${sentThenKilled.id}, ${jobRemoved.id}, ${waiting.id})`;

      assert.equal(await abandonStranded({ sql: s.t.database.sql, log: s.t.log }), 2);
      const placement = async (coid: string) => (await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state;
      const killed = await commandOf(s, sentThenKilled.coid);
      assert.equal(killed.state, "failed");
      assert.match(killed.last_error!, /^outcome unknown, not re-sent: gave up: its job ended, or was removed, with the command still pending/);
      assert.equal(await placement(sentThenKilled.coid), "unconfirmed", "the provider may have it: a person settles it");
      const removed = await commandOf(s, jobRemoved.coid);
      assert.equal(removed.state, "failed");
      assert.match(removed.last_error!, /^gave up: its job ended, or was removed/);
      assert.equal(await placement(jobRemoved.coid), "failed");
      for (const left of [waiting, justNow]) {
        assert.equal((await commandOf(s, left.coid)).state, "pending");
        assert.equal(await placement(left.coid), "pending");
      }
      assert.equal(await abandonStranded({ sql: s.t.database.sql, log: s.t.log }), 0, "nothing more to end");

      // The failed one is sent again by a retry; nothing was sent for either before.
      assert.equal((await s.pair.control.orders(jobRemoved.coid)).length, 0);
      assert.equal((await s.t.request(`/v1/commands/${removed.id}/retry`, { method: "POST" })).status, 202);
      await s.t.runJobs();
      assert.equal(await placement(jobRemoved.coid), "placed");
      assert.equal((await s.pair.control.orders(sentThenKilled.coid)).length, 0, "the unconfirmed one was not sent again");
    } finally {
      await s.close();
    }
  });
});

describe("two runs of one place at once", () => {
  it("only one sends it: a job unlocked under a runner that still runs it finds the other run's sending mark (OAuth exchange in between)", async () => {
    // A worker's liveness lock lost with its runner alive, or a runner replaced while its
    // job still ran, lets a second run start beside the first. The token exchange they
    // both wait for (slowed here) lies between reading the command and marking it sent.
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" }, { product: "quick_commerce", auth: "oauth" });
    try {
      // As the real provider: a second send would be a second order.
      assert.equal((await s.pair.control.send("PUT", "/behaviour", { accept_duplicate_orders: true })).status, 200);
      await s.pair.control.addFault({ method: "POST", path: "/oauth/token/", times: 1, action: "delay", delay_ms: 300 });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`
        select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
      const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
      await Promise.all([executeCommand(deps, command!.id), executeCommand(deps, command!.id)]);
      await settle(s.t, s.pair);

      assert.equal((await s.pair.control.orders(coid)).length, 1, "one provider order");
      const places = (await s.pair.control.requests()).filter((r) => r.method === "POST" && r.path === "/api/v2/stores/orders/");
      assert.equal(places.length, 1, "the place went out once");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "placed", order.placement.error ?? "");
      const [row] = await s.t.database.sql<{ state: string }[]>`select state from commands where id = ${command!.id}`;
      assert.equal(row!.state, "succeeded");
    } finally {
      await s.close();
    }
  });
});

describe("two runs of one place at once, the sender's answer late", () => {
  it("the run that lost the claim records nothing: the sender's 503 is retried and places the order, not left unconfirmed", async () => {
    // Both runs read the command before either marks it: they wait for the same (slowed)
    // token exchange in between, as in the test above.
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" }, { product: "quick_commerce", auth: "oauth" });
    try {
      assert.equal((await s.pair.control.send("PUT", "/behaviour", { accept_duplicate_orders: true })).status, 200);
      await s.pair.control.addFault({ method: "POST", path: "/oauth/token/", times: 1, action: "delay", delay_ms: 300 });
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 503, body: { message: "busy" } });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`
        select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
      // The sender's answer comes after the other run has found the mark set.
      const slow = { ...s.pair.client, placeOrder: async (b: Parameters<typeof s.pair.client.placeOrder>[0]) => {
        await new Promise((r) => setTimeout(r, 300));
        return await s.pair.client.placeOrder(b);
      } };
      const deps = { sql: s.t.database.sql, provider: slow, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
      await Promise.all([executeCommand(deps, command!.id), executeCommand(deps, command!.id)]);
      const [mid] = await s.t.database.sql<{ state: string; placement_state: string }[]>`
        select c.state, o.placement_state from commands c join orders o on o.id = c.order_id where c.id = ${command!.id}`;
      assert.deepEqual(mid, { state: "pending", placement_state: "pending" }, "the 503 is retried: nothing was sent");
      await settle(s.t, s.pair);

      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "placed", order.placement.error ?? "");
      assert.equal((await s.pair.control.orders(coid)).length, 1, "one provider order");
    } finally {
      await s.close();
    }
  });
});

describe("a placed order whose provider id is still being linked", () => {
  it("a command waits for the id, but not for ever: after 15 minutes it ends failed, saying why", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);
      // As when another row held the provider's id and the projection has not merged them
      // (here: never will, as if its projection kept failing).
      await s.t.database.sql`update orders set svc_order_id = null where client_order_id = ${coid}`;
      const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
      const cancel = async () => {
        const res = await s.t.request(`/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "changed mind", user: "Seller" } });
        assert.equal(res.status, 202);
        return Number((await json<Command>(res)).id);
      };
      const stale = await cancel();
      // Accepted long before the order was placed (it waited for a pending place through an
      // outage): its wait for the link began when the order became placed, moments ago.
      await s.t.database.sql`update commands set updated_at = now() - interval '30 minutes' where id = ${stale}`;
      await executeCommand(deps, stale);
      const [waiting] = await s.t.database.sql<{ state: string }[]>`select state from commands where id = ${stale}`;
      assert.equal(waiting!.state, "pending", "15 minutes from the placement, not from the command's acceptance");
      await s.t.database.sql`
        update commands c set completed_at = now() - interval '16 minutes' from orders o
        where o.id = c.order_id and o.client_order_id = ${coid} and c.kind = 'place'`;
      await executeCommand(deps, stale);
      const fresh = await cancel();
      await executeCommand(deps, fresh);
      const rows = await s.t.database.sql<{ id: number; state: string; last_error: string | null }[]>`
        select id::int, state, last_error from commands where id in (${stale}, ${fresh}) order by id`;
      assert.deepEqual(rows.map((r) => r.state), ["failed", "pending"]);
      assert.match(rows[0]!.last_error!, /placed but its provider id has not reached it in 15 minutes/);
      assert.equal((await s.pair.control.requests()).filter((r) => r.path.endsWith("/cancel/")).length, 0, "nothing sent");
    } finally {
      await s.close();
    }
  });
});

describe("a late run after a manual retry", () => {
  for (const mode of ["strict", "realistic"] as const) {
    it(`records nothing over the retried round: the retry's own run sends the edit and records its outcome (${mode})`, async () => {
      // A job unlocked under a runner that still runs it: the stale run got the provider's
      // refusal, then stalled before recording it; meanwhile the second run was refused
      // too, the command ended failed, and a person retried it.
      const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "5" });
      try {
        assert.equal((await s.pair.control.send("PUT", "/behaviour", { realistic: mode === "realistic" })).status, 200);
        const body = placeOrderBody();
        const coid = body.order_details.client_order_id;
        assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
        await settle(s.t, s.pair);
        await s.pair.control.addFault({ method: "PUT", path: "/api/v1/stores/edit-order/", times: 2, action: "status", status: 400, body: { message: "Failure" } });
        const edit = (await (await s.t.request(`/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 777 } } })).json()) as Command;
        const gate = Promise.withResolvers<void>();
        const answered = Promise.withResolvers<void>();
        const stalled = new Proxy(s.pair.client, {
          get(target, key, receiver) {
            if (key !== "editOrder") return Reflect.get(target, key, receiver) as unknown;
            return async (b: Parameters<typeof target.editOrder>[0]) => {
              try {
                return await target.editOrder(b);
              } finally {
                answered.resolve();
                await gate.promise;
              }
            };
          },
        });
        const deps = (provider: typeof s.pair.client) => ({ sql: s.t.database.sql, provider, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false });
        const stale = executeCommand(deps(stalled), Number(edit.id));
        await answered.promise;
        await executeCommand(deps(s.pair.client), Number(edit.id));
        const [ended] = await s.t.database.sql<{ state: string }[]>`select state from commands where id = ${edit.id}`;
        assert.equal(ended!.state, "failed", "the second run's refusal ended the command");
        assert.equal((await s.t.request(`/v1/commands/${edit.id}/retry`, { method: "POST" })).status, 202);
        gate.resolve();
        await stale;
        await settle(s.t, s.pair);
        const [row] = await s.t.database.sql<{ state: string; attempts: number }[]>`select state, attempts from commands where id = ${edit.id}`;
        assert.deepEqual(row, { state: "succeeded", attempts: 1 }, "the retried round is the retry's own");
        const edits = (await s.pair.control.requests()).filter((r) => r.path === "/api/v1/stores/edit-order/");
        assert.deepEqual(edits.map((r) => r.status), [400, 400, 200], "the retry sent the edit");
      } finally {
        await s.close();
      }
    });
  }
});
