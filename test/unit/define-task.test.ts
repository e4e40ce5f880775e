/**
 * defineTask (src/worker/define-task.ts): payloads parsed before a handler runs, the job's
 * facts handed on; the one task list holds every task; lint refuses import cycles in src/.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import type { JobHelpers } from "graphile-worker";
import postgres from "postgres";
import { z } from "zod";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { createMetrics } from "../../src/metrics.ts";
import type { RunnerShared, WorkerDeps } from "../../src/worker/deps.ts";
import { createLoadMeter } from "../../src/worker/load.ts";
import { defineTask } from "../../src/worker/define-task.ts";
import type { TaskContext } from "../../src/worker/define-task.ts";
import { taskList } from "../../src/worker/runner.ts";
import { CRONTAB, TASKS } from "../../src/worker/tasks.ts";
import { findCycles, importGraph } from "../../scripts/check-cycles.ts";

const ROOT = join(import.meta.dirname, "../..");
const KNOWN_TASKS = ["awb__poll", "awb__replenish", "command__execute", "command__sweep", "events__partitions", "notify__deliver", "notify__sweep", "order__project", "order__reconcile", "projection__drain", "retention__purge", "worker__prune_queues"];

const dataDir = mkdtempSync(join(tmpdir(), "tracklane-define-task-"));
after(() => rmSync(dataDir, { recursive: true, force: true }));

/** Worker deps whose log lines are collected; the pool is never queried (it connects lazily). */
function testDeps(): { deps: WorkerDeps; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const config = loadConfig({ DATA_DIR: dataDir });
  const log = createLogger({ level: "debug", destination: sink });
  const deps: WorkerDeps = { config, databaseUrl: "postgres://127.0.0.1:1/unused", sql: postgres("postgres://127.0.0.1:1/unused"), log, metrics: createMetrics() };
  return { deps, lines };
}

const shared = (): RunnerShared => ({ load: createLoadMeter(), stopping: new AbortController().signal });

/** The part of graphile-worker's helpers a task reads. */
function helpers(job: { id: string; attempts: number; max_attempts: number; key: string | null }): JobHelpers {
  return { job } as unknown as JobHelpers;
}

const payloadSchema = z.object({ command_id: z.coerce.number().int().positive() });

describe("defineTask", () => {
  it("an invalid payload is logged at error with zod's issues, and the handler never runs", async () => {
    const { deps, lines } = testDeps();
    let calls = 0;
    const task = defineTask("test__task", payloadSchema, async () => {
      calls++;
    }).build(deps, shared());
    await task({ command_id: "not a number" }, helpers({ id: "41", attempts: 1, max_attempts: 25, key: null }));
    deps.log.flush();
    assert.equal(calls, 0);
    const line = lines.find((l) => l.msg === "test__task: invalid payload, dropped");
    assert.ok(line, JSON.stringify(lines));
    assert.equal(line.level, 50, "error");
    assert.equal(line.task, "test__task");
    assert.equal(line.job, "41");
    assert.ok(Array.isArray(line.issues) && line.issues.length > 0);
  });

  it("the handler gets the parsed payload, the job's facts and a logger naming task and job", async () => {
    const { deps, lines } = testDeps();
    const seen: { payload: z.output<typeof payloadSchema>; ctx: TaskContext }[] = [];
    const task = defineTask("test__task", payloadSchema, async (payload, ctx) => {
      seen.push({ payload, ctx });
      ctx.log.info("ran");
    }).build(deps, shared());
    await task({ command_id: "7" }, helpers({ id: "42", attempts: 2, max_attempts: 5, key: "k:7" }));
    await task({ command_id: 8 }, helpers({ id: "43", attempts: 5, max_attempts: 5, key: null }));
    deps.log.flush();
    assert.deepEqual(
      seen.map((s) => [s.payload, s.ctx.job]),
      [
        [{ command_id: 7 }, { id: "42", attempts: 2, lastAttempt: false, key: "k:7" }],
        [{ command_id: 8 }, { id: "43", attempts: 5, lastAttempt: true, key: null }],
      ],
    );
    assert.equal(seen[0]!.ctx.deps, deps);
    assert.deepEqual(
      lines.filter((l) => l.msg === "ran").map((l) => [l.task, l.job]),
      [
        ["test__task", "42"],
        ["test__task", "43"],
      ],
    );
  });

  it("a task's setup runs once per build, and its jobs share what it made", async () => {
    const { deps } = testDeps();
    let setups = 0;
    const states: object[] = [];
    const definition = defineTask("test__stateful", z.unknown(), {
      setup: () => ({ n: ++setups }),
      run: async (_payload, { state }) => {
        states.push(state);
      },
    });
    const first = definition.build(deps, shared());
    await first({}, helpers({ id: "1", attempts: 1, max_attempts: 1, key: null }));
    await first({}, helpers({ id: "2", attempts: 1, max_attempts: 1, key: null }));
    const second = definition.build(deps, shared());
    await second({}, helpers({ id: "3", attempts: 1, max_attempts: 1, key: null }));
    assert.equal(setups, 2);
    assert.equal(states[0], states[1]);
    assert.notEqual(states[1], states[2]);
  });
});

describe("the task list", () => {
  it("holds exactly the known tasks, once each, and the runner's taskList has them all", () => {
    assert.deepEqual(TASKS.map((t) => t.name).sort(), KNOWN_TASKS);
    assert.deepEqual(Object.keys(taskList(testDeps().deps)).sort(), KNOWN_TASKS);
  });

  it("every cron line names a known task", () => {
    assert.equal(CRONTAB.length, 8);
    for (const line of CRONTAB) assert.ok(KNOWN_TASKS.includes(line.split(" ")[5]!), line);
  });
});

describe("lint", () => {
  it("npm run lint runs ESLint and the import-cycle check on src/", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
    assert.match(pkg.scripts["lint"]!, /node scripts\/lint\.ts/);
    assert.match(readFileSync(join(ROOT, "scripts/lint.ts"), "utf8"), /findCycles\(importGraph\(resolve\("src"\)\)\)/);
  });

  it("src/ has no import cycle", () => {
    assert.deepEqual(findCycles(importGraph(join(ROOT, "src"))), []);
  });

  it("finds a cycle, type-only imports included, and names its files", () => {
    const dir = mkdtempSync(join(tmpdir(), "tracklane-cycle-"));
    try {
      writeFileSync(join(dir, "a.ts"), 'import { b } from "./b.ts";\nexport const a = (): number => b() + 1;\n');
      writeFileSync(join(dir, "b.ts"), 'import type {\n  C,\n} from "./c.ts";\nexport const b = (): number => 1;\n');
      writeFileSync(join(dir, "c.ts"), 'export type C = number;\nexport { a } from "./a.ts";\n');
      writeFileSync(join(dir, "d.ts"), 'import { a } from "./a.ts";\nexport const d = a;\n');
      const cycles = findCycles(importGraph(dir)).map((c) => c.map((f) => f.slice(dir.length + 1)));
      assert.deepEqual(cycles, [["a.ts", "b.ts", "c.ts"]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
