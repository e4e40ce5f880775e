import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createDatabase, driverSql } from "../../src/db/client.ts";
import { freePort } from "../helpers/ports.ts";
import { createApp } from "../../src/http/app.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import { createIngestor } from "../../src/ingest/batcher.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { serverUrl } from "../helpers/db.ts";

// An app whose database is a port nobody listens on.
let app: ReturnType<typeof createApp>;
let close: () => Promise<void>;
before(async () => {
  const port = await freePort();
  const database = createDatabase(`postgres://postgres@127.0.0.1:${port}/nothing`, { max: 2 });
  const log = createLogger({ level: "silent" });
  const metrics = createMetrics();
  const ingestor = createIngestor(database.sql, { batchMax: 64, batchWaitMs: 0, maxInFlight: 2, maxPending: 1000, maxPendingBytes: 1 << 20 }, log, metrics);
  const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-unavailable-")), API_TOKEN, CALLBACK_SECRET });
  app = createApp({ config, sql: database.sql, readSql: database.readSql, ingestor, log, metrics });
  close = async () => {
    await ingestor.close();
    await database.close();
  };
});
after(async () => close());

describe("database unavailable", () => {
  it("callbacks get 503 with Retry-After (so the sender retries), never a 200", async () => {
    const res = await app.request(`/callbacks/${CALLBACK_SECRET}`, { method: "POST", body: JSON.stringify({ client_order_id: "X", order_status: "DELIVERED" }) });
    assert.equal(res.status, 503);
    assert.equal(res.headers.get("retry-after"), "1");
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "database_unavailable");
  });

  it("a callback that is not JSON gets 503 too, not a 400 without its rejected-callback record", async () => {
    for (const body of ["{not json", JSON.stringify({ order_status: "DELIVERED" })]) {
      const res = await app.request(`/callbacks/${CALLBACK_SECRET}`, { method: "POST", body });
      assert.equal(res.status, 503, body);
      assert.equal(res.headers.get("retry-after"), "1");
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "database_unavailable");
    }
    // Counted as what they got: unavailable, not rejected.
    const metrics = await (await app.request("/metrics")).text();
    assert.doesNotMatch(metrics, /tracklane_callbacks_total\{result="rejected_/);
    assert.match(metrics, /tracklane_callbacks_total\{result="unavailable"\} 3/);
  });

  it("reads get 503, and /readyz says not ready while /healthz is up", async () => {
    const res = await app.request("/v1/orders/X", { headers: { authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(res.status, 503);
    assert.equal((await app.request("/readyz")).status, 503);
    assert.equal((await app.request("/healthz")).status, 200);
  });
});

// A statement the database could not complete right now (a deadlock, a lock or statement
// timeout, a failover to a standby, a full disk): its transaction is rolled back and the
// same request may succeed when sent again. Real PostgreSQL raises the error, from a
// trigger that fails the events whose body asks for it.
describe("a statement the database could not complete", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp({ INGEST_BATCH_WAIT_MS: "100" }); // callbacks sent together share a batch
    await t.database.sql.unsafe(`
      create function test_raise_sqlstate() returns trigger language plpgsql as $$
      begin
        if new.payload ? 'test_sqlstate' then raise exception 'refused for the test' using errcode = new.payload->>'test_sqlstate'; end if;
        return new;
      end $$;
      create trigger test_raise_sqlstate before insert on order_events for each row execute function test_raise_sqlstate();`);
  });
  after(async () => t.close());

  const stored = async (clientOrderId: string) => {
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = ${clientOrderId}`;
    return row!.n;
  };

  for (const [sqlstate, named] of [
    ["40P01", "deadlock"],
    ["57014", "cancelled statement"],
    ["55P03", "lock that was not available"],
    ["53100", "full disk"],
    ["53200", "lack of memory"],
    ["25006", "read-only database"],
  ] as const) {
    it(`a callback that meets ${sqlstate} (${named}) gets 503 with Retry-After, and nothing is stored`, async () => {
      const body = { client_order_id: `BUSY-${sqlstate}`, order_status: "DELIVERED", test_sqlstate: sqlstate };
      const res = await t.callback(body);
      assert.equal(res.status, 503);
      assert.equal(res.headers.get("retry-after"), "1");
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(error.code, "database_unavailable");
      assert.match(error.message, new RegExp(`${named}.*SQLSTATE ${sqlstate}`));
      assert.equal(await stored(body.client_order_id), 0);
    });
  }

  it("a batch-mate of a refused callback is stored, and the refused one is stored once sent again", async () => {
    const refused = { client_order_id: "BUSY-MATE-1", order_status: "DELIVERED", test_sqlstate: "40P01" };
    const fine = { client_order_id: "BUSY-MATE-2", order_status: "DELIVERED" };
    const split = () => t.logLines.filter((l) => l.includes("retrying events one by one")).length;
    const splitBefore = split();
    const [a, b] = await Promise.all([t.callback(refused), t.callback(fine)]);
    assert.equal(a.status, 503);
    assert.equal(b.status, 200);
    assert.equal(split(), splitBefore + 1, "the two shared a batch, which failed and was retried one by one");
    assert.equal(await stored("BUSY-MATE-2"), 1);
    await t.database.sql`drop trigger test_raise_sqlstate on order_events`;
    const again = await t.callback(refused);
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { duplicate: boolean }).duplicate, false);
    assert.equal(await stored("BUSY-MATE-1"), 1);
  });

  it("a server that turned read-only (a failover reached a standby, default_transaction_read_only): callbacks get 503 and nothing is stored; once writable, they are stored", async () => {
    await t.database.sql`drop trigger if exists test_raise_sqlstate on order_events`;
    // Set from outside, then every session of the pool starts again on the database as it is now.
    const readOnly = async (on: boolean) => {
      const admin = driverSql(serverUrl("postgres"), { max: 1 });
      try {
        await admin.unsafe(`alter database ${t.testDb.name} ${on ? "set default_transaction_read_only = on" : "reset default_transaction_read_only"}`);
        await admin`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${t.testDb.name}`;
      } finally {
        await admin.end();
      }
    };
    await readOnly(true);
    try {
      // The first ones may meet a session the termination closed (503 as well).
      const messages: string[] = [];
      for (let i = 0; i < 10; i++) {
        const res = await t.callback({ client_order_id: "READ-ONLY-1", order_status: "DELIVERED" });
        assert.equal(res.status, 503);
        assert.equal(res.headers.get("retry-after"), "1");
        const { error } = (await res.json()) as { error: { code: string; message: string } };
        assert.equal(error.code, "database_unavailable");
        messages.push(error.message);
      }
      assert.ok(messages.some((m) => /read-only database .*SQLSTATE 25006/.test(m)), messages.join("\n"));
      const bad = await t.callback({ order_status: "DELIVERED" }); // its rejected-callback record cannot be kept either
      assert.equal(bad.status, 503);
    } finally {
      await readOnly(false);
    }
    // As the sender retries: sessions the termination closed answer 503 first.
    let again = 0;
    for (let i = 0; i < 20 && again !== 200; i++) again = (await t.callback({ client_order_id: "READ-ONLY-1", order_status: "DELIVERED" })).status;
    assert.equal(again, 200);
    assert.equal(await stored("READ-ONLY-1"), 1, "stored once: none of the refused ones was kept");
  });

  // 54000 (program_limit_exceeded: an index row or an array too large, a statement too
  // complex) fails the same statement the same way every time: a 503 would have the sender
  // retry for ever.
  for (const sqlstate of ["XX000", "53400", "54000"]) {
    it(`an error that no retry can fix (${sqlstate}) stays a 500 (internal_error), and nothing is stored`, async () => {
      await t.database.sql.unsafe(`create or replace trigger test_raise_sqlstate before insert on order_events for each row execute function test_raise_sqlstate()`);
      const body = { client_order_id: `BUSY-${sqlstate}`, order_status: "DELIVERED", test_sqlstate: sqlstate };
      const res = await t.callback(body);
      assert.equal(res.status, 500);
      assert.equal(res.headers.get("retry-after"), null);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "internal_error");
      assert.equal(await stored(body.client_order_id), 0);
    });
  }
});
