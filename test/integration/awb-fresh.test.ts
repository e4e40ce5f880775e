/**
 * AWB top-up in fresh mode against the emulator over real HTTP: the async request, polls
 * scheduled as jobs after delay_time (which grows with the emulator's queue depth), a
 * PENDING poll rescheduled, bounded polling, failures, and no numbers lost to a failed
 * transaction.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { MAX_POLLS } from "../../src/awb/plan.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

const json = async <T>(res: Response) => (await res.json()) as T;


interface RequestRow {
  id: number;
  request_id: string | null;
  status: string;
  count: number;
  received: number;
  added: number;
  polls: number;
  next_poll_at: Date | null;
  last_error: string | null;
  created_at: Date;
}

async function requests(t: TestApp): Promise<RequestRow[]> {
  return await t.database.sql<RequestRow[]>`
    select id::int, request_id, status, count, received, added, polls, next_poll_at, last_error, created_at
    from awb_requests order by id`;
}

async function pollJobs(t: TestApp) {
  return await t.database.sql<{ id: string; key: string | null; run_at: Date; attempts: number }[]>`
    select id::text, key, run_at, attempts from graphile_worker.jobs where task_identifier = 'awb__poll' order by jobs.id`;
}

async function makeDue(t: TestApp): Promise<void> {
  await t.database.sql`
    select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier like 'awb\\_\\_%'), run_at := now())`;
}

async function available(t: TestApp): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from awb_numbers where state = 'available'`;
  return row!.n;
}

describe("fresh mode", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    // delay_time = 60 s + 1 s per started thousand + 30 s per request still generating:
    // long enough that real time never makes a request ready; the tests move the
    // emulator's clock instead.
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 60, secondsPerThousand: 1, secondsPerPendingRequest: 30 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "10", AWB_POOL_TARGET: "50", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("polls first after delay_time (queue depth included), reschedules while PENDING, then stores the numbers", async () => {
    // Someone else's request is generating: ours waits behind it (30 s more).
    await pair.client.requestFreshAwbs({ awb_count: 10 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST" })).status, 202);
    await t.runJobs();

    const [req] = await requests(t);
    assert.equal(req?.status, "pending");
    assert.equal(req?.count, 50);
    const emulated = (await pair.control.get<{ requests: { request_id: string; delay_time: number }[] }>("/awb")).body.requests;
    assert.equal(emulated.find((r) => r.request_id === req!.request_id)?.delay_time, 91, "60 + 1 + 30 x 1 pending");

    const [job] = await pollJobs(t);
    assert.equal(job?.key, `awb__poll:${req!.id}`);
    assert.ok(job!.run_at.getTime() - req!.created_at.getTime() >= 91_000, "first poll no sooner than delay_time");
    assert.ok(job!.run_at.getTime() - req!.created_at.getTime() < 92_000);
    assert.equal(req!.next_poll_at?.getTime(), job!.run_at.getTime(), "next_poll_at is the job's run_at");

    await t.runJobs();
    assert.equal((await requests(t))[0]!.polls, 0, "not polled before its time");

    // Poll early: the emulator still generates, answers PENDING with retry_flag.
    await makeDue(t);
    const before = Date.now();
    await t.runJobs();
    const [pending] = await requests(t);
    assert.equal(pending?.status, "pending");
    assert.equal(pending?.polls, 1);
    const [next] = await pollJobs(t);
    assert.ok(next, "the next poll is a scheduled job");
    assert.ok(next.run_at.getTime() >= before + 60_000, "rescheduled for the delay_time the PENDING answer gave");
    assert.equal(next.attempts, 0);
    assert.equal(await available(t), 0);
    const view = await json<{ requests: { request_id: string; status: string; next_poll_at: string }[] }>(await t.request("/v1/awb/pool"));
    assert.equal(view.requests[0]?.request_id, req!.request_id);
    assert.equal(view.requests[0]?.status, "pending");
    assert.equal(Date.parse(view.requests[0]!.next_poll_at), next.run_at.getTime());

    await pair.control.advanceClock(120);
    await makeDue(t);
    await t.runJobs();
    const [done] = await requests(t);
    assert.deepEqual([done?.status, done?.received, done?.added, done?.polls, done?.next_poll_at], ["completed", 50, 50, 2, null]);
    assert.equal(await available(t), 50);
    assert.equal((await pollJobs(t)).length, 0);
    const sources = await t.database.sql<{ source: string; request_id: string; n: number }[]>`
      select source, request_id, count(*)::int as n from awb_numbers group by 1, 2`;
    assert.deepEqual([...sources], [{ source: "fresh", request_id: req!.request_id, n: 50 }]);
  });

  it("refills a drained pool automatically, asking once while a request is pending", async () => {
    const handed: string[] = [];
    for (;;) {
      const res = await t.request("/v1/awb/allocate", { method: "POST" });
      if (res.status === 503) break;
      handed.push((await json<{ awb_number: string }>(res)).awb_number);
    }
    assert.equal(handed.length, 50);
    await t.runJobs();
    let rows = await requests(t);
    assert.equal(rows.length, 2);
    assert.deepEqual([rows[1]!.status, rows[1]!.count], ["pending", 50]);

    // More triggers while it generates: the empty pool, the cron. Neither asks again.
    assert.equal((await t.request("/v1/awb/allocate", { method: "POST" })).status, 503);
    await t.database.sql`select graphile_worker.add_job('awb__replenish', '{"reason":"cron"}'::json, queue_name := 'awb', job_key := 'awb__replenish')`;
    await t.runJobs();
    rows = await requests(t);
    assert.equal(rows.length, 2, "no second request while one is pending");

    await pair.control.advanceClock(120);
    await makeDue(t);
    await t.runJobs();
    assert.equal(await available(t), 50);
    rows = await requests(t);
    assert.equal(rows[1]!.status, "completed");
    const all = await t.database.sql<{ awb_number: string }[]>`select awb_number from awb_numbers`;
    assert.equal(all.length, 100);
  });

  it("gives up after the maximum number of polls, and after the maximum time, recording why", async () => {
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 5 } })).status, 202);
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 6 } })).status, 202);
    await t.runJobs();
    const [a, b] = (await requests(t)).slice(-2);
    await t.database.sql`update awb_requests set polls = ${MAX_POLLS - 1} where id = ${a!.id}`;
    await t.database.sql`update awb_requests set created_at = now() - interval '3 hours' where id = ${b!.id}`;
    await makeDue(t);
    await t.runJobs();
    const [fa, fb] = (await requests(t)).slice(-2);
    assert.equal(fa?.status, "failed");
    assert.equal(fa?.last_error, `gave up after ${MAX_POLLS} polls: still PENDING`);
    assert.equal(fb?.status, "failed");
    assert.equal(fb?.last_error, "gave up after 1 polls: still PENDING");
    assert.equal((await pollJobs(t)).length, 0, "no more polls");
  });
});

describe("fresh mode failures", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "10", AWB_POOL_TARGET: "50", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("retries a poll answered 500, then stores the numbers", async () => {
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 5 } })).status, 202);
    await t.runJobs();
    await pair.control.advanceClock(5);
    await pair.control.addFault({ method: "GET", path: "/v1/clients/awb/", action: "status", status: 500, times: 1 });
    await makeDue(t);
    await t.runJobs();
    let [job] = await pollJobs(t);
    assert.equal(job?.attempts, 1, "failed once, retried by graphile-worker");
    assert.equal((await requests(t))[0]!.status, "pending");
    await makeDue(t);
    await t.runJobs();
    [job] = await pollJobs(t);
    assert.equal(job, undefined);
    const [req] = await requests(t);
    assert.deepEqual([req?.status, req?.added], ["completed", 5]);
  });

  it("records a permanent failure (the provider does not know the request)", async () => {
    const [row] = await t.database.sql<{ id: number }[]>`
      insert into awb_requests (mode, request_id, status, count) values ('fresh', 'no-such-request', 'pending', 5) returning id::int`;
    await t.database.sql`
      select graphile_worker.add_job('awb__poll', json_build_object('request', ${row!.id}::int), queue_name := 'awb')`;
    await t.runJobs();
    const failed = (await requests(t)).find((r) => r.id === row!.id);
    assert.equal(failed?.status, "failed");
    assert.match(failed?.last_error ?? "", /^client 404/);
    assert.equal((await pollJobs(t)).length, 0, "not retried");
  });

  it("never half-applies a poll: a failed transaction stores nothing, the retry stores every number", async () => {
    const sql = t.database.sql;
    await sql`create table awb_test_fail (x int)`;
    await sql`insert into awb_test_fail values (1)`;
    await sql.unsafe(`
      create function awb_test_fail_fn() returns trigger language plpgsql as $$
      begin
        if exists (select 1 from awb_test_fail) then raise exception 'injected failure'; end if;
        return new;
      end $$`);
    await sql`create trigger awb_test_fail_trg before update on awb_requests for each row when (new.status = 'completed') execute function awb_test_fail_fn()`;
    try {
      const before = await available(t);
      assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 8 } })).status, 202);
      await t.runJobs();
      const id = (await requests(t)).at(-1)!.id;
      await pair.control.advanceClock(5);
      await makeDue(t);
      await t.runJobs();
      let req = (await requests(t)).find((r) => r.id === id)!;
      assert.deepEqual([req.status, req.polls, req.received, req.added], ["pending", 0, 0, 0], "nothing recorded");
      assert.equal(await available(t), before, "and no number stored without its record");
      const [job] = await pollJobs(t);
      assert.equal(job?.attempts, 1);

      await sql`delete from awb_test_fail`;
      await makeDue(t);
      await t.runJobs();
      req = (await requests(t)).find((r) => r.id === id)!;
      assert.deepEqual([req.status, req.received, req.added], ["completed", 8, 8]);
      assert.equal(await available(t), before + 8, "the provider's numbers were not lost");
    } finally {
      await sql`drop trigger awb_test_fail_trg on awb_requests`;
      await sql`drop function awb_test_fail_fn()`;
      await sql`drop table awb_test_fail`;
    }
  });

  it("reads a PENDING answer that leaves awb_numbers out, or null, as no numbers yet, and a finished one without numbers as a failure", async () => {
    const poll = { method: "GET", path: "/v1/clients/awb/", action: "status", status: 200, times: 1 } as const;
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 6 } })).status, 202);
    await t.runJobs();
    const id = (await requests(t)).at(-1)!.id;
    for (const body of [{ status: "PENDING", retry_flag: true }, { status: "PENDING", retry_flag: true, awb_numbers: null }]) {
      await pair.control.addFault({ ...poll, body });
      await makeDue(t);
      await t.runJobs();
      const [job] = await pollJobs(t);
      assert.equal(job?.attempts, 0, `${JSON.stringify(body)} is an answer, not an error to retry`);
    }
    let req = (await requests(t)).find((r) => r.id === id)!;
    assert.deepEqual([req.status, req.polls, req.received], ["pending", 2, 0]);
    await pair.control.advanceClock(5);
    await makeDue(t);
    await t.runJobs();
    req = (await requests(t)).find((r) => r.id === id)!;
    assert.deepEqual([req.status, req.polls, req.received, req.added], ["completed", 3, 6, 6]);

    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 4 } })).status, 202);
    await t.runJobs();
    const next = (await requests(t)).at(-1)!.id;
    await pair.control.addFault({ ...poll, body: { status: "SUCCESS", retry_flag: false, awb_numbers: null } });
    await makeDue(t);
    await t.runJobs();
    const ended = (await requests(t)).find((r) => r.id === next)!;
    assert.deepEqual([ended.status, ended.last_error], ["failed", "provider finished with status SUCCESS and no numbers"]);
  });
});

describe("fresh mode: a long delay_time", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    // 15 minutes per request: longer than the 5 min cap of the backoff without a hint.
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 900, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "10", AWB_POOL_TARGET: "50", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("a PENDING answer's delay_time is waited in full, not cut to 5 min", async () => {
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST" })).status, 202);
    await t.runJobs();
    // Polled 100 s early: the provider answers PENDING, ready in about 800 s.
    await pair.control.advanceClock(100);
    await makeDue(t);
    const before = Date.now();
    await t.runJobs();
    const [req] = await requests(t);
    assert.deepEqual([req?.status, req?.polls], ["pending", 1]);
    const [next] = await pollJobs(t);
    const wait = next!.run_at.getTime() - before;
    assert.ok(wait >= 790_000, `the next poll waits the delay_time the provider sent (${Math.round(wait / 1000)} s)`);
    assert.equal(req!.next_poll_at?.getTime(), next!.run_at.getTime());
  });
});
