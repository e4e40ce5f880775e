/**
 * A real web process whose database connections are lost at the worst moments (a proxy in
 * front of the test server drops them; the shared server itself is never touched). It
 * must answer 503 meanwhile and 200 afterwards, and never die.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createTestDatabase } from "../helpers/db.ts";
import { startDatabaseProxy } from "../helpers/db-proxy.ts";
import { waitReady } from "../helpers/load.ts";
import { cleanupsAfterAll, listeningUrl, startService } from "../helpers/process.ts";

const CALLBACK_SECRET = "lost-connections-secret-0123456789";
const cleanups = cleanupsAfterAll();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("database connections lost under a web process", () => {
  it("a connection lost while the driver reads its array types (its first query) is a 503, not the death of the web process", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const proxy = await startDatabaseProxy(db.url);
    cleanups.push(() => proxy.close());
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-lost-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    // PORT=0: the process binds a free port itself and names it in its "web listening" line
    // (at info for that line); a port picked here and released could be taken by another
    // test file's process before this one listens.
    const web = startService(cleanups, "web", {
      DATABASE_URL: proxy.url,
      PORT: "0",
      HOST: "127.0.0.1",
      API_TOKEN: "lost-connections-token-0123456789",
      CALLBACK_SECRET,
      LOG_LEVEL: "info",
      LOG_FORMAT: "json",
      DATA_DIR: dataDir,
      DB_POOL_MAX: "2",
    });
    const base = await listeningUrl(web, "web listening");
    await waitReady(base);
    const send = async (n: number) => {
      try {
        const res = await fetch(`${base}/callbacks/${CALLBACK_SECRET}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ client_order_id: `LOST-${n}`, order_status: "ALLOTTED" }),
        });
        return res.status;
      } catch {
        return 0; // the process is gone
      }
    };

    // postgres.js reads every new connection's array types first (pg_type's typarray).
    proxy.cutWhenClientSends("typarray");
    for (let round = 0; round < 6; round++) {
      proxy.dropConnections(); // the pool's next query opens new connections
      const statuses = await Promise.all([send(round * 2), send(round * 2 + 1)]);
      for (const status of statuses) assert.equal(status, 503, `round ${round}: ${statuses}; output:\n${web.output().slice(-2000)}`);
      await sleep(100);
    }
    assert.equal(web.child.exitCode, null, `the web process died:\n${web.output().slice(-3000)}`);

    proxy.cutWhenClientSends(null);
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      if (i > 0) await sleep(100);
      status = await send(100);
    }
    assert.equal(status, 200, "callbacks are stored again once connections hold");
    assert.equal(await web.kill("SIGTERM"), 0);
  });
});
