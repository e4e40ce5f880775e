/**
 * The room a callback holds in the ingest buffer before its body is read
 * (routes/callbacks.ts, batcher.ts hold): what the body may cost once read, not only what
 * travels. A compressed body inflates to up to 256 KiB however small its Content-Length.
 */
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { describe, it } from "node:test";
import type { Sql } from "postgres";
import type { Ingestor } from "../../src/ingest/batcher.ts";
import { CALLBACK_MAX_BYTES, callbackRoutes } from "../../src/http/routes/callbacks.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";

function routes() {
  const held: number[] = [];
  const ingestor: Ingestor = {
    hold(bytes) {
      held.push(bytes);
      return { grow: () => true, release: () => {} };
    },
    submit: () => Promise.resolve({ eventId: "1", duplicate: false }),
    close: () => Promise.resolve(),
  };
  const app = callbackRoutes({
    secret: "callback-secret-0123",
    sql: {} as Sql,
    ingestor,
    log: createLogger({ level: "silent" }),
    metrics: createMetrics(),
    timeZone: "Asia/Kolkata",
  });
  return { app, held };
}

const body = JSON.stringify({ client_order_id: "HOLD-1", order_status: "DELIVERED", note: "x".repeat(200_000) });

describe("a callback's hold in the ingest buffer", () => {
  it("is its Content-Length for a plain body", async () => {
    const { app, held } = routes();
    const res = await app.request("/callbacks/callback-secret-0123", {
      method: "POST",
      headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) },
      body,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(held, [Buffer.byteLength(body)]);
  });

  it("is the most a body may inflate to for a compressed one, not its compressed size", async () => {
    const { app, held } = routes();
    const gzipped = gzipSync(body);
    assert.ok(gzipped.byteLength < 2_000, String(gzipped.byteLength));
    const res = await app.request("/callbacks/callback-secret-0123", {
      method: "POST",
      headers: { "content-type": "application/json", "content-encoding": "gzip", "content-length": String(gzipped.byteLength) },
      body: gzipped,
    });
    assert.equal(res.status, 200);
    assert.deepEqual(held, [CALLBACK_MAX_BYTES]);
  });
});
