/**
 * The incremental projection (src/projection/project.ts): a drain merges new events into
 * the state stored on the order row, falls back to a full derivation where it must, and
 * whichever path, whatever the concurrency, every row ends equal to the fold of the log
 * (test/helpers/oracle.ts), with each event counted once.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { placeOrder } from "../../src/commands/service.ts";
import { createDrainer } from "../../src/projection/queue.ts";
import { isConflict } from "../../src/projection/project.ts";
import { rebuild } from "../../src/projection/rebuild.ts";
import { decodeState } from "../../src/projection/state.ts";
import { createTestApp, shuffle } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { random } from "../helpers/load.ts";
import { assertOrdersEqualLog } from "../helpers/oracle.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => t.close());

const deps = () => ({ sql: t.database.sql, databaseUrl: t.testDb.url, log: t.log, metrics: t.metrics });
const queued = async () => (await t.database.sql<{ n: number }[]>`select count(*)::int as n from projection_queue`)[0]!.n;
const row = async (coid: string) => {
  const [r] = await t.database.sql<{ event_count: number; status: string | null; projection_state: string | null }[]>`
    select event_count, status, projection_state from orders where client_order_id = ${coid}`;
  return r && { event_count: r.event_count, status: r.status, state: decodeState(r.projection_state) };
};

const at = (minute: number) => `2026-11-22T10:${String(minute).padStart(2, "0")}:00Z`;
async function send(body: Record<string, unknown>): Promise<void> {
  const res = await t.callback(body);
  assert.equal(res.status, 200, await res.text());
}

beforeEach(async () => {
  await t.runJobs();
  assert.equal(await queued(), 0);
});

describe("incremental projection", () => {
  it("merges new events into the row's stored state instead of re-deriving the order; rebuild repairs a damaged state", async () => {
    const ids = { svc_order_id: "PI-S1", client_order_id: "PI-A" };
    await send({ ...ids, order_status: "ALLOTTED", allot_time: at(1), rider_id: "R1" });
    for (let m = 2; m < 6; m++) await send({ ...ids, rider_latitude: 12 + m / 100, rider_longitude: 77, timestamp: at(m) });
    await t.runJobs();
    assert.equal((await row("PI-A"))!.event_count, 5);
    await assertOrdersEqualLog(t.database.sql);

    // A state that disagrees with the log: only a merge into it can produce 1001.
    await t.database.sql`update orders set projection_state = jsonb_set(projection_state::jsonb, '{n}', '1000')::text where client_order_id = 'PI-A'`;
    await send({ ...ids, order_status: "COLLECTED", dispatch_time: at(7) });
    await t.runJobs();
    const merged = await row("PI-A");
    assert.deepEqual([merged!.event_count, merged!.state?.eventCount, merged!.status], [1001, 1001, "COLLECTED"]);

    assert.equal((await rebuild(t.database.sql)).changed, 1);
    assert.equal((await row("PI-A"))!.event_count, 6);
    await assertOrdersEqualLog(t.database.sql);

    // Without a state (a row from before it, say) the next event derives the order in full.
    await t.database.sql`update orders set projection_state = null, event_count = 0 where client_order_id = 'PI-A'`;
    await send({ ...ids, rider_latitude: 12.5, rider_longitude: 77, timestamp: at(8) });
    await t.runJobs();
    const after = await row("PI-A");
    assert.equal(after!.event_count, 7);
    assert.equal(after!.state?.eventCount, 7);
    await assertOrdersEqualLog(t.database.sql);
  });

  it("an order placed through tracklane (a row without a state) is derived once, then merged", async () => {
    const body = placeOrderBody({ clientOrderId: "PI-PLACED" });
    await placeOrder(t.database.sql, body);
    assert.equal((await row("PI-PLACED"))!.state, null);
    await t.runJobs();
    assert.equal((await row("PI-PLACED"))!.state?.eventCount, 1);
    await send({ client_order_id: "PI-PLACED", svc_order_id: "PI-SP", order_status: "ALLOTTED", allot_time: at(30) });
    await send({ svc_order_id: "PI-SP", rider_latitude: 12.1, rider_longitude: 77.1, timestamp: at(31) });
    await t.runJobs();
    const r = await row("PI-PLACED");
    assert.equal(r!.event_count, 3);
    assert.equal(r!.status, "ALLOTTED");
    await assertOrdersEqualLog(t.database.sql);
  });

  it("a rebuild with no worker running folds the queued events too, leaving nothing to merge twice", async () => {
    for (let o = 0; o < 5; o++) {
      const ids = { svc_order_id: `PI-RS${o}`, client_order_id: `PI-R${o}` };
      await send({ ...ids, order_status: "ARRIVED", arrival_time: at(10) });
      await send({ ...ids, rider_latitude: 12, rider_longitude: 77, timestamp: at(11) });
    }
    assert.equal(await queued(), 10);
    await rebuild(t.database.sql);
    assert.equal(await queued(), 0);
    await assertOrdersEqualLog(t.database.sql);
    const snapshot = async () => t.database.sql`select * from orders order by id`;
    const before = await snapshot();
    await t.runJobs(); // the flushes' drain jobs find nothing left
    assert.deepEqual(await snapshot(), before);
  });

  it("an order whose provider id changed converges, also when one batch merges into its row and derives it in full", async () => {
    // The provider names one client order by two svc ids in turn: the row shows one of
    // them, and an event carrying only the other finds no row and derives the order from
    // the log, reaching the row through the client id.
    await send({ svc_order_id: "PI-OLD", client_order_id: "PI-MOVED", order_status: "ALLOTTED", allot_time: at(40) });
    await t.runJobs();
    await send({ svc_order_id: "PI-NEW", client_order_id: "PI-MOVED", order_status: "ARRIVED", arrival_time: at(41) });
    await t.runJobs();
    // One batch: a client-id event (merged into the row's state) and an old-svc-id event
    // (derived in full). The merge must not overwrite the derivation.
    await send({ client_order_id: "PI-MOVED", rider_latitude: 12.3, rider_longitude: 77.3, timestamp: at(42) });
    await send({ svc_order_id: "PI-OLD", order_status: "DISPATCHED", dispatch_time: at(43) });
    assert.equal(await queued(), 2);
    await createDrainer(deps(), { batchMax: 500, loops: 1 }).drain();
    const r = await row("PI-MOVED");
    assert.equal(r!.event_count, 4);
    assert.equal(r!.status, "COLLECTED");
    await assertOrdersEqualLog(t.database.sql);
  });

  it("concurrent drains in small batches and concurrent rebuilds, over split and linked ids, agree with the log", async () => {
    const rand = random(7);
    const bodies: Record<string, unknown>[] = [];
    const statuses = ["ALLOTTED", "ARRIVED", "DISPATCHED", "ARRIVED_CUSTOMER_DOORSTEP", "DELIVERED", "Cancelled", "RIDER_REASSIGNED"];
    for (let o = 0; o < 24; o++) {
      // Each event names the order by its svc id, its client id, or both: rows start apart
      // and merge when a linking event is projected.
      const idsOf = () => {
        const r = rand();
        return r < 0.3 ? { svc_order_id: `PI-XS${o}` } : r < 0.6 ? { client_order_id: `PI-X${o}` } : { svc_order_id: `PI-XS${o}`, client_order_id: `PI-X${o}` };
      };
      for (let k = 0; k < 14; k++) {
        // Few distinct minutes: many ties, settled by dedupe keys.
        const minute = 20 + Math.floor(rand() * 6);
        if (rand() < 0.4) {
          bodies.push({ ...idsOf(), order_status: statuses[Math.floor(rand() * statuses.length)], event_time: at(minute), n: k });
        } else {
          bodies.push({ ...idsOf(), rider_id: `R${Math.floor(rand() * 3)}`, rider_latitude: 12 + rand(), rider_longitude: 77, timestamp: at(minute), n: k });
        }
      }
    }
    shuffle(bodies, 11);

    let sending = true;
    let conflicts = 0;
    const drainers = Array.from({ length: 4 }, () => createDrainer(deps(), { batchMax: 3, loops: 1 }));
    const retrying = async (work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (err) {
        // graphile-worker would retry the job; so does this loop.
        if (!isConflict(err)) throw err;
        conflicts++;
      }
    };
    const drainLoop = async (d: (typeof drainers)[number]) => {
      while (sending || (await queued()) > 0) {
        await retrying(() => d.drain());
        await new Promise((r) => setTimeout(r, 1));
      }
    };
    const rebuildLoop = async () => {
      while (sending) {
        await retrying(() => rebuild(t.database.sql));
        await new Promise((r) => setTimeout(r, 20));
      }
    };
    const loops = [...drainers.map(drainLoop), rebuildLoop()];
    for (let i = 0; i < bodies.length; i += 8) await Promise.all(bodies.slice(i, i + 8).map(send));
    sending = false;
    await Promise.all(loops);

    assert.equal(await queued(), 0);
    const orders = await assertOrdersEqualLog(t.database.sql);
    assert.equal(orders, 24 + 8, "24 orders here, 8 from the tests before");
    const [counts] = await t.database.sql<{ events: number; counted: number }[]>`
      select (select count(*) from order_events)::int as events, (select sum(event_count) from orders)::int as counted`;
    assert.equal(counts!.counted, counts!.events, "every event counted exactly once");
    t.log.info({ conflicts }, "concurrent projection conflicts retried");
  });
});
