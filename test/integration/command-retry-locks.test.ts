/**
 * A place retried by hand (retryCommand), or ended by the stranded sweep (abandonStranded),
 * locks its order before its command, as the projection does when a callback names the
 * order (lockOrdersOf, then succeedFailedPlaces or a merge's moveCommands): one that locked
 * the command first, then waited for the order, deadlocked with a projection holding the
 * order and coming for the command.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { abandonStranded } from "../../src/commands/execute.ts";
import { retryCommand } from "../../src/commands/service.ts";
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

it("a retried place waits for the order's lock without holding its command's: no deadlock with a projection", async () => {
  const sql = t.database.sql;
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  await t.runJobs(); // no provider configured: the place ends failed, retryable
  const [place] = await sql<{ id: number; order_id: number; state: string }[]>`
    select c.id::int, c.order_id::int, c.state from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
  assert.equal(place!.state, "failed");

  const other = driverSql(t.testDb.url, { max: 1 });
  let retry: Promise<number | Error> | undefined;
  try {
    await other.begin(async (tx) => {
      // As the projection: the order first ...
      await tx`select id from orders where id = ${place!.order_id} for update`;
      retry = retryCommand(sql, place!.id, { dedupesOrders: false }).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
      // ... the retry is now waiting for a lock (else the race below is not what is tested) ...
      assert.ok(await someoneWaits(tx as never), "the retry waits for the order's lock");
      // ... then the command (a deadlock, PostgreSQL ends one of the two, if the retry held it).
      await tx`set local lock_timeout = '5s'`;
      await tx`update commands set updated_at = now() where id = ${place!.id}`;
    });
  } finally {
    await other.end();
  }
  const result = await retry!;
  assert.equal(result, place!.id, result instanceof Error ? result.message : "");
  const [row] = await sql<{ state: string }[]>`select state from commands where id = ${place!.id}`;
  assert.equal(row!.state, "pending", "sent again");
});

/** Whether some session of this database came to wait for a lock within `ms` (a loaded machine may take seconds). */
async function someoneWaits(tx: { <T>(q: TemplateStringsArray, ...v: unknown[]): Promise<T> }, ms = 15_000): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; ) {
    const [w] = await tx<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (w!.n > 0) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

it("the stranded sweep leaves a command whose order another transaction holds for its next round: no deadlock with a projection", async () => {
  const sql = t.database.sql;
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  const [place] = await sql<{ id: number; order_id: number }[]>`
    select c.id::int, c.order_id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid}`;
  // Stranded: pending, its job gone, unchanged for longer than the grace.
  await sql`delete from graphile_worker._private_jobs where key = ${`command:${place!.id}`}`;
  await sql`update commands set updated_at = now() - interval '10 minutes' where id = ${place!.id}`;

  const deps = { sql, log: t.log };
  const other = driverSql(t.testDb.url, { max: 1 });
  let sweep: Promise<number | Error> | undefined;
  try {
    await other.begin(async (tx) => {
      await tx`select id from orders where id = ${place!.order_id} for update`;
      sweep = abandonStranded(deps).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
      await Promise.race([sweep, someoneWaits(tx as never)]);
      await tx`set local lock_timeout = '5s'`;
      await tx`update commands set updated_at = now() - interval '10 minutes' where id = ${place!.id}`;
    });
  } finally {
    await other.end();
  }
  const first = await sweep!;
  assert.equal(first, 0, first instanceof Error ? first.message : "left for the next round");
  assert.equal(await abandonStranded(deps), 1, "ended once the order is free");
  const [row] = await sql<{ state: string }[]>`select state from commands where id = ${place!.id}`;
  assert.equal(row!.state, "failed");
});
