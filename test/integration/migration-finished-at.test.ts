/**
 * Migration 0017 (orders.finished_at) on a database of the release before, as a deploy
 * runs it: orders redacted before the provider's answers were, whose answers hold the
 * customer's details, are due again at once (not PII_RETENTION_DAYS after that earlier
 * redaction, which is when their row last changed); orders already redacted are not
 * rewritten (a year of them would be, under the lock ADD COLUMN holds on orders for the
 * whole migration); finished orders not yet redacted get their finished_at from their
 * row's last change, filled in by the daily redaction, and are due from then.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { runMigrations } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/ready.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

let t: TestApp;
let emulator: EmulatorPair;
before(async () => {
  emulator = await startEmulatorPair();
  t = await createTestApp({}, { provider: emulator.client });
});
after(async () => {
  await t.close();
  await emulator.close();
});

const TERMINAL = `('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')`;

async function delivered(coid: string, answer: "echo" | "spec"): Promise<void> {
  assert.equal((await emulator.control.send("PUT", "/behaviour", { place_answer: answer })).status, 200);
  assert.equal((await t.request("/v1/orders", { method: "POST", json: placeOrderBody({ clientOrderId: coid }) })).status, 202);
  await t.runJobs();
  const [row] = await t.database.sql<{ svc_order_id: string }[]>`select svc_order_id from orders where client_order_id = ${coid}`;
  assert.equal((await t.callback({ client_order_id: coid, svc_order_id: row!.svc_order_id, order_status: "DELIVERED", timestamp: new Date().toISOString() })).status, 200);
  await t.runJobs();
}

interface Row {
  client_order_id: string;
  finished_at: Date | null;
  redacted_at: Date | null;
  xmin: string;
}

const rows = async () =>
  new Map(
    (await t.database.sql<Row[]>`select client_order_id, finished_at, redacted_at, xmin::text as xmin from orders order by id`).map((r) => [r.client_order_id, r]),
  );

it("0017: an order redacted before its answers were is due at once; other redacted orders are not rewritten; finished ones count from their last change", async () => {
  const sql = t.database.sql;
  // ECHOED: redacted 10 days ago by the release before, which left the echo of the customer
  // in its place answer; it finished 120 days ago. QUIET: redacted too, its answer holds no
  // customer. OLD and RECENT: finished, not redacted, last changed 100 and 10 days ago.
  await delivered("MIG-ECHOED", "echo");
  await delivered("MIG-QUIET", "spec");
  await delivered("MIG-OLD", "spec");
  await delivered("MIG-RECENT", "spec");
  await sql`update orders set status_at = now() - interval '120 days', updated_at = now() - interval '10 days', redacted_at = now() - interval '10 days'
            where client_order_id in ('MIG-ECHOED', 'MIG-QUIET')`;
  await sql`update orders set status_at = now() - interval '100 days', updated_at = now() - interval '100 days' where client_order_id = 'MIG-OLD'`;
  await sql`update orders set status_at = now() - interval '10 days', updated_at = now() - interval '10 days' where client_order_id = 'MIG-RECENT'`;

  // The schema as the release before left it: no finished_at, the index on status_at.
  await sql`drop index orders_pii_due_idx`;
  await sql`alter table orders drop column finished_at`;
  await sql.unsafe(`create index orders_pii_due_idx on orders using btree (status_at) where redacted_at is null and status in ${TERMINAL}`);
  // Nor what the migrations after 0017 added (0018's check): they are pending too.
  await sql`alter table awb_numbers drop constraint awb_numbers_order_allocated`;
  await sql`delete from drizzle.__drizzle_migrations where created_at >= ${MIGRATIONS.find((m) => m.tag === "0017_finished_at")!.when}`;
  const [quiet] = await sql<{ xmin: string }[]>`select xmin::text as xmin from orders where client_order_id = 'MIG-QUIET'`;
  const xminBefore = quiet!.xmin;

  await runMigrations(t.testDb.url, t.log);

  const migrated = await rows();
  assert.equal(migrated.get("MIG-ECHOED")!.redacted_at, null, "due again: its answer holds the customer's details");
  assert.ok(migrated.get("MIG-QUIET")!.redacted_at !== null);
  assert.equal(migrated.get("MIG-QUIET")!.xmin, xminBefore, "an order already redacted is not rewritten");

  // The next daily run takes the echoed order now (it finished 120 days ago), and the one
  // whose row last changed 100 days ago; not the one of 10 days ago.
  const result = await redactDue(sql, 90);
  assert.deepEqual(result.failed, []);
  assert.equal(result.orders, 2);
  const after = await rows();
  assert.ok(after.get("MIG-ECHOED")!.redacted_at !== null, "the echoed order is redacted again");
  assert.ok(after.get("MIG-OLD")!.redacted_at !== null);
  assert.equal(after.get("MIG-RECENT")!.redacted_at, null);
  const recent = after.get("MIG-RECENT")!.finished_at;
  assert.ok(recent !== null && Math.abs(recent.getTime() - (Date.now() - 10 * 86_400_000)) < 60_000, `finished_at from its last change: ${String(recent)}`);
  const [echo] = await sql<{ response: unknown }[]>`
    select c.response from commands c join orders o on o.id = c.order_id where o.client_order_id = 'MIG-ECHOED' and c.kind = 'place'`;
  assert.doesNotMatch(JSON.stringify(echo!.response), /Asha Rao/);
});
