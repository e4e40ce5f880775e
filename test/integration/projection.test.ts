import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { rebuild } from "../../src/projection/rebuild.ts";
import { decodeState } from "../../src/projection/state.ts";
import { CALLBACK_SECRET, createTestApp, shuffle } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

interface OrderBody {
  client_order_id: string;
  svc_order_id: string | null;
  status: string | null;
  provider_status: string | null;
  event_count: number;
  rider: { id: string | null; name: string | null; contact: string | null; latitude: number | null; longitude: number | null } | null;
  track_url: string | null;
}

async function order(path: string): Promise<OrderBody> {
  const res = await t.request(path);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as OrderBody;
}

const LIFECYCLE = [
  ["ALLOTTED", "allot_time"],
  ["ARRIVED", "arrival_time"],
  ["COLLECTED", "dispatch_time"],
  ["ARRIVED_CUSTOMER_DOORSTEP", "customer_doorstep_arrival_time"],
  ["DELIVERED", "delivery_time"],
] as const;

describe("projection through the whole pipeline", () => {
  it("1,000 callbacks for 100 orders, shuffled, 10% duplicates: every order at its rank-maximal status with exact counts", async () => {
    const bodies: Record<string, unknown>[] = [];
    const expected = new Map<string, { status: string; events: number }>();
    for (let o = 0; o < 100; o++) {
      const coid = `BULK-${o}`;
      // Each order gets a prefix of the lifecycle (1..5 steps), some end cancelled, plus locations.
      const steps = 1 + (o % 5);
      const cancelled = o % 7 === 0;
      let n = 0;
      for (let s = 0; s < steps; s++) {
        const [st, field] = LIFECYCLE[s]!;
        bodies.push({ sfx_order_id: 50_000 + o, client_order_id: coid, order_status: st, [field]: `2026-11-22T10:${String(10 + s).padStart(2, "0")}:00Z`, rider_name: `Rider ${o}` });
        n++;
      }
      if (cancelled) {
        bodies.push({ sfx_order_id: 50_000 + o, client_order_id: coid, order_status: "CANCELLED", cancel_time: "2026-11-22T10:30:00Z" });
        n++;
      }
      while (n < 10) {
        bodies.push({ sfx_order_id: 50_000 + o, client_order_id: coid, rider_latitude: 12 + n / 100, rider_longitude: 77 + o / 1000, timestamp: `2026-11-22T09:${String(n).padStart(2, "0")}:00Z` });
        n++;
      }
      const top = LIFECYCLE[steps - 1]![0];
      const canonical = top === "ARRIVED_CUSTOMER_DOORSTEP" ? "CUSTOMER_DOOR_STEP" : top;
      // Cancelled at 10:30 is after every step; a DELIVERED order stays DELIVERED.
      expected.set(coid, { status: cancelled && canonical !== "DELIVERED" ? "CANCELLED" : canonical, events: 10 });
    }
    assert.equal(bodies.length, 1000);
    const duplicates = shuffle([...bodies], 7).slice(0, 100);
    const all = shuffle([...bodies, ...duplicates], 11);

    const results = await Promise.all(
      all.map(async (b) => {
        const res = await t.callback(b);
        return { status: res.status, body: (await res.json()) as { duplicate: boolean; event_id: string } };
      }),
    );
    assert.ok(results.every((r) => r.status === 200));
    // Whichever copy came first, exactly one of each pair is the duplicate, with the same id.
    assert.equal(results.filter((r) => r.body.duplicate).length, 100);
    assert.equal(new Set(results.map((r) => r.body.event_id)).size, 1000);
    // Send the duplicates once more, sequentially, and read the answers.
    for (const d of duplicates.slice(0, 20)) {
      const res = (await (await t.callback(d)).json()) as { duplicate: boolean };
      assert.equal(res.duplicate, true);
    }
    const [{ n }] = (await t.database.sql`select count(*)::int as n from order_events where client_order_id like 'BULK-%'`) as unknown as [{ n: number }];
    assert.equal(n, 1000);

    await t.runJobs();
    for (const [coid, want] of expected) {
      const o = await order(`/v1/orders/${coid}`);
      assert.equal(o.status, want.status, coid);
      assert.equal(o.event_count, want.events, coid);
      assert.equal(o.rider?.name, `Rider ${coid.slice(5)}`);
    }
  });

  it("merges an order first seen by only one id once an event links both", async () => {
    await t.callback({ svc_order_id: "M-SVC", order_status: "ALLOTTED", rider_name: "R1", allot_time: "2026-11-22T08:00:00Z" });
    await t.callback({ client_order_id: "M-COID", order_status: "PENDING", event_time: "2026-11-22T07:00:00Z" });
    await t.runJobs();
    assert.equal((await order("/v1/orders/by-svc-id/M-SVC")).client_order_id, null);
    assert.equal((await order("/v1/orders/M-COID")).svc_order_id, null);

    await t.callback({ svc_order_id: "M-SVC", client_order_id: "M-COID", order_status: "ARRIVED", arrival_time: "2026-11-22T08:10:00Z" });
    await t.runJobs();
    const byCoid = await order("/v1/orders/M-COID");
    const bySvc = await order("/v1/orders/by-svc-id/M-SVC");
    assert.deepEqual(byCoid, bySvc);
    assert.equal(byCoid.svc_order_id, "M-SVC");
    assert.equal(byCoid.status, "ARRIVED");
    assert.equal(byCoid.event_count, 3);
    assert.equal(byCoid.rider?.name, "R1");
    const rows = await t.database.sql`select id from orders where svc_order_id = 'M-SVC' or client_order_id = 'M-COID'`;
    assert.equal(rows.length, 1);
  });

  it("when a row placed through tracklane merges with an older row from callbacks, the placed row survives with its command", async () => {
    // The provider's id alone first: a row of its own (external), older than the placed one.
    assert.equal((await t.callback({ svc_order_id: "SURV-SVC", order_status: "ALLOTTED", allot_time: "2026-11-22T08:00:00Z" })).status, 200);
    await t.runJobs();
    const body = placeOrderBody({ clientOrderId: "SURV-1" });
    assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await t.runJobs(); // no provider here: the place ends failed, its row stays tracklane's
    const rowsOf = () => t.database.sql<{ id: number; placement_state: string }[]>`
      select id::int, placement_state from orders where svc_order_id = 'SURV-SVC' or client_order_id = 'SURV-1' order by id`;
    const [external, placed] = await rowsOf();
    assert.deepEqual([external!.placement_state, placed!.placement_state], ["external", "failed"]);
    assert.ok(external!.id < placed!.id);

    assert.equal((await t.callback({ svc_order_id: "SURV-SVC", client_order_id: "SURV-1", order_status: "ARRIVED", arrival_time: "2026-11-22T08:10:00Z" })).status, 200);
    await t.runJobs();
    const rows = await rowsOf();
    assert.deepEqual(rows.map((r) => r.id), [placed!.id], "the row placed through tracklane survives, not the older one");
    assert.notEqual(rows[0]!.placement_state, "external");
    const commands = await t.database.sql<{ kind: string }[]>`select kind from commands where order_id = ${placed!.id}`;
    assert.deepEqual(commands.map((c) => c.kind), ["place"]);
  });

  it("writes awkward values into the order row exactly: quotes, backslashes, braces, commas, newlines, the text NULL", async () => {
    // The projection's write sends each column as an array, and each row's provider ids as
    // a text[] literal inside one: every character that means something there, in each.
    const svcA = 'Q"1\\x,{y}';
    const svcB = "NULL";
    const name = 'Ravi "R" \\ {Kumar},\nJr.';
    await t.callback({
      client_order_id: "AWK-1", svc_order_id: svcA, order_status: "ALLOTTED", allot_time: "2026-11-22T08:00:00Z",
      rider_name: name, rider_contact: "NULL", rider_id: '{"id":7}', track_url: "https://track.example/a,b{c}\\d",
    });
    await t.callback({ client_order_id: "AWK-1", svc_order_id: svcB, order_status: "ARRIVED", arrival_time: "2026-11-22T08:10:00.001Z" });
    await t.callback({ svc_order_id: svcA, rider_latitude: 12.9715987654321, rider_longitude: -0.000001, timestamp: "2026-11-22T08:11:00.987Z" }, { path: `/callbacks/${CALLBACK_SECRET}/location` });
    await t.runJobs();
    const o = (await order("/v1/orders/AWK-1")) as OrderBody & { svc_order_ids: string[]; status_at: string | null };
    assert.deepEqual([...o.svc_order_ids].sort(), [svcA, svcB].sort());
    assert.equal(o.status, "ARRIVED");
    assert.equal(o.status_at, "2026-11-22T08:10:00.001Z"); // instants to the millisecond
    assert.equal(o.event_count, 3);
    assert.equal(o.track_url, "https://track.example/a,b{c}\\d");
    assert.deepEqual(o.rider, { id: '{"id":7}', name, contact: "NULL", latitude: 12.9715987654321, longitude: -0.000001, location_at: "2026-11-22T08:11:00.987Z" });
    // The stored fold state (the states travel as one text, a line each) reads back whole.
    const [row] = await t.database.sql<{ projection_state: string }[]>`select projection_state from orders where client_order_id = 'AWK-1'`;
    const state = decodeState(row!.projection_state);
    assert.equal(state?.riderName?.value, name);
    assert.equal(state?.eventCount, 3);
  });

  it("keeps unknown provider strings in the timeline without changing the status", async () => {
    await t.callback({ client_order_id: "U-1", order_status: "COLLECTED", dispatch_time: "2026-11-22T09:00:00Z" });
    await t.callback({ client_order_id: "U-1", order_status: "SOMETHING_NEW", event_time: "2026-11-22T09:05:00Z" });
    await t.runJobs();
    const o = await order("/v1/orders/U-1");
    assert.equal(o.status, "COLLECTED");
    assert.equal(o.provider_status, "COLLECTED");
    const timeline = (await (await t.request("/v1/orders/U-1/events")).json()) as { items: { status: string | null; provider_status: string }[] };
    assert.deepEqual(
      timeline.items.map((e) => [e.status, e.provider_status]),
      [
        ["COLLECTED", "COLLECTED"],
        [null, "SOMETHING_NEW"],
      ],
    );
  });

  it("once terminal, a later event does not change the status", async () => {
    await t.callback({ client_order_id: "T-1", order_status: "DELIVERED", delivery_time: "2026-11-22T09:00:00Z" });
    await t.callback({ client_order_id: "T-1", order_status: "CANCELLED", cancel_time: "2026-11-22T09:30:00Z" });
    await t.callback({ client_order_id: "T-1", order_status: "ALLOTTED", allot_time: "2026-11-22T09:40:00Z" });
    await t.runJobs();
    const o = await order("/v1/orders/T-1");
    assert.equal(o.status, "DELIVERED");
    assert.equal(o.event_count, 3);
  });

  it("npm run rebuild re-derives identical rows, and repairs damaged ones", async () => {
    const snapshot = async () => t.database.sql`select * from orders order by id`;
    const before = await snapshot();
    assert.ok(before.length >= 100);
    const untouched = await rebuild(t.database.sql);
    assert.equal(untouched.changed, 0);
    assert.deepEqual(await snapshot(), before);

    // Damage some projections, and lose some rows entirely.
    await t.database.sql`update orders set status = 'CREATED', rider_name = null, event_count = 0 where client_order_id like 'BULK-1%'`;
    await t.database.sql`delete from orders where client_order_id like 'BULK-2%'`;
    const repaired = await rebuild(t.database.sql);
    assert.ok(repaired.changed >= 11 + 11, `changed ${repaired.changed}`);
    const after = await snapshot();
    // finished_at is tracklane's clock, like updated_at: a row lost and derived again is
    // seen finishing by the rebuild (a damaged row keeps its own, as the untouched run shows).
    const strip = (rows: typeof before) =>
      rows
        .map(({ id: _id, updated_at: _u, finished_at: _f, ...rest }) => rest)
        .sort((a, b) => String(a.client_order_id).localeCompare(String(b.client_order_id)));
    assert.deepEqual(strip(after), strip(before));
  });
});
