/**
 * Running a test app's due jobs as a worker with another configuration would (e.g. a
 * worker that refuses private URLs, on the same database as a web process that allowed
 * them). Same loop as TestApp.runJobs.
 */
import { runOnce } from "graphile-worker";
import type { Config } from "../../src/config.ts";
import { graphileLogger } from "../../src/worker/logger.ts";
import { taskList } from "../../src/worker/runner.ts";
import type { TestApp } from "./app.ts";

export async function runJobsAs(t: TestApp, config: Config): Promise<void> {
  const deps = { config, databaseUrl: t.testDb.url, sql: t.database.sql, log: t.log, metrics: t.metrics };
  for (let i = 0; i < 10; i++) {
    await runOnce({ connectionString: t.testDb.url, taskList: taskList(deps), logger: graphileLogger(t.log) });
    for (let wait = 0; wait < 500; wait++) {
      const [busy] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where locked_at is not null`;
      if (busy!.n === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    const [due] = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker.jobs where run_at <= now() and locked_at is null and attempts = 0`;
    if (due!.n === 0) return;
  }
  throw new Error("jobs still due after 10 runs");
}
