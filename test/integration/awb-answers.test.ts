/**
 * Malformed AWB answers from the provider, over real HTTP (emulator faults): values that
 * are no usable AWB number are never stored (so never handed out), numbers of another
 * shape than the documented one are, a number repeated within
 * one answer counts once, and what was left out shows on the request in GET /v1/awb/pool.
 * A fresh request whose answer was lost is shown, not forgotten.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { replenish } from "../../src/awb/topup.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

interface PoolView {
  available: number;
  requests: { id: number; mode: string; status: string; count: number; received: number; added: number; last_error: string | null }[];
}

async function pool(t: TestApp): Promise<PoolView> {
  const res = await t.request("/v1/awb/pool");
  assert.equal(res.status, 200);
  return (await res.json()) as PoolView;
}

async function stored(t: TestApp): Promise<string[]> {
  const rows = await t.database.sql<{ awb_number: string }[]>`select awb_number from awb_numbers order by awb_number`;
  return rows.map((r) => r.awb_number);
}

async function makeDue(t: TestApp): Promise<void> {
  await t.database.sql`
    select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier like 'awb\\_\\_%'), run_at := now())`;
}

const BAD_ANSWER = ["SF0000000001TST", "SF0000000001TST", " SF0000000002TST", "not-an-awb", "", "sf0000000003tst", "SF0000000004TST"];

describe("malformed AWB answers", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "1", AWB_POOL_TARGET: "2", AWB_MODE: "pool" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("pool mode: stores only well-formed numbers, each once, and names what it left out", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 200, body: { message: "ok", awb_numbers: BAD_ANSWER }, times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2 } })).status, 202);
    await t.runJobs();
    assert.deepEqual(await stored(t), ["SF0000000001TST", "SF0000000004TST"]);
    const [req] = (await pool(t)).requests;
    assert.deepEqual([req!.status, req!.received, req!.added], ["completed", 2, 2]);
    assert.match(req!.last_error ?? "", /4 not usable as AWB numbers, 8 to 40 capital letters and digits \(" SF0000000002TST", "not-an-awb", "", …\); 1 repeated within the answer/);
    // Nothing but a well-formed number is ever handed out.
    for (let i = 0; i < 2; i++) {
      const res = await t.request("/v1/awb/allocate", { method: "POST" });
      assert.equal(res.status, 200);
      assert.match(((await res.json()) as { awb_number: string }).awb_number, /^SF\d{10}[A-Z]{3}$/);
    }
  });

  it("pool mode: numbers of another shape than the documented one (a longer suffix, another prefix) are kept, not refused", async () => {
    await t.database.sql`delete from awb_numbers`;
    const other = ["SF0000000005ABCD", "XB20261126000042"];
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 200, body: { message: "ok", awb_numbers: other }, times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2 } })).status, 202);
    await t.runJobs();
    // (A top-up to the target may add numbers of the emulator's own after them.)
    const kept = await stored(t);
    assert.ok(other.every((n) => kept.includes(n)), kept.join(" "));
    const requests = (await pool(t)).requests.map((r) => [r.status, r.received, r.added, r.last_error]);
    assert.ok(requests.some((r) => JSON.stringify(r) === JSON.stringify(["completed", 2, 2, null])), JSON.stringify(requests));
  });

  it("pool mode: an answer with numbers left out ends the top-up, instead of asking for ever more numbers", async () => {
    const calls = async () => (await pair.control.requests()).filter((r) => r.path.includes("generate_marketplace_awb")).length;
    await t.database.sql`select graphile_worker.complete_jobs(array(select id from graphile_worker.jobs))`;
    const before = await calls();
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 200, body: { message: "ok", awb_numbers: ["SF12TST", "SF13TST"] } });
    try {
      assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2 } })).status, 202);
      await t.runJobs();
    } finally {
      await pair.control.send("DELETE", "/faults");
    }
    assert.equal((await calls()) - before, 1, "one call, not six ever larger ones");
    const [req] = (await pool(t)).requests;
    assert.deepEqual([req!.status, req!.received, req!.added], ["completed", 0, 0]);
    assert.match(req!.last_error ?? "", /2 not usable as AWB numbers/);
  });

  it("fresh mode: the same screening, and an answer with no usable number fails the request saying why", async () => {
    await t.database.sql`delete from awb_numbers`;
    const poll = { method: "GET", path: "/v1/clients/awb/", action: "status", status: 200, times: 1 } as const;
    for (const [count, body] of [
      [7, { status: "COMPLETED", retry_flag: false, awb_numbers: ["SF0000000009TST", "SF0000000009TST", "SF12TST"] }],
      [3, { status: "COMPLETED", retry_flag: false, awb_numbers: ["x", "  "] }],
    ] as const) {
      assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count, mode: "fresh" } })).status, 202);
      await t.runJobs();
      await pair.control.advanceClock(5);
      await pair.control.addFault({ ...poll, body });
      await makeDue(t);
      await t.runJobs();
    }
    const [bad, partly] = (await pool(t)).requests;
    assert.deepEqual([partly!.mode, partly!.status, partly!.received, partly!.added], ["fresh", "completed", 1, 1]);
    assert.match(partly!.last_error ?? "", /1 not usable as AWB numbers.*"SF12TST".*; 1 repeated within the answer/);
    assert.deepEqual([bad!.status, bad!.received, bad!.added], ["failed", 0, 0]);
    assert.match(bad!.last_error ?? "", /^provider finished with status COMPLETED and no numbers \(.*2 not usable as AWB numbers/);
    const numbers = await stored(t);
    assert.ok(numbers.includes("SF0000000009TST"));
    for (const n of numbers) assert.match(n, /^SF\d{10}[A-Z]{3}$/, "only well-formed numbers stored");
  });

  it("fresh mode: numbers the pool already held from elsewhere stay as they were, and the request names them", async () => {
    await t.database.sql`update awb_numbers set state = 'allocated', allocated_at = now(), client_order_id = 'held-1' where awb_number = 'SF0000000009TST'`;
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2, mode: "fresh" } })).status, 202);
    await t.runJobs();
    await pair.control.advanceClock(5);
    await pair.control.addFault({
      method: "GET",
      path: "/v1/clients/awb/",
      action: "status",
      status: 200,
      times: 1,
      body: { status: "COMPLETED", retry_flag: false, awb_numbers: ["SF0000000009TST", "SF0000000010TST"] },
    });
    await makeDue(t);
    await t.runJobs();
    const [req] = (await pool(t)).requests;
    assert.deepEqual([req!.status, req!.received, req!.added], ["completed", 2, 1]);
    assert.equal(req!.last_error, "the provider's answer had 1 numbers the pool already held from elsewhere (kept as they were: an allocated one stays allocated)");
    const [row] = await t.database.sql<{ state: string; client_order_id: string }[]>`select state, client_order_id from awb_numbers where awb_number = 'SF0000000009TST'`;
    assert.deepEqual({ ...row }, { state: "allocated", client_order_id: "held-1" });
  });
});

describe("a fresh request whose answer was lost", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "1", AWB_POOL_TARGET: "5", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  const jobs = async () =>
    await t.database.sql<{ task: string; attempts: number }[]>`
      select task_identifier as task, attempts from graphile_worker.jobs where task_identifier like 'awb\\_\\_%' order by id`;

  it("accepted by the provider but the answer lost: shown as failed, saying its numbers cannot be collected; the retry asks again", async () => {
    await pair.control.addFault({ method: "POST", path: "/v1/clients/awb/", action: "close_after", times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 4 } })).status, 202);
    await t.runJobs();
    const emulated = (await pair.control.get<{ requests: { request_id: string }[] }>("/awb")).body.requests;
    assert.equal(emulated.length, 1, "the provider did accept the request");
    let [lost] = (await pool(t)).requests;
    assert.equal(lost?.status, "failed");
    assert.match(lost?.last_error ?? "", /^the provider's answer was lost, so its request_id is unknown and any numbers it generates cannot be collected: /);
    assert.equal((await jobs())[0]?.attempts, 1, "the top-up is retried");

    await makeDue(t);
    await t.runJobs();
    const requests = (await pool(t)).requests;
    assert.deepEqual(requests.map((r) => r.status), ["pending", "failed"]);
    [lost] = requests.slice(1);
    assert.match(lost?.last_error ?? "", /answer was lost/, "still shown");
  });

  it("a call that certainly did nothing leaves no request behind", async () => {
    const before = (await pool(t)).requests.length;
    await pair.control.addFault({ method: "POST", path: "/v1/clients/awb/", action: "status", status: 503, times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2 } })).status, 202);
    await t.runJobs();
    assert.equal((await pool(t)).requests.length, before);
  });

  it("a top-up stopped between the provider's answer and storing it: the next top-up shows it failed and is not held back by it", async () => {
    await t.database.sql`update awb_requests set status = 'completed' where status = 'pending'`;
    await t.database.sql`select graphile_worker.complete_jobs(array(select id from graphile_worker.jobs))`;
    // What the stopped run left: the request recorded as sent, no request_id.
    const [dead] = await t.database.sql<{ id: number }[]>`
      insert into awb_requests (mode, status, count) values ('fresh', 'pending', 500) returning id::int`;
    await t.database.sql`delete from awb_numbers`;
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST" })).status, 202);
    await t.runJobs();
    const requests = (await pool(t)).requests;
    const row = requests.find((r) => r.id === dead!.id);
    assert.equal(row?.status, "failed");
    assert.match(row?.last_error ?? "", /answer was lost.*\(the top-up stopped before storing it\)/);
    const [fresh] = requests;
    assert.deepEqual([fresh?.status, fresh?.mode], ["pending", "fresh"], "a new request for the target");
    assert.equal((await t.database.sql`select 1 from awb_requests where id > ${dead!.id} and count = 5`).length, 1);
  });
});

describe("a fresh request whose polls keep failing", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "0", AWB_POOL_TARGET: "5", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  const pollJobs = async () =>
    await t.database.sql<{ attempts: number; max_attempts: number }[]>`
      select attempts, max_attempts from graphile_worker.jobs where task_identifier = 'awb__poll' order by id`;

  it("is still collected after the poll job used up its attempts within the give-up window", async () => {
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 3 } })).status, 202);
    await t.runJobs();
    const [req] = (await pool(t)).requests;
    assert.equal(req?.status, "pending");
    await pair.control.advanceClock(5);
    // The poll job's last attempt (as after half an hour of provider trouble) fails too.
    await t.database.sql`update graphile_worker._private_jobs set max_attempts = 1 where id in (select id from graphile_worker.jobs where task_identifier = 'awb__poll')`;
    await pair.control.addFault({ method: "GET", path: "/v1/clients/awb/", action: "status", status: 502, times: 1 });
    await makeDue(t);
    await t.runJobs();
    let [after] = (await pool(t)).requests;
    assert.equal(after?.status, "pending", "not given up: the batch can still be collected");
    const jobs = await pollJobs();
    assert.equal(jobs.length, 1, "a new poll job");
    assert.equal(jobs[0]!.attempts, 0);
    await makeDue(t);
    await t.runJobs();
    [after] = (await pool(t)).requests;
    assert.deepEqual([after?.status, after?.received, after?.added], ["completed", 3, 3]);
  });

  it("is given up once the give-up window has passed", async () => {
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 2 } })).status, 202);
    await t.runJobs();
    const [pending] = (await pool(t)).requests;
    assert.equal(pending?.status, "pending");
    await t.database.sql`update awb_requests set created_at = now() - interval '3 hours' where id = ${pending!.id}`;
    await t.database.sql`update graphile_worker._private_jobs set max_attempts = 1 where id in (select id from graphile_worker.jobs where task_identifier = 'awb__poll')`;
    await pair.control.addFault({ method: "GET", path: "/v1/clients/awb/", action: "status", status: 502, times: 1 });
    await makeDue(t);
    await t.runJobs();
    const req = (await pool(t)).requests.find((r) => r.id === pending!.id);
    assert.equal(req?.status, "failed");
    assert.match(req?.last_error ?? "", /^gave up after 1 attempts: server 502/);
  });
});

describe("a fresh request whose answer was lost on the top-up's last attempt", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "1", AWB_POOL_TARGET: "5", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("shows as one failed request, not as that request and a second one that was never sent", async () => {
    await pair.control.addFault({ method: "POST", path: "/v1/clients/awb/", action: "close_after", times: 1 });
    const deps = { sql: t.database.sql, provider: pair.client, settings: t.config.awb, log: t.log };
    await assert.rejects(replenish(deps, { reason: "manual", count: 4, mode: "fresh", reschedules: 0 }, { lastAttempt: true, attempts: 8, key: null }));
    assert.equal((await pair.control.get<{ requests: unknown[] }>("/awb")).body.requests.length, 1, "one request sent");
    const requests = (await pool(t)).requests;
    assert.equal(requests.length, 1, JSON.stringify(requests));
    assert.equal(requests[0]?.status, "failed");
    assert.match(requests[0]?.last_error ?? "", /answer was lost/);
  });
});

describe("a fresh request answered after a top-up took it for lost", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, emulator: { awb: { baseDelaySeconds: 1, secondsPerThousand: 0, secondsPerPendingRequest: 0 } } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "1", AWB_POOL_TARGET: "5", AWB_MODE: "fresh" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("is pending again and polled, its numbers collected, instead of staying failed with its request_id known", async () => {
    // A slow answer: meanwhile its runner is replaced and its job unlocked (supervisor.ts),
    // and another top-up runs and takes the request, sent but unanswered, for lost.
    await pair.control.addFault({ method: "POST", path: "/v1/clients/awb/", action: "delay", delay_ms: 4000, times: 1 });
    const deps = { sql: t.database.sql, provider: pair.client, settings: t.config.awb, log: t.log };
    const job = { lastAttempt: false, attempts: 1, key: null };
    const first = replenish(deps, { reason: "manual", count: 3, mode: "fresh", reschedules: 0 }, job);
    let sent: { id: number }[] = [];
    for (let i = 0; sent.length === 0; i++) {
      assert.ok(i < 200, "the request is recorded before it is sent");
      await new Promise((r) => setTimeout(r, 10));
      sent = await t.database.sql<{ id: number }[]>`select id::int from awb_requests where mode = 'fresh' and request_id is null`;
    }
    const id = sent[0]!.id;
    await replenish({ ...deps, provider: undefined }, { reason: "cron", reschedules: 0 }, job);
    const guessed = (await pool(t)).requests.find((r) => r.id === id);
    assert.equal(guessed?.status, "failed", "taken for lost while the answer was out (the race was staged)");

    await first;
    const [row] = await t.database.sql<{ status: string; request_id: string | null; last_error: string | null }[]>`
      select status, request_id, last_error from awb_requests where id = ${id}`;
    assert.equal(row?.status, "pending");
    assert.notEqual(row?.request_id, null);
    assert.equal(row?.last_error, null);
    await pair.control.advanceClock(5);
    await makeDue(t);
    await t.runJobs();
    const done = (await pool(t)).requests.find((r) => r.id === id);
    assert.deepEqual([done?.status, done?.received, done?.added], ["completed", 3, 3]);
  });
});
