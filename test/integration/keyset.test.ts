/**
 * Pages that an index serves (docs/scale.md): an order's timeline across both of its ids,
 * paged with cursors, every event once and in order; the order lists' filters read in the
 * list's own order (no sort); `?updated_after=` through the hour column; and order writes
 * that leave indexed columns alone are HOT updates.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

/**
 * The plan of `query` (constant text) when PostgreSQL may not scan the whole, tiny table:
 * whether an index gives the rows in the query's order is what shows then (a Sort if not).
 */
async function plan(query: string): Promise<string> {
  return await t.database.sql.begin(async (tx) => {
    await tx`set local enable_seqscan = off`;
    await tx`set local enable_bitmapscan = off`;
    const rows = await tx.unsafe<{ "QUERY PLAN": string }[]>(`explain ${query}`);
    return rows.map((r) => r["QUERY PLAN"]).join("\n");
  });
}

const json = async <T>(res: Response): Promise<T> => {
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as T;
};

interface EventPage {
  items: { id: string; occurred_at: string }[];
  next_cursor: string | null;
}

describe("an order's timeline", () => {
  it("pages through events known by either id (and by both) in time order, each once, whatever the page size", async () => {
    // Statuses with both ids, locations with only the provider's id, and one with only the merchant's.
    const at = (min: number) => new Date(Date.UTC(2026, 10, 23, 10, min)).toISOString();
    const sent: string[] = [];
    for (const [i, status] of ["ALLOTTED", "ARRIVED", "DISPATCHED"].entries()) {
      await t.callback({ client_order_id: "KS-1", svc_order_id: "660001", order_status: status, timestamp: at(i * 10) });
      sent.push(at(i * 10));
    }
    for (let i = 0; i < 5; i++) {
      await t.callback({ svc_order_id: "660001", rider_latitude: 12.9 + i / 100, rider_longitude: 77.6, timestamp: at(i * 10 + 5) });
      sent.push(at(i * 10 + 5));
    }
    await t.callback({ client_order_id: "KS-1", order_status: "DELIVERED", timestamp: at(55) });
    sent.push(at(55));
    // Two events at the same instant: the id breaks the tie.
    await t.callback({ svc_order_id: "660001", rider_latitude: 13.5, rider_longitude: 77.6, timestamp: at(55) });
    sent.push(at(55));
    await t.runJobs();
    const expected = sent.sort();
    for (const ref of ["/v1/orders/KS-1", "/v1/orders/by-svc-id/660001"]) {
      for (const limit of [1, 2, 3, 5, 100]) {
        const seen: { id: string; occurred_at: string }[] = [];
        let cursor: string | null = null;
        for (let pages = 0; pages < 20; pages++) {
          const page: EventPage = await json<EventPage>(await t.request(`${ref}/events?limit=${limit}${cursor ? `&cursor=${cursor}` : ""}`));
          assert.ok(page.items.length <= limit);
          seen.push(...page.items);
          cursor = page.next_cursor;
          if (cursor === null) break;
        }
        assert.equal(cursor, null, "the last page says so");
        assert.deepEqual(seen.map((e) => e.occurred_at), expected, `${ref} limit ${limit}: every event once, in time order`);
        assert.equal(new Set(seen.map((e) => e.id)).size, seen.length);
        const ids = seen.map((e) => Number(e.id));
        for (let i = 1; i < seen.length; i++) {
          if (seen[i]!.occurred_at === seen[i - 1]!.occurred_at) assert.ok(ids[i]! > ids[i - 1]!, "ties in id order");
        }
      }
    }
  });

  it("a deep page reads from its cursor on: an index range scan under each id, in the timeline's order (no sort)", async () => {
    const text = await plan("select * from order_events where svc_order_id = '660001' and (occurred_at, id) > (now(), 0) order by occurred_at, id limit 10");
    // One range scan per partition, merged in order: the partitions' indexes are named after them.
    assert.match(text, /Index Scan using order_events_(status|location)_\d{8}_svc_order_id_occurred_at_id_idx/, text);
    assert.match(text, /ROW\(occurred_at, id\) > ROW\(now\(\), 0\)/, "the cursor is in the index condition");
    assert.doesNotMatch(text, /Sort {2}\(cost/, text);
  });
});

describe("the order lists", () => {
  it("each filter's index is read in the list's order (id DESC, NULLS FIRST): no sort", async () => {
    const filters = ["status = 'RETURNED_TO_SELLER'", "store_code = 'NO-SUCH-STORE'", ...["pending", "unconfirmed", "failed", "placed", "external"].map((p) => `placement_state = '${p}'`)];
    for (const where of filters) {
      const text = await plan(`select * from orders where ${where} order by id desc limit 51`);
      assert.match(text, /Index Scan using orders_(status|store_code|placement)_idx/, text);
      assert.doesNotMatch(text, /Sort/, text);
    }
  });

  it("?updated_after= finds exactly the orders changed after the instant, across an hour boundary", async () => {
    for (const [coid, updated] of [
      ["UA-1", "2026-11-23T08:59:59.000Z"],
      ["UA-2", "2026-11-23T09:00:00.500Z"],
      ["UA-3", "2026-11-23T09:30:00.000Z"],
      ["UA-4", "2026-11-23T11:05:00.000Z"],
    ] as const) {
      await t.callback({ client_order_id: coid, svc_order_id: `55${coid.slice(3)}`, order_status: "ALLOTTED", timestamp: "2026-11-23T08:00:00Z" });
      await t.runJobs();
      await t.database.sql`update orders set updated_at = ${updated} where client_order_id = ${coid}`;
    }
    const list = async (after: string) =>
      (await json<{ items: { client_order_id: string }[] }>(await t.request(`/v1/orders?limit=100&updated_after=${encodeURIComponent(after)}`))).items
        .map((o) => o.client_order_id)
        .filter((id) => id.startsWith("UA-"))
        .sort();
    assert.deepEqual(await list("2026-11-23T08:59:59.000Z"), ["UA-2", "UA-3", "UA-4"], "strictly after");
    assert.deepEqual(await list("2026-11-23T09:00:00.000Z"), ["UA-2", "UA-3", "UA-4"]);
    assert.deepEqual(await list("2026-11-23T09:00:00.600Z"), ["UA-3", "UA-4"], "within the hour");
    assert.deepEqual(await list("2026-11-23T10:59:00+01:00"), ["UA-4"], "an offset other than UTC");
    const [row] = await t.database.sql<{ hour: Date }[]>`select updated_hour as hour from orders where client_order_id = 'UA-2'`;
    assert.equal(row!.hour.getTime(), Date.UTC(2026, 10, 23, 9), "the hour of updated_at, in UTC");
  });
});

describe("order rows", () => {
  it("a write like a rider location's (no indexed column changes) is a HOT update; a status change is not", async () => {
    await t.callback({ client_order_id: "HOT-1", svc_order_id: "440001", order_status: "ALLOTTED", timestamp: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    const counts = await t.database.sql.begin(async (tx) => {
      // This backend's counts not yet sent to the statistics (earlier transactions' too): deltas.
      const read = async () =>
        (await tx<{ hot: number; all: number }[]>`
          select pg_stat_get_xact_tuples_hot_updated('orders'::regclass)::int as hot, pg_stat_get_xact_tuples_updated('orders'::regclass)::int as all`)[0]!;
      const start = await read();
      // The columns the projection writes for a location event, as writeProjected sets them.
      await tx`
        update orders set rider_latitude = 12.95, rider_longitude = 77.61, rider_location_at = now(), event_count = event_count + 1,
          last_event_at = now(), projection_state = projection_state, updated_at = now()
        where client_order_id = 'HOT-1'`;
      const a = await read();
      await tx`update orders set status = 'DELIVERED', updated_at = now() where client_order_id = 'HOT-1'`;
      const b = await read();
      return [
        { hot: a.hot - start.hot, all: a.all - start.all },
        { hot: b.hot - start.hot, all: b.all - start.all },
      ];
    });
    assert.deepEqual(counts[0], { hot: 1, all: 1 }, "the location write is HOT");
    assert.deepEqual(counts[1], { hot: 1, all: 2 }, "the status write (status is indexed) is not");
  });
});

describe("deduplication local to the order", () => {
  it("a body stored once is a duplicate whenever it comes again, even after its lone order_id became known as a client id", async () => {
    const body = { order_id: "AMB-77", order_status: "ALLOTTED", timestamp: "2026-11-23T09:00:00Z" };
    assert.equal((await t.callback(body)).status, 200);
    // Now tracklane knows AMB-77 as a merchant's id: the same lone order_id is read as that client id.
    assert.equal((await t.callback({ client_order_id: "AMB-77", svc_order_id: "880077", order_status: "ARRIVED", timestamp: "2026-11-23T09:10:00Z" })).status, 200);
    await t.runJobs();
    assert.equal((await t.callback(body)).status, 200);
    assert.equal((await t.callback(body)).status, 200);
    const rows = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from order_events where coalesce(svc_order_id, client_order_id) = 'AMB-77' and provider_status = 'ALLOTTED'`;
    assert.equal(rows[0]!.n, 1, "stored once");
    const [index] = await t.database.sql<{ def: string }[]>`select indexdef as def from pg_indexes where indexname = 'order_events_order_dedupe_idx'`;
    assert.match(index!.def, /UNIQUE INDEX .* \(COALESCE\(svc_order_id, client_order_id\), dedupe_key, kind, period\)/);
  });
});
