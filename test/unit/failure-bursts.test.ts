/**
 * db/failure-bursts.ts and graphile-worker's logger: a burst of database failures is a
 * line when it starts, a line a `repeatMs` while it lasts and a line when it has ended,
 * not a line per failure.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { failureBursts } from "../../src/db/failure-bursts.ts";
import { createLogger } from "../../src/logger.ts";
import { graphileLogger } from "../../src/worker/logger.ts";

type Line = Record<string, unknown> & { level: number; msg: string };

function capture() {
  const lines: Line[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Line);
      done();
    },
  });
  return { lines, log: createLogger({ level: "info", destination: sink }) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), { code: "ECONNREFUSED" });

describe("failure bursts", () => {
  it("logs the first failure, a count while it lasts, and one line when none has come for quietMs", async () => {
    const { lines, log } = capture();
    const bursts = failureBursts(log, "requests refused", { quietMs: 150, repeatMs: 100 });
    for (let i = 0; i < 50; i++) bursts.failed("database unavailable", { cause: "ECONNREFUSED" }, "request refused");
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(lines[0]!.msg, "request refused");
    assert.equal(lines[0]!["cause"], "ECONNREFUSED");
    await sleep(110);
    for (let i = 0; i < 10; i++) bursts.failed("database unavailable", {}, "request refused");
    assert.equal(lines.length, 2, `a line after repeatMs: ${JSON.stringify(lines)}`);
    // The 49 after the first line, and the one that came after repeatMs.
    assert.equal(lines[1]!["count"], 50);
    assert.match(lines[1]!.msg, /^database unavailable: still failing after [\d.]+ s, 50 more requests refused since the last line$/);
    await sleep(400);
    assert.equal(lines.length, 3, JSON.stringify(lines));
    assert.equal(lines[2]!["count"], 60);
    assert.match(lines[2]!.msg, /^database unavailable: 60 requests refused in [\d.]+ s, none for the last/);
    // A new burst starts with its own first line.
    bursts.failed("database unavailable", {}, "request refused");
    assert.equal(lines.length, 4);
    assert.equal(lines[3]!.msg, "request refused");
  });

  it("an outage (a burst past escalateAfterMs) says it is still failing at error level; a blip stays a warning", async () => {
    const { lines, log } = capture();
    // The second failure past repeatMs, well before escalateAfterMs (it was 60 ms in, of 120:
    // a stall of a loaded machine's 60 ms made it an error); the third past escalateAfterMs.
    const outage = failureBursts(log, "requests refused", { quietMs: 2000, repeatMs: 50, escalateAfterMs: 700 });
    outage.failed("database unavailable", {}, "request refused");
    await sleep(60);
    outage.failed("database unavailable", {}, "request refused");
    await sleep(700);
    outage.failed("database unavailable", {}, "request refused");
    assert.deepEqual(
      lines.map((l) => l.level),
      [40, 40, 50],
      JSON.stringify(lines),
    );
    assert.match(lines[2]!.msg, /still failing after/);
    // Without escalateAfterMs (a receiver's failures), warnings throughout.
    const quiet = capture();
    const receiver = failureBursts(quiet.log, "failed attempts", { quietMs: 1000, repeatMs: 50 });
    for (let i = 0; i < 3; i++) {
      receiver.failed("endpoint down", {}, "attempt failed");
      await sleep(70);
    }
    assert.ok(quiet.lines.length >= 2 && quiet.lines.every((l) => l.level === 40), JSON.stringify(quiet.lines));
  });

  it("graphile-worker's failed job is a warning while it will run again, an error once it failed for good", () => {
    const { lines, log } = capture();
    const logger = graphileLogger(log);
    const timeout = new Error("provider timeout: POST /v3/clients/generate_marketplace_awb/: no answer within 12000 ms");
    logger.error("Failed task 9 (awb__replenish, 12003.00ms, attempt 1 of 5) with error 'provider timeout'", {
      failure: true,
      job: { id: "9", attempts: 1, max_attempts: 5 },
      error: timeout,
    });
    logger.error("Failed task 9 (awb__replenish, 12003.00ms, attempt 5 of 5) with error 'provider timeout'", {
      failure: true,
      job: { id: "9", attempts: 5, max_attempts: 5 },
      error: timeout,
    });
    assert.deepEqual(
      lines.map((l) => l.level),
      [40, 50],
    );
  });

  it("graphile-worker's errors for a lost database are one burst; a failed job keeps its line", () => {
    const { lines, log } = capture();
    const logger = graphileLogger(log);
    for (let i = 0; i < 30; i++) {
      logger.error("Error occurred fetching jobs; will try again on next poll interval.", { error: refused });
      logger.error("Error with notify listener (trying again in 500ms)", { error: new Error("Connection terminated unexpectedly") });
    }
    // A server with idle_session_timeout ends graphile-worker's idle connections, its LISTEN one too.
    for (let i = 0; i < 30; i++) {
      logger.error("Error with notify listener (trying again in 500ms)", { error: Object.assign(new Error("terminating connection due to idle-session timeout"), { code: "57P05" }) });
    }
    // A read-only server (failover to a standby): graphile-worker's every poll fails with 25006.
    for (let i = 0; i < 30; i++) {
      logger.error("Error occurred fetching jobs; will try again on next poll interval.", { error: Object.assign(new Error("cannot execute UPDATE in a read-only transaction"), { code: "25006" }) });
    }
    logger.error("Failed task 7 (order__project) with error 'connect ECONNREFUSED'", { failure: true, job: { id: "7" }, error: refused });
    logger.error("something else broke", { error: new TypeError("x is undefined") });
    assert.deepEqual(
      lines.map((l) => l.msg),
      ["Error occurred fetching jobs; will try again on next poll interval.", "Error occurred fetching jobs; will try again on next poll interval.", "Failed task 7 (order__project) with error 'connect ECONNREFUSED'", "something else broke"],
    );
    assert.equal(lines[0]!.level, 40);
  });
});
