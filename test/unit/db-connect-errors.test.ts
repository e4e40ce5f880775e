/**
 * A connect that fails at once (src/db/client.ts, socketFactory): Node reports some
 * failures of net.connect on the next tick, before postgres.js (which awaits the socket
 * factory) listens on the socket. EMFILE is one (no file descriptor left: a web process
 * at its `ulimit -n` under many connections), and an unheard 'error' event killed the
 * process. A Unix socket path longer than the system allows fails the same way, without
 * any limit to lower: the tests use it. No database is needed: nothing is reached. Also
 * how such refusals are answered: EMFILE and a server out of slots (53300) are 503s
 * naming the shortage.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createPool, databaseBusyReason, isDatabaseWideFailure } from "../../src/db/client.ts";
import { toApiError, statusOf } from "../../src/http/errors.ts";

/** Longer than any sockaddr_un holds (108 bytes on Linux, 104 elsewhere). */
const TOO_LONG_DIR = `/tmp/${"x".repeat(200)}`;

describe("database connections refused or impossible", () => {
  it("rejects the query instead of killing the process with an unheard 'error' event", async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => uncaught.push(err);
    process.on("uncaughtException", onUncaught);
    const sql = createPool(`postgres://postgres@/postgres?host=${encodeURIComponent(TOO_LONG_DIR)}`, 1, "test", { connect_timeout: 2 });
    try {
      // The first query connects from within a timer's callback, as a pool's later connects do.
      const outcome = await new Promise<unknown>((resolve) => {
        setTimeout(() => sql`select 1`.then(resolve, resolve), 0);
        setTimeout(() => resolve("no answer within 5 s"), 5000).unref();
      });
      assert.ok(outcome instanceof Error, "the query was rejected");
      // The driver heard the connect's own error, not a timeout after connect_timeout.
      assert.equal((outcome as { code?: unknown }).code, "EINVAL", String(outcome));
      assert.deepEqual(uncaught, []);
    } finally {
      process.off("uncaughtException", onUncaught);
      await sql.end({ timeout: 1 });
    }
  });

  it("names a server out of connection slots (53300) in its 503, not as an outage", () => {
    const err = Object.assign(new Error('too many connections for role "app"'), { code: "53300", severity: "FATAL" });
    const apiError = toApiError(new Error("Failed query", { cause: err })); // as drizzle wraps it
    assert.equal(statusOf(apiError.code), 503);
    assert.equal(apiError.headers?.["retry-after"], "1");
    assert.match(apiError.message, /too many connections \(SQLSTATE 53300\)/);
  });

  it("answers a callback 503 with Retry-After when the process has no file descriptor left (EMFILE, ENFILE)", () => {
    for (const code of ["EMFILE", "ENFILE"]) {
      const err = Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code, syscall: "connect" });
      const apiError = toApiError(err);
      assert.equal(statusOf(apiError.code), 503, code);
      assert.equal(apiError.headers?.["retry-after"], "1");
      assert.match(apiError.message, new RegExp(code));
      assert.ok(databaseBusyReason(err));
      // Each event of a batch retried alone would meet the same shortage.
      assert.equal(isDatabaseWideFailure(err), true);
    }
  });
});
