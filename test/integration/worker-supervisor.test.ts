/**
 * The worker's supervisor replacing a job runner that lost the database, on real
 * PostgreSQL with real graphile-worker runners. The losses are made by the runner factory
 * the supervisor is given: each runner is real, its promise says it failed.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { Writable } from "node:stream";
import type { Runner } from "graphile-worker";
import { loadConfig } from "../../src/config.ts";
import { createDatabase } from "../../src/db/client.ts";
import type { Database } from "../../src/db/client.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import type { WorkerDeps } from "../../src/worker/deps.ts";
import { startWorker } from "../../src/worker/runner.ts";
import { superviseWorker } from "../../src/worker/supervisor.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

const lost = () => new Error("Connection terminated unexpectedly");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let testDb: TestDatabase;
let database: Database;
let deps: WorkerDeps;
const lines: string[] = [];

before(async () => {
  testDb = await createTestDatabase();
  database = createDatabase(testDb.url, { max: 4 });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-supervisor-")), DATABASE_URL: testDb.url, WORKER_CONCURRENCY: "2" });
  deps = { config, databaseUrl: testDb.url, sql: database.sql, log: createLogger({ level: "info", destination: sink }), metrics: createMetrics() };
});
after(async () => {
  await database.close();
  await testDb.drop();
});

describe("worker supervisor", () => {
  it("a runner that fails as it starts, while it replaces a failed one, is replaced in turn", async () => {
    const made: Runner[] = [];
    const start = async (d: WorkerDeps): Promise<Runner> => {
      const runner = await startWorker(d);
      made.push(runner);
      // The first loses the database a moment after it starts; the second has lost it by
      // the time it is handed over (its failure comes while the first is being replaced).
      if (made.length === 1) return { ...runner, promise: sleep(300).then(() => Promise.reject(lost())) };
      if (made.length === 2) return { ...runner, promise: Promise.reject(lost()) };
      return runner;
    };
    const worker = await superviseWorker(deps, start);
    try {
      for (let i = 0; i < 200 && !(made.length === 3 && lines.filter((l) => l.includes("job runner replaced")).length === 2); i++) await sleep(50);
      assert.equal(made.length, 3, "a third runner replaced the second");
      assert.equal(lines.filter((l) => l.includes("job runner replaced")).length, 2);
      // The third runs jobs.
      await database.sql`select graphile_worker.add_job('projection__drain')`;
      for (let i = 0; i < 100; i++) {
        const [row] = await database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs`;
        if (row!.n === 0) break;
        await sleep(50);
      }
      const [left] = await database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'projection__drain'`;
      assert.equal(left!.n, 0, "the drain job ran");
    } finally {
      await worker.stop();
    }
    await sleep(200);
    assert.equal(made.length, 3, "no runner started after the stop");
  });

  it("graphile-worker releasing its LISTEN client twice after a lost connection (an unhandled rejection) replaces the runner; the process does not exit", async () => {
    const before = new Set(process.listeners("unhandledRejection"));
    const worker = await superviseWorker(deps);
    const realExit = process.exit;
    let exitCode: unknown;
    process.exit = ((code?: number) => {
      exitCode = code ?? 0;
    }) as typeof process.exit;
    try {
      const supervisors = process.listeners("unhandledRejection").filter((l) => !before.has(l));
      assert.equal(supervisors.length, 1, "the supervisor's handler");
      const replacedBefore = lines.filter((l) => l.includes("job runner replaced")).length;
      // What graphile-worker 0.18's notify listener rejects with when its error handler's
      // un-awaited release runs after the runner's own (seen with backends terminated under it).
      supervisors[0]!(new Error("Release called on client which has already been released to the pool."), Promise.resolve());
      for (let i = 0; i < 100 && lines.filter((l) => l.includes("job runner replaced")).length === replacedBefore; i++) await sleep(50);
      assert.equal(exitCode, undefined, `the process exited: ${lines.slice(-3).join("\n")}`);
      assert.equal(lines.filter((l) => l.includes("job runner replaced")).length, replacedBefore + 1, "the runner was replaced");
    } finally {
      process.exit = realExit;
      await worker.stop();
    }
  });
});
