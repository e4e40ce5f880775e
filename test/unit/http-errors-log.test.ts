/**
 * How errorHandler (src/http/errors.ts) logs what it answers: an error nobody foresaw
 * (internal_error, 500) at error with its stack; a 502 or 503 with a known code (an empty
 * AWB pool, the database down) at warn, with no stack; the caller's mistakes (4xx) not at all
 * (the request line says enough).
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { Hono } from "hono";
import { DomainError } from "../../src/domain/errors.ts";
import { ApiError, errorHandler } from "../../src/http/errors.ts";
import { createLogger } from "../../src/logger.ts";

type Line = Record<string, unknown> & { level: number; msg: string };
const WARN = 40;
const ERROR = 50;

/** An app whose routes throw each kind of failure, and the lines its errorHandler logged. */
function appWithLog() {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Line);
      done();
    },
  });
  const log = createLogger({ level: "debug", destination: sink });
  const app = new Hono();
  app.get("/pool-empty", () => {
    throw new ApiError("awb_pool_empty", "the AWB pool is empty; a top-up is under way", { headers: { "retry-after": "5" } });
  });
  app.get("/database-down", () => {
    throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });
  });
  app.get("/replica-conflict", () => {
    throw Object.assign(new Error("canceling statement due to conflict with recovery"), { code: "40001" });
  });
  app.get("/no-order", () => {
    throw new DomainError("order_not_found", "no order ORD-1");
  });
  app.get("/invalid", () => {
    throw new ApiError("validation_failed", "invalid body: store_code: required");
  });
  app.get("/bug", () => {
    throw new TypeError("cannot read properties of undefined (reading 'id')");
  });
  app.notFound(() => {
    throw new ApiError("not_found", "no route");
  });
  app.onError(errorHandler(log));
  /** The lines logged for `path`, after checking the answer's status. */
  const linesOf = async (path: string, status: number): Promise<Line[]> => {
    const before = lines.length;
    const res = await app.request(path);
    assert.equal(res.status, status, `${path}: ${await res.clone().text()}`);
    log.flush();
    return lines.slice(before);
  };
  /** The one line logged for `path`. */
  const lineOf = async (path: string, status: number): Promise<Line> => {
    const logged = await linesOf(path, status);
    assert.equal(logged.length, 1, `${path}: one line: ${JSON.stringify(logged)}`);
    return logged[0]!;
  };
  return { lineOf, linesOf };
}

const hasStack = (line: Line) => JSON.stringify(line).includes("\\n    at ");

describe("errorHandler's log lines", () => {
  it("a routine 503 awb_pool_empty is a warning without a stack", async () => {
    const { lineOf } = appWithLog();
    const line = await lineOf("/pool-empty", 503);
    assert.equal(line.level, WARN);
    assert.equal(line.msg, "request refused");
    assert.equal(line["code"], "awb_pool_empty");
    assert.equal(line["status"], 503);
    assert.equal(line["err"], undefined);
    assert.ok(!hasStack(line), JSON.stringify(line));
  });

  it("a 503 database_unavailable is a warning naming its cause, without a stack", async () => {
    const { lineOf } = appWithLog();
    const line = await lineOf("/database-down", 503);
    assert.equal(line.level, WARN);
    assert.equal(line["code"], "database_unavailable");
    assert.match(String(line["cause"]), /ECONNREFUSED 127\.0\.0\.1:5432/);
    assert.ok(!hasStack(line), JSON.stringify(line));
  });

  it("a read replica cancelling a query that replay conflicts with is a 503 to retry, not a 500", async () => {
    const { lineOf } = appWithLog();
    const line = await lineOf("/replica-conflict", 503);
    assert.equal(line.level, WARN);
    assert.equal(line["code"], "database_unavailable");
    assert.match(String(line["cause"]), /conflict with recovery \(40001\)/);
  });

  it("the caller's mistakes (404, 422) log nothing here: the request line says enough", async () => {
    const { linesOf } = appWithLog();
    for (const [path, status] of [["/no-order", 404], ["/invalid", 422], ["/no-such-route", 404]] as const) {
      assert.deepEqual(await linesOf(path, status), [], path);
    }
  });

  it("an unknown error is an error, 500 internal_error, with its stack", async () => {
    const { lineOf } = appWithLog();
    const line = await lineOf("/bug", 500);
    assert.equal(line.level, ERROR);
    assert.equal(line.msg, "request failed");
    assert.equal(line["code"], "internal_error");
    const err = line["err"] as { type?: string; message?: string; stack?: string };
    assert.equal(err.type, "TypeError");
    assert.match(err.stack ?? "", /TypeError: cannot read properties[\s\S]*\n\s+at /);
  });
});
