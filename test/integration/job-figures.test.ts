/**
 * The job figures of /metrics and the console's System page (src/worker/figures.ts): a
 * job that a worker is running is running, not failed, even when graphile-worker has
 * given it all its attempts (what it does to a running job an add_job replaces by its key:
 * every notification delivery run and command retry).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { failedJobCounts, jobQueueDepth } from "../../src/worker/figures.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 2 });
});
after(async () => {
  await sql.end();
  await testDb.drop();
});

const addJob = () => sql`select graphile_worker.add_job('notify__deliver', '{}'::json, queue_name => 'notify:ep_1', job_key => 'notify:ep_1')`;

describe("job figures", () => {
  it("a running job replaced by its key is running, not failed; one out of attempts and not running is failed", async () => {
    await addJob();
    // A worker takes it (as get_job does), and an add_job with its key comes meanwhile.
    await sql`update graphile_worker._private_jobs set attempts = attempts + 1, locked_at = now(), locked_by = 'worker-1'`;
    await addJob();
    const [replaced] = await sql<{ attempts: number; max_attempts: number }[]>`select attempts, max_attempts from graphile_worker.jobs where locked_at is not null`;
    assert.equal(replaced!.attempts, replaced!.max_attempts, "graphile-worker gave the running job all its attempts");

    assert.deepEqual([...(await failedJobCounts(sql))], []);
    const { oldestWaitingSeconds, ...depth } = await jobQueueDepth(sql);
    assert.deepEqual(depth, { waiting: 1, scheduled: 0, running: 1, failed: 0 });
    // The replacing job is due and waits: its age, not the running one's.
    assert.ok(oldestWaitingSeconds >= 0 && oldestWaitingSeconds < 60, String(oldestWaitingSeconds));

    // The run fails for good (its worker unlocks it): now it is failed.
    await sql`update graphile_worker._private_jobs set locked_at = null, locked_by = null where locked_at is not null`;
    assert.deepEqual([...(await failedJobCounts(sql))], [{ task: "notify__deliver", n: 1 }]);
    assert.deepEqual({ ...(await jobQueueDepth(sql)), oldestWaitingSeconds: 0 }, { waiting: 1, scheduled: 0, running: 0, failed: 1, oldestWaitingSeconds: 0 });
  });
});
