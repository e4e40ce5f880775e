import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createDatabase } from "../../src/db/client.ts";
import { freePort } from "../../src/db/embedded.ts";
import { createApp } from "../../src/http/app.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import { createIngestor } from "../../src/ingest/batcher.ts";
import { API_TOKEN, CALLBACK_SECRET } from "../helpers/app.ts";

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

  it("reads get 503, and /readyz says not ready while /healthz is up", async () => {
    const res = await app.request("/v1/orders/X", { headers: { authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(res.status, 503);
    assert.equal((await app.request("/readyz")).status, 503);
    assert.equal((await app.request("/healthz")).status, 200);
  });
});
