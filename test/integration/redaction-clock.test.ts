/**
 * PII_RETENTION_DAYS counts from when tracklane recorded that an order finished (its own
 * clock, orders.finished_at), not from the terminal event's time, which the provider
 * supplies (docs/operations.md, "Personal data"): a provider clock far behind, or a late
 * callback, does not make the redaction early; one far ahead does not put it off for ever.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { rebuild } from "../../src/projection/rebuild.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const DAY = 86_400_000;

/** An order the provider says it delivered at `at` (its clock), told to tracklane now. */
async function deliveredAt(coid: string, svc: string, at: string): Promise<void> {
  const rider = { rider_id: "R-9", rider_name: "Ravi Kumar", rider_contact: "9812345678" };
  assert.equal((await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "ALLOTTED", timestamp: at, ...rider })).status, 200);
  assert.equal((await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "DELIVERED", timestamp: at, ...rider })).status, 200);
  await t.runJobs();
}

const finishedAt = async (coid: string) =>
  (await t.database.sql<{ finished_at: Date | null; status_at: Date | null }[]>`select finished_at, status_at from orders where client_order_id = ${coid}`)[0]!;

const riderName = async (coid: string) =>
  (await t.database.sql<{ rider_name: string | null }[]>`select rider_name from orders where client_order_id = ${coid}`)[0]!.rider_name;

describe("the personal data's retention counts from tracklane's clock", () => {
  it("a provider clock far behind (or a late callback) does not make it early; one far ahead does not make it never", async () => {
    const start = Date.now();
    await deliveredAt("CLOCK-BEHIND", "6600001", "2020-01-01T10:00:00Z");
    await deliveredAt("CLOCK-AHEAD", "6600002", "2099-01-01T10:00:00Z");
    for (const coid of ["CLOCK-BEHIND", "CLOCK-AHEAD"]) {
      const row = await finishedAt(coid);
      assert.ok(row.finished_at !== null && Math.abs(row.finished_at.getTime() - start) < 60_000, `${coid}: finished_at is when tracklane saw it, ${String(row.finished_at)}`);
    }
    assert.equal((await finishedAt("CLOCK-BEHIND")).status_at?.toISOString(), "2020-01-01T10:00:00.000Z", "status_at stays the provider's time");

    // Today: the order the provider dated six years back is not due (its data came today).
    assert.deepEqual(await redactDue(t.database.sql, 90), { orders: 0, events: 0, commands: 0, failed: [] });
    assert.equal(await riderName("CLOCK-BEHIND"), "Ravi Kumar");

    // A later event, or a rebuild, leaves finished_at as it was.
    const before = (await finishedAt("CLOCK-BEHIND")).finished_at;
    assert.equal((await t.callback({ client_order_id: "CLOCK-BEHIND", svc_order_id: "6600001", rider_latitude: 12.9, rider_longitude: 77.6, timestamp: "2020-01-01T10:05:00Z" }, { path: `/callbacks/${CALLBACK_SECRET}/location` })).status, 200);
    await t.runJobs();
    await rebuild(t.database.sql);
    assert.deepEqual((await finishedAt("CLOCK-BEHIND")).finished_at, before);

    // 91 days on, both go, the one dated 2099 included.
    const result = await redactDue(t.database.sql, 90, new Date(start + 91 * DAY));
    assert.equal(result.orders, 2);
    assert.equal(await riderName("CLOCK-BEHIND"), "[redacted]");
    assert.equal(await riderName("CLOCK-AHEAD"), "[redacted]");
  });

  it("an order redacted before finished_at existed (migration 0017) that gets a late event is due again at once, not PII_RETENTION_DAYS later", async () => {
    const sql = t.database.sql;
    const finished = new Date(Date.now() - 120 * DAY).toISOString();
    await deliveredAt("LATE-OLD", "6600003", finished);
    await deliveredAt("LATE-NEW", "6600004", new Date().toISOString());
    // As the release before left LATE-OLD: redacted 30 days ago (by its provider time, 120
    // days ago), no finished_at; LATE-NEW as this release leaves an order it redacted.
    await redactDue(sql, 90, new Date(Date.now() + 91 * DAY));
    await sql`update orders set finished_at = null, redacted_at = now() - interval '30 days' where client_order_id = 'LATE-OLD'`;
    await sql`update orders set redacted_at = now() - interval '30 days' where client_order_id = 'LATE-NEW'`;
    const newFinished = (await finishedAt("LATE-NEW")).finished_at;

    // A late callback with the rider's details again, for each.
    for (const [coid, svc] of [["LATE-OLD", "6600003"], ["LATE-NEW", "6600004"]] as const) {
      assert.equal((await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "DELIVERED", timestamp: new Date().toISOString(), rider_id: "R-9", rider_name: "Ravi Kumar", rider_contact: "9812345678" })).status, 200);
    }
    await t.runJobs();
    assert.equal(await riderName("LATE-OLD"), "Ravi Kumar");
    const old = await finishedAt("LATE-OLD");
    assert.equal(old.finished_at?.toISOString(), finished, "it finished when the rule that redacted it said, no later than that redaction");
    assert.deepEqual((await finishedAt("LATE-NEW")).finished_at, newFinished, "an order with finished_at keeps it");

    // Today's run takes it at once; the order this release redacted counts from its finish.
    const result = await redactDue(sql, 90);
    assert.deepEqual([result.orders, result.failed], [1, []]);
    assert.equal(await riderName("LATE-OLD"), "[redacted]");
    assert.equal(await riderName("LATE-NEW"), "Ravi Kumar");
  });
});
