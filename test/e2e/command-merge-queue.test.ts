/**
 * When two rows of one order merge, the merged-away row's commands follow the survivor, and
 * so do their waiting jobs: into the survivor's queue, so that a real worker runs the
 * order's commands one at a time and in the order accepted. Left in the old row's queue, a
 * moved edit waiting for its retry ran beside the survivor's next edit.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { startWorker } from "../../src/worker/runner.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

async function accept(s: Stack, path: string, body: unknown): Promise<Command> {
  const res = await s.t.request(path, { method: "PATCH", json: body });
  assert.equal(res.status, 202, `${path}: ${await res.clone().text()}`);
  return await json<Command>(res);
}

async function callback(s: Stack, body: Record<string, unknown>): Promise<void> {
  assert.equal((await s.t.callback(body)).status, 200);
}

const HOLDER = "worker-held-by-test";

const jobOf = async (s: Stack, commandId: number | string) =>
  (await s.t.database.sql<{ queue_name: string | null; run_at: Date; locked_at: Date | null }[]>`
    select queue_name, run_at, locked_at from graphile_worker.jobs where key = ${`command:${commandId}`}`)[0];

/**
 * Two rows of one order, both known from the provider's callbacks only (the client's id on
 * the older, the provider's on the newer), and an edit of the newer row waiting for its
 * retry after a 503; then a callback names both ids and the rows merge into the older.
 */
