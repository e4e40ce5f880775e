/**
 * A command other than a place ends once: two runs of it ending at once (a job unlocked
 * under a runner that still runs it) record one end, send one command.failed and count one
 * in tracklane_commands_total; the second run records nothing and the first end stands.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { executeCommand } from "../../src/commands/execute.ts";
import { driverSql } from "../../src/db/client.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

/** Waits (up to 4 s) until `n` sessions of this database wait for a lock. */
async function waiting(n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const [w] = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (w!.n >= n) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`${n} sessions never waited for a lock`);
}

it("two runs of an edit ending at once: one end recorded, one command.failed, counted once", async () => {
  const sql = t.database.sql;
  // Subscribed to command.failed (its deliveries never run here: no job runs).
  await sql`
    insert into notification_endpoints (id, url, events, secret)
    values ('ep_ONCE', 'https://hooks.example.com/x', '{command.failed}', 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3')`;
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  const edit = await t.request(`/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 300 } } });
  assert.equal(edit.status, 202, await edit.clone().text());
  const commands = await sql<{ id: number; kind: string }[]>`
    select c.id::int, c.kind from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid} order by c.id`;
  const editId = commands.find((c) => c.kind === "edit")!.id;
  // The place ended (so the edit is not held behind it); no provider is configured, so a
  // run of the edit ends it failed without a call.
  await sql`update commands set state = 'failed', completed_at = now() where kind = 'place' and id = ${commands.find((c) => c.kind === "place")!.id}`;

  const deps = { sql, provider: undefined, log: t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false, metrics: t.metrics };
  const other = driverSql(t.testDb.url, { max: 1 });
  let runs: Promise<void[]> | undefined;
  try {
    await other.begin(async (tx) => {
      // Both runs read the edit pending, then wait for its row to record their end.
      await tx`select id from commands where id = ${editId} for update`;
      runs = Promise.all([executeCommand(deps, editId), executeCommand(deps, editId)]);
      await waiting(2);
    });
  } finally {
    await other.end();
  }
  await runs!;

  const [row] = await sql<{ state: string; last_error: string }[]>`select state, last_error from commands where id = ${editId}`;
  assert.deepEqual([row!.state, row!.last_error], ["failed", "no provider configured (PROVIDER_BASE_URL)"]);
  const [failed] = await sql<{ n: number }[]>`
    select count(*)::int as n from notification_messages where type = 'command.failed' and client_order_id = ${coid}`;
  assert.equal(failed!.n, 1, "one command.failed");
  const counted = (await t.metrics.commands.get()).values.filter((v) => v.labels["kind"] === "edit" && v.labels["outcome"] === "failed");
  assert.deepEqual(
    counted.map((v) => v.value),
    [1],
    "counted once",
  );
});
