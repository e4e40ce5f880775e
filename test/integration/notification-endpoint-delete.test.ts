/**
 * An endpoint deleted while a change writes its messages, or while a delivery run records
 * what it sent: the delete's cascade holds the endpoint (and its deliveries) until it
 * commits, and the write then leaves them out; it never meets the foreign key and fails
 * the change it belongs to (a POST /v1/orders answered 500, a projection batch, a
 * command's run).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { claimDue, recordAttempts } from "../../src/notify/deliveries.ts";
import { createEndpoint } from "../../src/notify/endpoints.ts";
import { recordMessage } from "../../src/notify/outbox.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
let deleter: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 3 });
  deleter = driverSql(testDb.url, { max: 1 });
});
after(async () => {
  await Promise.all([sql.end(), deleter.end()]);
  await testDb.drop();
});

const endpoint = () => createEndpoint(sql, { url: "http://127.0.0.1:9/hook", events: [], description: null });

/** Deletes the endpoint in a transaction held open until `commit()`; `started` resolves once the delete ran. */
function heldDelete(id: string) {
  let commit!: () => void;
  const go = new Promise<void>((resolve) => (commit = resolve));
  let started!: () => void;
  const ran = new Promise<void>((resolve) => (started = resolve));
  const done = deleter.begin(async (tx) => {
    await tx`delete from notification_endpoints where id = ${id}`;
    started();
    await go;
  });
  return { ran, commit, done };
}

const waitingOnLock = async () => {
  for (let i = 0; i < 200; i++) {
    const [row] = await sql<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`;
    if (row!.n > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail("the write never waited for the delete");
};

describe("an endpoint deleted while messages are written or attempts recorded", () => {
  it("a message written meanwhile gets deliveries for the other endpoints only, and its change commits", async () => {
    const kept = await endpoint();
    const gone = await endpoint();
    const del = heldDelete(gone.id);
    await del.ran;
    try {
      const writing = sql.begin((tx) => recordMessage(tx, { type: "awb.pool_low", data: { pool: { available: 1, low_watermark: 5 } } }));
      await waitingOnLock();
      del.commit();
      const id = await writing;
      assert.ok(id !== null);
      const deliveries = await sql<{ endpoint_id: string }[]>`select endpoint_id from notification_deliveries where message_id = ${id}`;
      assert.deepEqual(deliveries.map((d) => d.endpoint_id), [kept.id]);
    } finally {
      del.commit();
      await del.done;
    }
  });

  it("a round's attempts recorded meanwhile are dropped with their deliveries, and the write succeeds", async () => {
    const gone = await endpoint();
    const id = await sql.begin((tx) => recordMessage(tx, { type: "test.ping", data: {}, endpointId: gone.id }));
    assert.ok(id !== null);
    const [claimed] = await claimDue(sql, gone.id, 10, 60_000);
    assert.ok(claimed);
    const del = heldDelete(gone.id);
    await del.ran;
    try {
      const recording = recordAttempts(sql, [
        { deliveryId: claimed.id, lease: claimed.lease, at: new Date(), statusCode: 500, durationMs: 3, responseExcerpt: "down", error: "HTTP 500", next: { state: "pending", retryInS: 5 } },
      ]);
      await waitingOnLock();
      del.commit();
      assert.deepEqual(await recording, []);
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from notification_attempts`;
      assert.equal(row!.n, 0);
    } finally {
      del.commit();
      await del.done;
    }
  });
});