async function mergedWithWaitingEdit(s: Stack, held = false): Promise<{ coid: string; svc: string; survivor: number; loser: number; moved: Command }> {
  s.pair.emulator.state.callbackUrls = []; // tracklane hears only the callbacks below
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  const svc = (await s.pair.client.placeOrder(body)).data.svc_order_id;
  await callback(s, { client_order_id: coid, order_status: "CREATED" });
  await s.t.runJobs();
  await callback(s, { sfx_order_id: svc, order_status: "CREATED" });
  await s.t.runJobs();
  const idOf = async (column: "client_order_id" | "svc_order_id", value: string) =>
    (await s.t.database.sql<{ id: number }[]>`select id::int from orders where ${s.t.database.sql(column)} = ${value}`)[0]!.id;
  const survivor = await idOf("client_order_id", coid);
  const loser = await idOf("svc_order_id", svc);
  assert.ok(loser > survivor, "the older row survives the merge");

  await s.pair.control.addFault({ method: "PUT", path: "/api/v1/stores/edit-order/", times: 1, action: "status", status: 503 });
  const moved = await accept(s, `/v1/orders/by-svc-id/${svc}`, { order_details: { order_value: 100 } });
  await s.t.runJobs(); // 503: its retry waits about 30 s (brought forward below), in the newer row's queue
  const waiting = await jobOf(s, moved.id);
  assert.equal(waiting?.queue_name, `order:${loser}`);
  assert.ok(waiting.run_at.getTime() > Date.now() + 500, "the retry is still to come");
  // As a worker that fetched the job into its local queue, or is running it, holds it.
  if (held) await s.t.database.sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = ${HOLDER} where key = ${`command:${moved.id}`}`;

  await callback(s, { sfx_order_id: svc, client_order_id: coid, order_status: "ALLOTTED" });
  await s.t.runJobs();
  const merged = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
  assert.equal(merged.svc_order_id, svc);
  assert.equal(await idOf("client_order_id", coid), survivor);
  return { coid, svc, survivor, loser, moved };
}

/**
 * The survivor's own edit, accepted after the moved one, and a real worker: both edits take
 * a while at the provider. Checks that no two jobs of the two commands were held at once
 * (sampled until both ended) and that they took effect in the order accepted.
 */
async function runBothWithAWorker(s: Stack, coid: string, svc: string, moved: Command, oneQueue = true): Promise<void> {
  // Its retry due now: the long backoff only kept it from coming due before the merge on a
  // loaded machine.
  await s.t.database.sql`update graphile_worker._private_jobs set run_at = now() where key = ${`command:${moved.id}`}`;
  const later = await accept(s, `/v1/orders/${coid}`, { order_details: { order_value: 200 } });
  await s.pair.control.addFault({ method: "PUT", path: "/api/v1/stores/edit-order/", times: 2, action: "delay", delay_ms: 1500 });
  const t = s.t;
  const runner = await startWorker({ config: t.config, databaseUrl: t.testDb.url, sql: t.database.sql, log: t.log, metrics: t.metrics, provider: s.pair.client });
  try {
    let most = 0;
    const deadline = Date.now() + 20_000;
    for (;;) {
      const [held] = await t.database.sql<{ n: number }[]>`
        select count(*)::int as n from graphile_worker._private_jobs
        where locked_at is not null and payload->>'command_id' in (${String(moved.id)}, ${String(later.id)})`;
      most = Math.max(most, held!.n);
      const states = await t.database.sql<{ state: string }[]>`select state from commands where id in (${moved.id}, ${later.id})`;
      if (states.every((c) => c.state !== "pending")) break;
      assert.ok(Date.now() < deadline, "the edits did not end");
      await new Promise((r) => setTimeout(r, 10));
    }
    // A held job's hand-over is a short run in the old queue, beside whatever the survivor's
    // queue runs: counted here, though it sends nothing (the order of the sends is checked below).
    if (oneQueue) assert.equal(most, 1, "never two commands of the order at once");
  } finally {
    await runner.stop();
  }
  const edits = (await s.pair.control.requests()).filter((r) => r.path === "/api/v1/stores/edit-order/");
  assert.deepEqual(edits.map((r) => r.status), [503, 200, 200]);
  // At the provider, one after the other: the second began after the first was answered.
  const [first, second] = edits.slice(1).map((r) => ({ from: Date.parse(r.at), ms: r.duration_ms }));
  assert.ok(second!.from >= first!.from + first!.ms - 2, `the edits overlapped at the provider: ${JSON.stringify(edits)}`);
  assert.equal(s.pair.emulator.state.orders.get(svc)!.body.order_details.order_value, 200, "the later edit is the one the provider keeps");
  const commands = await t.database.sql<{ state: string; completed_at: Date }[]>`
    select state, completed_at from commands where id in (${moved.id}, ${later.id}) order by id`;
  assert.deepEqual(commands.map((c) => c.state), ["succeeded", "succeeded"]);
  assert.ok(commands[0]!.completed_at < commands[1]!.completed_at, "in the order accepted");
}

describe("commands of rows that merge", () => {
  it("a moved command's waiting job joins the survivor's queue: a real worker runs the order's edits one at a time, in the order accepted", async () => {
    const s = await startStack({ COMMAND_RETRY_BASE_MS: "30000", WORKER_CONCURRENCY: "4" });
    try {
      const { coid, svc, survivor, moved } = await mergedWithWaitingEdit(s);
      const waiting = await jobOf(s, moved.id);
      assert.equal(waiting?.queue_name, `order:${survivor}`, "the moved edit's job is in the survivor's queue");
      assert.equal(waiting.locked_at, null);
      await runBothWithAWorker(s, coid, svc, moved);
    } finally {
      await s.close();
    }
  });

  it("a job a worker held during the merge is left to it, and hands itself over to the survivor's queue when it runs", async () => {
    const s = await startStack({ COMMAND_RETRY_BASE_MS: "30000", WORKER_CONCURRENCY: "4" });
    try {
      const { coid, svc, loser, moved } = await mergedWithWaitingEdit(s, true);
      const held = await jobOf(s, moved.id);
      assert.equal(held?.queue_name, `order:${loser}`, "a held job is not touched: its key, lock and queue stay");
      assert.notEqual(held.locked_at, null);
      // Its worker lets go of it (as one that stops, or the supervisor for one that died).
      await s.t.database.sql`select graphile_worker.force_unlock_workers(array[${HOLDER}])`;
      await runBothWithAWorker(s, coid, svc, moved, false);
      assert.ok(s.t.logLines.some((l) => l.includes("handed over to that order's queue") && l.includes(`"commandId":${moved.id}`)));
    } finally {
      await s.close();
    }
  });
});
