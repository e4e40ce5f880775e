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
import { abandonStranded } from "../../src/commands/execute.ts";
import { insertCommand, markSending, recordRetry } from "../../src/commands/store.ts";
import { releaseRuns, superviseWorker } from "../../src/worker/supervisor.ts";
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
      // This job, by id: the runner's per-minute crons (a drain among them) may queue one
      // more at any moment, so "no drain job left" could fail across a minute.
      const [added] = await database.sql<{ id: string }[]>`select id::text from graphile_worker.add_job('projection__drain')`;
      const left = async () => (await database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where id = ${added!.id}::bigint`)[0]!.n;
      for (let i = 0; i < 100 && (await left()) > 0; i++) await sleep(50);
      assert.equal(await left(), 0, "the drain job ran");
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

  it("the jobs of a runner that died run again; one it ran when add_job replaced it, or allowed one attempt, is removed, not left failed for good", async () => {
    const sql = database.sql;
    const DEAD = "pool-died-in-a-test";
    // Not due for an hour: the live runner leaves them alone.
    const add = async (key: string | null, maxAttempts = 25) => {
      const [job] = await sql<{ id: string }[]>`
        select id::text from graphile_worker.add_job('notify__sweep', '{}'::json, run_at := now() + interval '1 hour', job_key := ${key}::text, max_attempts := ${maxAttempts}::int)`;
      return job!.id;
    };
    const heldByTheDead = async (id: string, attempts: number, lastError: string | null = null) => {
      await sql`update graphile_worker._private_jobs set locked_by = ${DEAD}, locked_at = now() - interval '10 seconds', attempts = ${attempts}, last_error = ${lastError} where id = ${id}`;
    };
    // Running on the runner when the same key was added again: graphile-worker takes the
    // key from it and sets it to max_attempts; the new job does the work.
    const replaced = await add("supervisor-test-replaced");
    await heldByTheDead(replaced, 1);
    const replacement = await add("supervisor-test-replaced");
    // A cron job allowed one attempt (the drain's has no key), on it.
    const once = await add(null, 1);
    await heldByTheDead(once, 1);
    // An ordinary job on its third attempt, the second one failed: it runs again.
    const ordinary = await add(null);
    await heldByTheDead(ordinary, 3, "the second attempt failed");

    const worker = await superviseWorker(deps);
    try {
      for (let i = 0; i < 100; i++) {
        const [row] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where locked_by = ${DEAD}`;
        if (row!.n === 0) break;
        await sleep(50);
      }
      const left = await sql<{ id: string; attempts: number; max_attempts: number; locked: boolean }[]>`
        select id::text, attempts, max_attempts, locked_at is not null as locked from graphile_worker.jobs
        where id = any(${[replaced, replacement, once, ordinary]}::bigint[]) order by jobs.id`;
      assert.deepEqual(
        [...left],
        [
          { id: replacement, attempts: 0, max_attempts: 25, locked: false },
          { id: ordinary, attempts: 3, max_attempts: 25, locked: false },
        ],
        "the replaced job and the one-attempt job are gone; the replacement waits; the ordinary job is unlocked to run again",
      );
    } finally {
      await worker.stop();
      await sql`delete from graphile_worker._private_jobs where id = any(${[replacement, ordinary]}::bigint[])`;
    }
  });
});

describe("worker supervisor: a stop completes the runs that succeeded", () => {
  it("only a row still held by the run that succeeded: one that add_job took over in place meanwhile (same id, new payload) is left to run", async () => {
    const sql = database.sql;
    // graphile-worker's own pool id is not exposed: the runs here are on a pool of the test's,
    // announced to the supervisor as graphile-worker does (job:start, job:success).
    const POOL = "pool-of-a-stopping-test";
    let runner: Runner | undefined;
    const worker = await superviseWorker(deps, async (d) => (runner = await startWorker(d)));
    const ids: string[] = [];
    try {
      // Not due for an hour: the live runner leaves them alone.
      const add = async (key: string | null, payload: object) => {
        const [job] = await sql<{ id: string }[]>`
          select id::text from graphile_worker.add_job('notify__sweep', ${JSON.stringify(payload)}::text::json,
            run_at := now() + interval '1 hour', job_key := ${key}::text)`;
        ids.push(job!.id);
        return job!.id;
      };
      // Fetched by the pool (graphile-worker's fetch counts the attempt), run, succeeded; the
      // completion not written (graphile-worker writes it without waiting).
      const runs = async (id: string) => {
        const [job] = await sql<{ id: string; locked_by: string; attempts: number; revision: number }[]>`
          update graphile_worker._private_jobs set locked_by = ${POOL}, locked_at = now(), attempts = attempts + 1
          where id = ${id} returning id::text, locked_by, attempts, revision`;
        runner!.events.emit("job:start", { job } as never);
        runner!.events.emit("job:success", { job } as never);
      };
      const held = await add(null, { run: "held" });
      await runs(held);
      const takenOver = await add("supervisor-test-taken-over", { command: 1 });
      await runs(takenOver);
      // Unlocked meanwhile (another worker's sweep while this one's liveness lock lapsed, or
      // the release of a replaced runner), and add_job with its key took the unlocked row
      // over in place: same id, the new work in it.
      await sql`update graphile_worker._private_jobs set locked_by = null, locked_at = null where id = ${takenOver}`;
      const [again] = await sql<{ id: string }[]>`
        select id::text from graphile_worker.add_job('notify__sweep', '{"command":2}'::json,
          run_at := now() + interval '1 hour', job_key := 'supervisor-test-taken-over')`;
      assert.equal(again!.id, takenOver, "add_job updated the unlocked row in place");
    } finally {
      await worker.stop();
    }
    const left = await sql<{ id: string; payload: unknown; locked: boolean }[]>`
      select id::text, payload, locked_at is not null as locked from graphile_worker._private_jobs where id = any(${ids}::bigint[]) order by _private_jobs.id`;
    await sql`delete from graphile_worker._private_jobs where id = any(${ids}::bigint[])`;
    assert.deepEqual(
      [...left],
      [{ id: ids[1], payload: { command: 2 }, locked: false }],
      "the run still held is completed; the row add_job took over waits with its new work",
    );
  });
});

