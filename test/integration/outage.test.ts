/**
 * The database goes away under a running web app and comes back (a proxy in front of the
 * test server drops every connection and refuses new ones: the shared server itself is
 * never stopped). What /metrics says meanwhile, and what the log says.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createDatabase, driverSql } from "../../src/db/client.ts";
import type { Database } from "../../src/db/client.ts";
import { createApp } from "../../src/http/app.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import { ingestorFor } from "../../src/runtime/services.ts";
import type { Ingestor } from "../../src/ingest/batcher.ts";
import { API_TOKEN, CALLBACK_SECRET } from "../helpers/app.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";
import { startDatabaseProxy } from "../helpers/db-proxy.ts";
import type { DatabaseProxy } from "../helpers/db-proxy.ts";

type Line = Record<string, unknown> & { level: number; msg: string };

let testDb: TestDatabase;
let proxy: DatabaseProxy;
let database: Database;
let ingestor: Ingestor;
let app: ReturnType<typeof createApp>;
const lines: Line[] = [];
const dataDirs: string[] = [];
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-outage-"));
  dataDirs.push(dir);
  return dir;
};

before(async () => {
  testDb = await createTestDatabase();
  proxy = await startDatabaseProxy(testDb.url);
  const config = loadConfig({ DATA_DIR: dataDir(), DATABASE_URL: proxy.url, API_TOKEN, CALLBACK_SECRET });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Line);
      done();
    },
  });
  // At info, as a production process logs.
  const log = createLogger({ level: "info", destination: sink });
  const metrics = createMetrics();
  database = createDatabase(proxy.url, { max: 4 });
  ingestor = ingestorFor(config, database, log, metrics);
  app = createApp({ config, sql: database.sql, readSql: database.readSql, ingestor, log, metrics });
});
after(async () => {
  await proxy.up();
  await ingestor.close();
  await database.close();
  await proxy.close();
  await testDb.drop();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});

const callback = (n: number) =>
  app.request(`/callbacks/${CALLBACK_SECRET}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_order_id: `OUT-${n}`, order_status: "ALLOTTED", event_time: new Date(Date.UTC(2026, 0, 1, 0, 0, n)).toISOString() }),
  });

const scrape = async () => {
  const res = await app.request("/metrics");
  assert.equal(res.status, 200);
  return await res.text();
};

describe("the database goes away and comes back", () => {
  it("/metrics says tracklane_database_up 0 and leaves out the figures it cannot read, rather than repeating the last ones; they are back with it", async () => {
    for (let n = 0; n < 3; n++) assert.equal((await callback(n)).status, 200);
    const before = await scrape();
    assert.match(before, /^tracklane_database_up 1$/m);
    // Three events queued, no worker: the backlog says so.
    assert.match(before, /^tracklane_projection_backlog 3$/m);
    assert.match(before, /^tracklane_awb_pool\{state="available"\} 0$/m);

    await proxy.down();
    try {
      const during = await scrape();
      assert.match(during, /^tracklane_database_up 0$/m);
      // Not the 3 read before: while the database is away nobody knows the backlog.
      for (const figure of ["tracklane_projection_backlog", "tracklane_projection_oldest_pending_seconds", "tracklane_awb_pool", "tracklane_orders_placement", "tracklane_notification_deliveries_pending"]) {
        assert.doesNotMatch(during, new RegExp(`^${figure}[ {]`, "m"), `${figure} is left out while the database is away`);
      }
      // What the process counts itself still answers.
      assert.match(during, /^tracklane_callbacks_total\{result="stored"\} 3$/m);
    } finally {
      await proxy.up();
    }
    // Back within a few seconds (the pool reconnects with a backoff of a second at most).
    let afterwards = "";
    for (let i = 0; i < 50 && !/^tracklane_database_up 1$/m.test(afterwards); i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      afterwards = await scrape();
    }
    assert.match(afterwards, /^tracklane_database_up 1$/m, "up again");
    assert.match(afterwards, /^tracklane_projection_backlog 3$/m);
  });

  it("200 callbacks refused while it is away: each a 503 with Retry-After, and one warning in the log, not a line or two each", async () => {
    const before = lines.length;
    await proxy.down();
    try {
      // Twenty at a time, as a provider's sender would.
      for (let n = 0; n < 200; n += 20) {
        for (const res of await Promise.all(Array.from({ length: 20 }, (_, i) => callback(100 + n + i)))) {
          assert.equal(res.status, 503);
          assert.equal(res.headers.get("retry-after"), "1");
        }
      }
    } finally {
      await proxy.up();
    }
    const logged = lines.slice(before);
    const refused = logged.filter((l) => l.msg === "request refused");
    assert.equal(refused.length, 1, `one "request refused" for the burst, got ${refused.length}`);
    assert.equal(refused[0]!["code"], "database_unavailable");
    assert.match(String(refused[0]!["cause"]), /ECONNREFUSED|CONNECTION_CLOSED|closed the connection/);
    // The request line of a refused callback is at debug, as an accepted one's: not 200 lines at info.
    const requestLines = logged.filter((l) => l.msg === "request");
    assert.equal(requestLines.length, 0, `request lines at info: ${requestLines.length}`);
    assert.ok(logged.length <= 3, `a few lines for the whole burst, got ${logged.length}: ${JSON.stringify(logged.slice(0, 5))}`);
    // And callbacks are taken again once it is back (within a few seconds: the pool's backoff).
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      status = (await callback(400)).status;
    }
    assert.equal(status, 200);
  });
});

describe("the database stops answering (a silent network cut)", () => {
  it("/readyz says 503 within a few seconds, and /metrics answers with tracklane_database_up 0, instead of waiting for ever", async () => {
    proxy.freeze(true);
    try {
      const started = Date.now();
      // The app is called directly: a request it never answers must fail the test, not hang it.
      const within = async (path: string) => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${path} did not answer within 10 s`)), 10_000)));
        try {
          return await Promise.race([Promise.resolve(app.request(path)), late]);
        } finally {
          clearTimeout(timer);
        }
      };
      const ready = await within("/readyz");
      assert.equal(ready.status, 503);
      assert.match(((await ready.json()) as { reason: string }).reason, /database/);
      const metrics = await within("/metrics");
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^tracklane_database_up 0$/m);
      assert.ok(Date.now() - started < 8000, `answered after ${Date.now() - started} ms`);
    } finally {
      proxy.freeze(false);
    }
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      status = (await app.request("/readyz")).status;
    }
    assert.equal(status, 200, "ready again once packets flow");
  });
});

describe("a statement timeout while the log is locked", () => {
  it("every callback of the batch gets its 503 after about one timeout, not one timeout per event retried alone; stored once the lock is gone", async () => {
    const db = await createTestDatabase();
    const admin = driverSql(db.url, { max: 2 });
    await admin.unsafe(`alter database "${db.name}" set statement_timeout = '300ms'`);
    const config = loadConfig({ DATA_DIR: dataDir(), DATABASE_URL: db.url, API_TOKEN, CALLBACK_SECRET });
    const log = createLogger({ level: "silent" });
    const metrics = createMetrics();
    const timed = createDatabase(db.url, { max: 4 });
    const timedIngestor = ingestorFor(config, timed, log, metrics);
    const timedApp = createApp({ config, sql: timed.sql, readSql: timed.readSql, ingestor: timedIngestor, log, metrics });
    const send = (n: number) =>
      timedApp.request(`/callbacks/${CALLBACK_SECRET}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ client_order_id: `TIMEOUT-${n}`, order_status: "ALLOTTED" }),
      });
    try {
      // A migration, a VACUUM FULL or a stuck session holding the log: every append waits.
      const holder = await admin.reserve();
      await holder`begin`;
      await holder`set local statement_timeout = 0`;
      await holder`lock table order_events in access exclusive mode`;
      const started = Date.now();
      const answers = await Promise.all(
        Array.from({ length: 40 }, async (_, n) => {
          const res = await send(n);
          return { status: res.status, retryAfter: res.headers.get("retry-after"), ms: Date.now() - started };
        }),
      );
      await holder`rollback`;
      holder.release();
      for (const a of answers) {
        assert.equal(a.status, 503);
        assert.equal(a.retryAfter, "1");
      }
      const slowest = Math.max(...answers.map((a) => a.ms));
      // One batch: 300 ms, and maybe a second batch behind it. Retried one by one, 40 x 300 ms.
      assert.ok(slowest < 3000, `slowest 503 after ${slowest} ms`);
      console.log(`statement timeout 300 ms, log locked: 40 callbacks answered 503, the slowest after ${slowest} ms`);
      // The senders retry: stored then.
      for (let n = 0; n < 40; n++) assert.equal((await send(n)).status, 200);
      const [row] = await admin<{ n: number }[]>`select count(*)::int as n from order_events`;
      assert.equal(row!.n, 40);
    } finally {
      await timedIngestor.close();
      await timed.close();
      await admin.end();
      await db.drop();
    }
  });
});
