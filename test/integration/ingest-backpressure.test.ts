/**
 * Backpressure (src/ingest/batcher.ts): while the database is slow the ingest buffer
 * fills, and beyond its limits (events, and body bytes) new callbacks are refused with
 * 503 `overloaded` and Retry-After: the sender retries, nothing is dropped, and every
 * accepted callback is stored once the database catches up.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createDatabase } from "../../src/db/client.ts";
import type { Database } from "../../src/db/client.ts";
import { driverSql } from "../../src/db/client.ts";
import { createApp } from "../../src/http/app.ts";
import { createIngestor } from "../../src/ingest/batcher.ts";
import type { BatcherOptions } from "../../src/ingest/batcher.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import { API_TOKEN, CALLBACK_SECRET } from "../helpers/app.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let database: Database;
before(async () => {
  testDb = await createTestDatabase();
  database = createDatabase(testDb.url, { max: 4 });
});
after(async () => {
  await database.close();
  await testDb.drop();
});

function appWith(limits: Pick<BatcherOptions, "maxPending" | "maxPendingBytes">) {
  const log = createLogger({ level: "silent" });
  const metrics = createMetrics();
  const ingestor = createIngestor(database.sql, { batchMax: 2, batchWaitMs: 0, maxInFlight: 1, ...limits }, log, metrics);
  const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-backpressure-")), DATABASE_URL: testDb.url, API_TOKEN, CALLBACK_SECRET });
  return { app: createApp({ config, sql: database.sql, readSql: database.readSql, ingestor, log, metrics }), ingestor };
}

/** Another session holds a lock that makes every insert into order_events wait. */
async function blockInserts() {
  const other = driverSql(testDb.url, { max: 1 });
  const reserved = await other.reserve();
  await reserved`begin`;
  await reserved`lock table order_events in share mode`;
  return async () => {
    await reserved`rollback`;
    reserved.release();
    await other.end();
  };
}

const callback = (coid: string, extra: Record<string, unknown> = {}) => ({ client_order_id: coid, order_status: "ALLOTTED", ...extra });

async function send(app: ReturnType<typeof createApp>, bodies: Record<string, unknown>[]) {
  return bodies.map((b) =>
    // With its Content-Length, as the provider sends it: a body without one is charged a
    // first 16 KiB while it is read, and more as it streams in (sendUndeclared).
    Promise.resolve(
      app.request(`/callbacks/${CALLBACK_SECRET}`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(JSON.stringify(b))) },
        body: JSON.stringify(b),
      }),
    ),
  );
}

/** Without a Content-Length, as a chunked sender's bodies come. */
function sendUndeclared(app: ReturnType<typeof createApp>, bodies: Record<string, unknown>[]) {
  return bodies.map((b) =>
    Promise.resolve(app.request(`/callbacks/${CALLBACK_SECRET}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(b) })),
  );
}

async function stored(prefix: string): Promise<number> {
  const [row] = await database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id like ${`${prefix}%`}`;
  return row!.n;
}

/** Waits until `n` of the responses have arrived (10 s at most); answers them. */
async function firstAnswers(responses: Promise<Response>[], n: number): Promise<Response[]> {
  const done: Response[] = [];
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${done.length} answers, expected ${n} while the inserts are blocked`)), 10_000);
    for (const r of responses) {
      void r.then((res) => {
        done.push(res);
        if (done.length === n) {
          clearTimeout(timer);
          resolve();
        }
      });
    }
  });
  return done;
}

describe("ingest backpressure", () => {
  it("a full buffer (by events) answers 503 overloaded with Retry-After; what it took is stored", async () => {
    const { app, ingestor } = appWith({ maxPending: 6, maxPendingBytes: 1 << 20 });
    const release = await blockInserts();
    const responses = await send(app, Array.from({ length: 20 }, (_, i) => callback(`BP-N${i}`)));
    // 6 are buffered or in flight behind the lock; the other 14 are refused at once.
    const refused = await firstAnswers(responses, 14);
    for (const res of refused) {
      assert.equal(res.status, 503);
      assert.equal(res.headers.get("retry-after"), "1");
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "overloaded");
    }
    assert.equal(await stored("BP-N"), 0);
    await release();
    const all = await Promise.all(responses);
    assert.equal(all.filter((r) => r.status === 200).length, 6);
    assert.equal(await stored("BP-N"), 6);
    await ingestor.close();
  });

  it("a full buffer (by body bytes) refuses further large callbacks the same way", async () => {
    const { app, ingestor } = appWith({ maxPending: 1000, maxPendingBytes: 35_000 });
    const release = await blockInserts();
    const padding = "x".repeat(10_000);
    const responses = await send(app, Array.from({ length: 8 }, (_, i) => callback(`BP-B${i}`, { note: padding })));
    // About 10 KB each: three fit in 35,000 bytes.
    const refused = await firstAnswers(responses, 5);
    for (const res of refused) {
      assert.equal(res.status, 503);
      assert.equal(((await res.json()) as { error: { code: string } }).error.code, "overloaded");
    }
    await release();
    const all = await Promise.all(responses);
    assert.equal(all.filter((r) => r.status === 200).length, 3);
    assert.equal(await stored("BP-B"), 3);
    // Drained, the buffer takes callbacks again.
    const [again] = await send(app, [callback("BP-B-again", { note: padding })]);
    assert.equal((await again!).status, 200);
    await ingestor.close();
  });

  it("bodies without a Content-Length hold room as they are read, not the most a callback may be: 50 at once fit in 1 MiB", async () => {
    const { app, ingestor } = appWith({ maxPending: 1000, maxPendingBytes: 1 << 20 });
    const all = await Promise.all(sendUndeclared(app, Array.from({ length: 50 }, (_, i) => callback(`BP-U${i}`))));
    assert.deepEqual(
      all.map((r) => r.status),
      all.map(() => 200),
    );
    assert.equal(await stored("BP-U"), 50);
    await ingestor.close();
  });

  it("a body without a Content-Length that outgrows the room left is refused 503 overloaded as it is read; alone, a large one is taken", async () => {
    const { app, ingestor } = appWith({ maxPending: 1000, maxPendingBytes: 35_000 });
    const release = await blockInserts();
    const first = await send(app, [callback("BP-G0", { note: "x".repeat(10_000) })]);
    await new Promise((r) => setTimeout(r, 50));
    const [grown] = sendUndeclared(app, [callback("BP-G1", { note: "y".repeat(30_000) })]);
    const res = await grown!;
    assert.equal(res.status, 503);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "overloaded");
    await release();
    assert.equal((await first[0]!).status, 200);
    const [alone] = sendUndeclared(app, [callback("BP-G2", { note: "z".repeat(100_000) })]);
    assert.equal((await alone!).status, 200);
    assert.equal(await stored("BP-G"), 2);
    await ingestor.close();
  });
});
