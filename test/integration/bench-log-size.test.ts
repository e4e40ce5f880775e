/**
 * bench/scale.ts records the event log's size per run (bench/lib/scratch.ts logSize) over a
 * driverSql connection, which reads a bigint as a string: its results said "events": "1057927".
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { logSize } from "../../bench/lib/scratch.ts";
import { driverSql } from "../../src/db/client.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

it("the log's events and bytes are numbers, as the results file's readers take them", async () => {
  assert.equal((await t.callback({ svc_order_id: "8850001", client_order_id: "BENCH-SIZE", order_status: "ALLOTTED" })).status, 200);
  const sql = driverSql(t.testDb.url, { max: 1 });
  try {
    const size = await logSize(sql);
    assert.equal(size.events, 1);
    assert.equal(typeof size.bytes, "number");
    assert.ok(size.bytes > 0);
  } finally {
    await sql.end();
  }
});