describe("worker supervisor: a command whose runner died", () => {
  it("a run that had queued its retry goes (the retry's job carries the command); one that died during its last attempt stays for the sweep, which ends the command unconfirmed", async () => {
    const sql = database.sql;
    const DEAD = "pool-died-during-a-command";
    const command = async (ref: string) =>
      await sql.begin(async (tx) => {
        const [order] = await tx<{ id: number }[]>`insert into orders (client_order_id, placement_state) values (${ref}, 'pending') returning id`;
        const id = await insertCommand(tx, order!.id, "place", { client_order_id: ref });
        // Fetched by the runner that is about to die (graphile-worker's fetch counts the attempt).
        const [job] = await tx<{ id: string }[]>`
          update graphile_worker._private_jobs set locked_by = ${DEAD}, locked_at = now(), attempts = ${ref.endsWith("LAST") ? 25 : 1}
          where key = ${`command:${id}`} returning id::text`;
        return { id, job: job!.id };
      });
    // Sent (its "sending" mark), answered 503, its retry recorded and queued an hour on:
    // graphile-worker took the key from the running job (keyless, at max_attempts, no
    // error) and the new job has it. Then the runner died before completing the run.
    const retried = await command("SUP-CMD-RETRIED");
    await markSending(sql, retried.id, false);
    await sql.begin((tx) => recordRetry(tx, { id: retried.id, attempts: 1, error: "503", outcomeUnknown: false, delayMs: 3_600_000 }));
    // Sent on graphile-worker's last attempt (keyed: nothing replaced it), the runner died
    // during the call.
    const last = await command("SUP-CMD-LAST");
    await markSending(sql, last.id, false);

    const ended = await releaseRuns(sql, [DEAD]);
    assert.deepEqual([...ended], [{ id: retried.job, task: "command__execute" }], "only the replaced run is removed");
    const jobs = await sql<{ key: string | null; locked: boolean; attempts: number }[]>`
      select key, locked_at is not null as locked, attempts from graphile_worker.jobs
      where key = any(${[`command:${retried.id}`, `command:${last.id}`]}::text[]) order by key`;
    assert.deepEqual(
      [...jobs],
      [
        { key: `command:${retried.id}`, locked: false, attempts: 0 },
        { key: `command:${last.id}`, locked: false, attempts: 25 },
      ].sort((a, b) => a.key.localeCompare(b.key)),
    );
    // The stranded-command sweep (grace 0): the retried command is left to its job; the
    // other, which nothing will run again, ends where a person sees it.
    assert.equal(await abandonStranded({ sql, log: deps.log }, 0), 1);
    const states = await sql<{ id: number; state: string; outcome_unknown: boolean; placement_state: string }[]>`
      select c.id, c.state, c.outcome_unknown, o.placement_state from commands c join orders o on o.id = c.order_id
      where c.id = any(${[retried.id, last.id]}::bigint[]) order by c.id`;
    assert.deepEqual(
      states.map((r) => [r.id, r.state, r.outcome_unknown, r.placement_state]),
      [
        [retried.id, "pending", false, "pending"],
        [last.id, "failed", true, "unconfirmed"],
      ],
    );
    await sql`delete from graphile_worker._private_jobs where key = any(${[`command:${retried.id}`, `command:${last.id}`]}::text[])`;
  });
});
