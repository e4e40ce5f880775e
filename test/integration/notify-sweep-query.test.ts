/**
 * The notify__sweep's question, every minute (notify/deliveries.ts endpointsWithDue):
 * which endpoints have a delivery due that no run holds. An endpoint down for a day holds
 * every message of that day pending; the answer needs one due delivery per endpoint, not
 * all of them: read through all pending deliveries, each sweep read the whole backlog
 * (600 ms with 400,000 pending), and it grew with the outage it was there to recover from.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { endpointsWithDue } from "../../src/notify/deliveries.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";
import { rowsRead } from "../helpers/plans.ts";
import type { PlanNode, SentStatement } from "../helpers/plans.ts";

let db: TestDatabase;
let sql: ReturnType<typeof driverSql>;
const sent: SentStatement[] = [];
before(async () => {
  db = await createTestDatabase();
  sql = driverSql(db.url, { max: 1, debug: (_c, query, parameters) => sent.push({ query, parameters: parameters as unknown[] }) });
  await sql`insert into notification_endpoints (id, url, secret) select 'ep_sw' || g, 'http://127.0.0.1:9/' || g, 'whsec_x' from generate_series(1, 4) g`;
  await sql`insert into notification_messages (id, type, body) select 'msg_sw_' || g, 'test.ping', '{}' from generate_series(1, 3000) g`;
  // ep_sw1 down: 3,000 due. ep_sw2: one due, held by a run (leased), one due free. ep_sw3: one not due yet. ep_sw4: none.
  await sql`insert into notification_deliveries (message_id, endpoint_id, next_attempt_at) select 'msg_sw_' || g, 'ep_sw1', now() - interval '1 minute' from generate_series(1, 3000) g`;
  await sql`insert into notification_deliveries (message_id, endpoint_id, next_attempt_at, leased_until) values
              ('msg_sw_1', 'ep_sw2', now() - interval '2 minutes', now() + interval '1 minute'), ('msg_sw_2', 'ep_sw2', now() - interval '1 minute', null),
              ('msg_sw_1', 'ep_sw3', now() + interval '1 hour', null)`;
  await sql`insert into notification_deliveries (message_id, endpoint_id, status) values ('msg_sw_1', 'ep_sw4', 'delivered')`;
  await sql`vacuum analyze notification_deliveries`;
});
after(async () => {
  await sql.end();
  await db.drop();
});

describe("endpoints with deliveries due", () => {
  it("are those with a due delivery no run holds, whatever else they have", async () => {
    assert.deepEqual((await endpointsWithDue(sql)).sort(), ["ep_sw1", "ep_sw2"]);
    await sql`update notification_deliveries set leased_until = now() + interval '1 minute' where endpoint_id = 'ep_sw2'`;
    assert.deepEqual(await endpointsWithDue(sql), ["ep_sw1"]);
    await sql`update notification_deliveries set leased_until = null where endpoint_id = 'ep_sw2' and message_id = 'msg_sw_2'`;
  });

  it("are found reading a few deliveries per endpoint, not an endpoint's whole backlog", async () => {
    sent.length = 0;
    await endpointsWithDue(sql);
    const statement = sent.find((s) => s.query.includes("notification_deliveries"));
    assert.ok(statement);
    const [row] = await sql.unsafe<{ "QUERY PLAN": { Plan: PlanNode }[] }[]>(`explain (analyze, format json) ${statement.query}`, statement.parameters as never[]);
    const read = rowsRead(row!["QUERY PLAN"][0]!.Plan, "notification_deliveries");
    assert.ok(read <= 10, `read ${read} deliveries for 4 endpoints (3,003 due)`);
  });
});
