/**
 * The embedded PostgreSQL (`npm start` without DATABASE_URL) killed under a running
 * process: it is started again on the same port and data, and the process's pool gets
 * its answers again without a restart. Nothing else would restart it: it is a child of
 * tracklane, watched by no orchestrator.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { createPool } from "../../src/db/client.ts";
import { startEmbeddedPostgres } from "../../src/db/embedded.ts";
import type { EmbeddedServer } from "../../src/db/embedded.ts";
import { createLogger } from "../../src/logger.ts";

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

describe("embedded PostgreSQL", () => {
  it("killed with SIGKILL: restarted on the same port, saying so, and the pool's queries succeed again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tracklane-embedded-restart-"));
    chmodSync(dir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const lines: { level: number; msg: string }[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as { level: number; msg: string });
        done();
      },
    });
    const log = createLogger({ level: "info", destination: sink });
    const server: EmbeddedServer = await startEmbeddedPostgres(join(dir, "pg"), log);
    cleanups.push(() => server.stop());
    const sql = createPool(server.url("postgres"), 2, "tracklane-test");
    cleanups.push(() => sql.end({ timeout: 1 }));
    assert.equal((await sql<{ n: number }[]>`select 1 as n`)[0]!.n, 1);

    // The postmaster's pid, from its data directory (under a directory others can reach, it is not moved).
    const postmaster = () => Number(readFileSync(join(dir, "pg", "postmaster.pid"), "utf8").split("\n")[0]);
    const first = postmaster();
    process.kill(first, "SIGKILL");
    const killedAt = Date.now();
    let answered = false;
    while (!answered && Date.now() - killedAt < 60_000) {
      try {
        await sql`select 1`;
        answered = Date.now() - killedAt > 200; // not a query that beat the kill
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    assert.ok(answered, `no answer within 60 s of the kill; log: ${JSON.stringify(lines.slice(-5))}`);
    assert.notEqual(postmaster(), first, "a new postmaster");
    assert.ok(lines.some((l) => l.level === 50 && /exited unexpectedly; restarting it/.test(l.msg)), "the exit is logged as an error");
    assert.ok(lines.some((l) => l.msg === "embedded PostgreSQL restarted"));

    // A stop is a stop: not restarted.
    const pid = postmaster();
    await server.stop();
    await new Promise((r) => setTimeout(r, 1500));
    assert.throws(() => process.kill(pid, 0), "the server stays stopped");
    assert.ok(!lines.some((l) => l.msg === "embedded PostgreSQL restarted" && lines.indexOf(l) > lines.findIndex((m) => m.msg === "embedded PostgreSQL stopped")));
  });
});
