/**
 * GET /v1/notifications/messages?order= (notify/deliveries.ts listDeliveries): an order's
 * messages by either of its ids, found through the order's row and the messages' index on
 * order_id, not by reading every message. notification_messages has no index on its
 * copies of the order's ids (each index costs every message in the projection's
 * transaction), so the filter on them alone read the whole outbox, a month of messages,
 * for each call.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { listDeliveries } from "../../src/notify/deliveries.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";
import type { SentStatement } from "../helpers/plans.ts";

let db: TestDatabase;
let sql: ReturnType<typeof driverSql>;
/** The statements the pool sent, with their parameters. */
const sent: SentStatement[] = [];
before(async () => {
  db = await createTestDatabase();
  sql = driverSql(db.url, { max: 1, debug: (_c, query, parameters) => sent.push({ query, parameters: parameters as unknown[] }) });
  await sql`insert into notification_endpoints (id, url, secret) values ('ep_dbo', 'http://127.0.0.1:9/hook', 'whsec_x')`;
  // DBO-1: a provider order DBO-S1, and a second one DBO-S2 (a merged row's, its messages moved here).
  const [order] = await sql<{ id: number }[]>`
    insert into orders (client_order_id, svc_order_id, svc_order_ids) values ('DBO-1', 'DBO-S1', '{DBO-S1,DBO-S2}') returning id`;
  const [other] = await sql<{ id: number }[]>`insert into orders (client_order_id, svc_order_id) values ('DBO-2', 'DBO-S3') returning id`;
  const messages: [string, number, string | null, string | null][] = [
    ["msg_dbo_1", order!.id, "DBO-1", null],
    ["msg_dbo_2", order!.id, "DBO-1", "DBO-S1"],
    ["msg_dbo_3", order!.id, null, "DBO-S2"],
    ["msg_dbo_4", other!.id, "DBO-2", "DBO-S3"],
  ];
  for (const [id, orderId, coid, svc] of messages) {
    await sql`insert into notification_messages (id, type, order_id, client_order_id, svc_order_id, sequence, body)
              values (${id}, 'order.status_changed', ${orderId}, ${coid}, ${svc}, 1, '{}')`;
    await sql`insert into notification_deliveries (message_id, endpoint_id, status) values (${id}, 'ep_dbo', 'delivered')`;
  }
  // awb.pool_low: no order.
  await sql`insert into notification_messages (id, type, body) values ('msg_dbo_5', 'awb.pool_low', '{}')`;
  await sql`insert into notification_deliveries (message_id, endpoint_id) values ('msg_dbo_5', 'ep_dbo')`;
});
after(async () => {
  await sql.end();
  await db.drop();
});

const ids = async (order: string) => (await listDeliveries(sql, { order, limit: 50 })).rows.map((r) => r.message_id);

describe("an order's notification deliveries", () => {
  it("are found by the merchant's id, the provider's, or a second provider id, newest first, and no other order's", async () => {
    assert.deepEqual(await ids("DBO-1"), ["msg_dbo_2", "msg_dbo_1"]);
    assert.deepEqual(await ids("DBO-S1"), ["msg_dbo_2"]);
    assert.deepEqual(await ids("DBO-S2"), ["msg_dbo_3"]);
    assert.deepEqual(await ids("DBO-S3"), ["msg_dbo_4"]);
    assert.deepEqual(await ids("DBO-9"), []);
    const page = await listDeliveries(sql, { order: "DBO-1", limit: 1 });
    assert.deepEqual([page.rows.map((r) => r.message_id), (await listDeliveries(sql, { order: "DBO-1", limit: 1, beforeId: page.nextId! })).rows.map((r) => r.message_id)], [["msg_dbo_2"], ["msg_dbo_1"]]);
  });

  it("read the order's messages through an index, not the whole outbox", async () => {
    sent.length = 0;
    await listDeliveries(sql, { order: "DBO-1", limit: 50 });
    const statement = sent.find((s) => s.query.includes("from notification_deliveries d join notification_messages m"));
    assert.ok(statement, "the list's statement was sent");
    const plan = await sql.begin(async (tx) => {
      // As on a large table: a sequential scan only where no index serves.
      await tx`set local enable_seqscan = off`;
      const rows = await tx.unsafe<{ "QUERY PLAN": string }[]>(`explain ${statement.query}`, statement.parameters as never[]);
      return rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    assert.doesNotMatch(plan, /Seq Scan on notification_messages/, plan);
    assert.match(plan, /notification_messages_order_sequence_idx/, plan);
  });
});
