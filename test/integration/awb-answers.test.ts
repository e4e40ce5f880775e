/**
 * Malformed AWB answers from the provider, over real HTTP (emulator faults): numbers not
 * of the documented form are never stored (so never handed out), a number repeated within
 * one answer counts once, and what was left out shows on the request in GET /v1/awb/pool.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

interface PoolView {
  available: number;
  requests: { id: number; mode: string; status: string; received: number; added: number; last_error: string | null }[];
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
    assert.match(req!.last_error ?? "", /4 not of the form SF \+ 10 digits \+ 3 letters \(" SF0000000002TST", "not-an-awb", "", …\); 1 repeated within the answer/);
    // Nothing but a well-formed number is ever handed out.
    for (let i = 0; i < 2; i++) {
      const res = await t.request("/v1/awb/allocate", { method: "POST" });
      assert.equal(res.status, 200);
      assert.match(((await res.json()) as { awb_number: string }).awb_number, /^SF\d{10}[A-Z]{3}$/);
    }
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
    assert.match(partly!.last_error ?? "", /1 not of the form .*"SF12TST".*; 1 repeated within the answer/);
    assert.deepEqual([bad!.status, bad!.received, bad!.added], ["failed", 0, 0]);
    assert.match(bad!.last_error ?? "", /^provider finished with status COMPLETED and no numbers \(.*2 not of the form/);
    const numbers = await stored(t);
    assert.ok(numbers.includes("SF0000000009TST"));
    for (const n of numbers) assert.match(n, /^SF\d{10}[A-Z]{3}$/, "only well-formed numbers stored");
  });
});
