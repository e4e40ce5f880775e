/**
 * The partitioned event log (docs/scale.md, "Partitions and retention"): partitions are
 * made ahead, old ones go whole past their kind's retention, and nothing a rebuild derives
 * changes for it: status, rider (with the last position, whose events are gone), the
 * timeline of status events. Orders are made "old" by recording their keys' period months
 * back (order_periods, the test's own connection) in a partition attached for that month;
 * everything else goes through the callback endpoint and the worker's jobs.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { REDACTED } from "../../src/domain/redact.ts";
import { appendEvents } from "../../src/events/log.ts";
import { dropExpiredPartitions, ensurePartitions, listPartitions } from "../../src/events/partitions.ts";
import { rebuild } from "../../src/projection/rebuild.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const json = async <T>(res: Response): Promise<T> => {
  assert.ok(res.ok, `${res.status} ${await res.clone().text()}`);
  return (await res.json()) as T;
};

interface Order {
  status: string;
  provider_status: string | null;
  status_at: string | null;
  rider: { id: string | null; name: string | null; contact: string | null; latitude: number | null; longitude: number | null; location_at: string | null } | null;
  event_count: number;
  last_event_at: string | null;
}
interface Timeline {
  items: { id: string; kind: string; provider_status: string | null; occurred_at: string }[];
}

const today = dayOf(new Date());
/** The month three months back: older than every partition the migration made. */
const oldMonth = spanStart(addDays(spanStart(today, "month"), -80), "month");

/** Attaches a partition of each kind for the old month where it is missing (the migration's own function). */
async function attachOldMonth(): Promise<void> {
  for (const kind of ["location", "status"]) {
    await t.database.sql`
      select order_events_attach_partition(${kind}, ${oldMonth}::date, ${nextBoundary(oldMonth, "month")}::date)
      where not exists (select from event_partitions where kind = ${kind} and starts = ${oldMonth}::date)`;
  }
}

/**
 * An order first seen in the old month (its key's period recorded there): `at(min)` is a
 * time that day, `send` posts a callback naming both its ids and expects 200.
 */
async function oldOrder(coid: string, svc: string) {
  await t.database.sql`insert into order_periods (order_key, period) values (${svc}, ${addDays(oldMonth, 3)}::date)`;
  const at = (min: number) => new Date(Date.parse(`${oldMonth}T09:00:00Z`) + 3 * 86_400_000 + min * 60_000).toISOString();
  const send = async (body: Record<string, unknown>) => assert.equal((await t.callback({ client_order_id: coid, svc_order_id: svc, ...body })).status, 200);
  return { at, send };
}

/** An order first seen in the old month: allotted, three pings, delivered. */
async function oldDelivery(coid: string, svc: string): Promise<void> {
  const { at, send } = await oldOrder(coid, svc);
  const rider = { rider_id: "R-9", rider_name: "Meena", rider_contact: "9800000009" };
  await send({ order_status: "ALLOTTED", timestamp: at(0), ...rider });
  for (const [i, lat] of [12.91, 12.93, 12.95].entries()) await send({ rider_latitude: lat, rider_longitude: 77.6, timestamp: at(5 + i), ...rider });
  await send({ order_status: "DELIVERED", timestamp: at(30), ...rider });
}

const orderOf = async (coid: string) => await json<Order>(await t.request(`/v1/orders/${coid}`));
const statusTimeline = async (coid: string) =>
  (await json<Timeline>(await t.request(`/v1/orders/${coid}/events?limit=500`))).items.filter((e) => e.kind === "status");
const count = async (where: "location" | "status", key: string) => {
  const [row] = await t.database.sql<{ n: number }[]>`
    select count(*)::int as n from order_events where kind = ${where} and coalesce(svc_order_id, client_order_id) = ${key}`;
  return row!.n;
};

describe("the partitioned event log", () => {
  it("makes partitions ahead from where the last one ends, once, and follows a change of span from the next boundary", async () => {
    const before = await listPartitions(t.database.sql);
    const lastEnds = before.filter((p) => p.kind === "status").at(-1)!.ends;
    // Three months on, the current month and the next are needed: every month from the last end on.
    const later = new Date(Date.parse(`${addDays(lastEnds, 40)}T12:00:00Z`));
    const made = await ensurePartitions(t.database.sql, "month", later);
    const monthsMade = made.filter((n) => n.startsWith("order_events_status_")).map((n) => n.slice(-8));
    assert.equal(monthsMade[0], lastEnds.replaceAll("-", ""), "no gap after the last partition");
    assert.equal(monthsMade.length, 3);
    assert.equal(made.length, 6, "both kinds");
    assert.deepEqual(await ensurePartitions(t.database.sql, "month", later), [], "made once");
    // Weekly from now on: the month already made stays, weeks follow it.
    const after = await listPartitions(t.database.sql);
    const end = after.filter((p) => p.kind === "location").at(-1)!.ends;
    const weekly = await ensurePartitions(t.database.sql, "week", new Date(Date.parse(`${addDays(end, -3)}T12:00:00Z`)));
    const weeks = (await listPartitions(t.database.sql)).filter((p) => p.kind === "location" && weekly.includes(p.name));
    assert.ok(weeks.length >= 2, JSON.stringify(weeks));
    assert.equal(weeks[0]!.starts, end);
    for (const w of weeks.slice(1)) assert.equal(new Date(`${w.starts}T00:00:00Z`).getUTCDay(), 1, `${w.starts} is a Monday`);
  });

  it("an append stores every value as sent: quotes, backslashes, braces, commas, newlines, the text NULL, non-ASCII, nulls", async () => {
    // The batch travels as one array per column (array literals), the bodies as JSON lines:
    // nothing in a value may end an element or a line, turn into SQL NULL or lose an escape.
    const awkward = 'say "hi", {then} \\ back\\slash, NULL, émoji 🚚, tab\t, line\nbreak\r\n, \u2028 separator';
    const inputs = [
      { sfx_order_id: 8800200, client_order_id: 'ODD "1", {x}', order_status: "NULL", note: awkward, nested: { a: [1, "two", null, { b: awkward }] } },
      { sfx_order_id: 8800200, rider_latitude: 12.9, rider_longitude: 77.6, rider_name: awkward },
      { client_order_id: "ODD\\2", order_status: "ALLOTTED", empty: "", list: [] },
    ].map((body) => {
      const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
      if (!r.ok) throw new Error(r.message);
      return { event: r.event, payload: body as JsonObject };
    });
    const answers = await appendEvents(t.database.sql, inputs);
    assert.ok(answers.every((a) => !a.duplicate));
    const rows = await t.database.sql<{ id: string; svc_order_id: string | null; client_order_id: string | null; provider_status: string | null; kind: string; payload: unknown }[]>`
      select id::text, svc_order_id, client_order_id, provider_status, kind, payload from order_events
      where id = any(${answers.map((a) => a.eventId)}::bigint[])`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    answers.forEach((a, i) => {
      const row = byId.get(a.eventId);
      assert.ok(row, `event ${i} stored`);
      const { event, payload } = inputs[i]!;
      assert.deepEqual(row.payload, payload);
      assert.equal(row.svc_order_id, event.svcOrderId);
      assert.equal(row.client_order_id, event.clientOrderId);
      assert.equal(row.provider_status, event.providerStatus);
      assert.equal(row.kind, event.kind);
    });
    assert.equal(byId.get(answers[0]!.eventId)!.provider_status, "NULL", "the text NULL stays text");
    assert.equal(byId.get(answers[1]!.eventId)!.provider_status, null);
    // Appended again: every one is found as a copy of itself.
    const again = await appendEvents(t.database.sql, inputs);
    assert.deepEqual(again, answers.map((a) => ({ eventId: a.eventId, duplicate: true })));
  });

  it("two appends that see a new order key at once: one records its period, the other's events follow it, each body stored once", async () => {
    const event = (body: JsonObject) => {
      const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
      if (!r.ok) throw new Error(r.message);
      return { event: r.event, payload: body };
    };
    const allotted = { sfx_order_id: 8800100, client_order_id: "RACE-1", order_status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" };
    const arrived = { sfx_order_id: 8800100, client_order_id: "RACE-1", order_status: "ARRIVED", event_time: "2026-11-23T08:10:00Z" };
    const other = driverSql(t.testDb.url, { max: 1 });
    try {
      let second: Promise<Awaited<ReturnType<typeof appendEvents>>> | undefined;
      const first = await t.database.sql.begin(async (tx) => {
        const mine = await appendEvents(tx, [event(allotted)]);
        // The other append meets the uncommitted period row and waits for this transaction.
        second = appendEvents(other, [event(arrived), event(allotted)]);
        await new Promise((r) => setTimeout(r, 300));
        return mine;
      });
      const [arrivedAnswer, copyAnswer] = await second!;
      assert.equal(arrivedAnswer!.duplicate, false);
      assert.deepEqual(copyAnswer, { eventId: first[0]!.eventId, duplicate: true });
    } finally {
      await other.end();
    }
    const rows = await t.database.sql<{ provider_status: string; period: string }[]>`
      select provider_status, period::text from order_events where svc_order_id = '8800100' order by id`;
    assert.deepEqual(rows.map((r) => r.provider_status), ["ALLOTTED", "ARRIVED"]);
    const [registered] = await t.database.sql<{ period: string }[]>`select period::text from order_periods where order_key = '8800100'`;
    assert.ok(rows.every((r) => r.period === registered!.period), "one period for the key");
  });

  it("refuses to change, delete or truncate events, in any partition", async () => {
    const sql = t.database.sql;
    await t.callback({ client_order_id: "AO-1", order_status: "CREATED" });
    const [p] = await sql<{ name: string }[]>`select tableoid::regclass::text as name from order_events where client_order_id = 'AO-1'`;
    assert.match(p!.name, /^order_events_status_\d{8}$/);
    await assert.rejects(sql`delete from ${sql(p!.name)}`, /append-only: DELETE/);
    await assert.rejects(sql`update ${sql(p!.name)} set provider_status = 'X'`, /append-only: UPDATE/);
    await assert.rejects(sql`truncate ${sql(p!.name)}`, /append-only: TRUNCATE/);
    await assert.rejects(sql`truncate order_events`, /append-only: TRUNCATE/);
  });

  it("after location retention dropped an old month, a rebuild changes no order's status, rider or status timeline", async () => {
    const sql = t.database.sql;
    await attachOldMonth();
    await oldDelivery("RT-OLD-1", "8800001");
    await oldDelivery("RT-OLD-2", "8800002");
    // A young order (this month) keeps everything.
    await t.callback({ client_order_id: "RT-NEW", svc_order_id: "8800003", order_status: "ALLOTTED", rider_name: "Ravi" });
    await t.callback({ client_order_id: "RT-NEW", svc_order_id: "8800003", rider_latitude: 13.01, rider_longitude: 77.5 });
    await t.runJobs();
    const coids = ["RT-OLD-1", "RT-OLD-2", "RT-NEW"];
    const before = await Promise.all(coids.map(async (c) => ({ order: await orderOf(c), timeline: await statusTimeline(c) })));
    assert.equal(before[0]!.order.rider?.latitude, 12.95, "the last ping");
    assert.equal(before[0]!.order.event_count, 5);
    assert.equal(await count("location", "8800001"), 3);

    // Location events kept 30 days: the old month's location partition goes, and only it.
    const { dropped, held } = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 });
    assert.deepEqual(dropped, [`order_events_location_${oldMonth.replaceAll("-", "")}`]);
    assert.deepEqual(held, []);
    assert.equal(await count("location", "8800001"), 0);
    assert.equal(await count("status", "8800001"), 2);
    assert.equal(await count("location", "8800003"), 1, "the young order keeps its ping");

    const result = await rebuild(sql);
    assert.ok(result.orders >= 3);
    assert.equal(result.changed, 0, "no row changed");
    const afterwards = await Promise.all(coids.map(async (c) => ({ order: await orderOf(c), timeline: await statusTimeline(c) })));
    assert.deepEqual(afterwards, before);
    // The API's timeline of an old order now holds its status events only.
    const all = (await json<Timeline>(await t.request("/v1/orders/RT-OLD-1/events"))).items;
    assert.deepEqual(all.map((e) => e.provider_status), ["ALLOTTED", "DELIVERED"]);
  });

  it("a late ping of an order whose partition went is kept once, in the oldest partition left, and projected", async () => {
    const sql = t.database.sql;
    const body = { client_order_id: "RT-OLD-2", svc_order_id: "8800002", rider_latitude: 12.99, rider_longitude: 77.7, timestamp: new Date().toISOString() };
    const first = await json<{ event_id: string; duplicate: boolean }>(await t.callback(body));
    assert.equal(first.duplicate, false);
    const again = await json<{ event_id: string; duplicate: boolean }>(await t.callback(body));
    assert.deepEqual(again, { ...first, duplicate: true });
    const [row] = await sql<{ part: string; period: string }[]>`
      select tableoid::regclass::text as part, period::text from order_events where id = ${first.event_id}`;
    const oldest = (await listPartitions(sql)).find((p) => p.kind === "location")!;
    assert.deepEqual(row, { part: oldest.name, period: oldest.starts });
    await t.runJobs();
    const order = await orderOf("RT-OLD-2");
    assert.equal(order.rider?.latitude, 12.99);
    assert.equal(order.event_count, 6, "five merged before, one now");
  });

  it("status retention drops whole old orders' events; their rows stay as they were, also through a rebuild", async () => {
    const sql = t.database.sql;
    const before = await orderOf("RT-OLD-1");
    const { dropped } = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 60 });
    assert.deepEqual(dropped, [`order_events_status_${oldMonth.replaceAll("-", "")}`]);
    assert.equal(await count("status", "8800001"), 0);
    await rebuild(sql);
    assert.deepEqual(await orderOf("RT-OLD-1"), before);
    assert.deepEqual(await statusTimeline("RT-OLD-1"), []);
  });

  it("keeps a partition past retention while it holds an event not projected yet, and drops it once projected", async () => {
    const sql = t.database.sql;
    await attachOldMonth();
    await sql`insert into order_periods (order_key, period) values ('8800010', ${addDays(oldMonth, 1)}::date)`;
    await t.callback({ client_order_id: "RT-Q", svc_order_id: "8800010", rider_latitude: 12.5, rider_longitude: 77.1 });
    const part = `order_events_location_${oldMonth.replaceAll("-", "")}`;
    assert.deepEqual(await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 }), { dropped: [], held: [part], blocked: null });
    await t.runJobs();
    assert.deepEqual(await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 }), { dropped: [part], held: [], blocked: null });
  });

  it("finishes a drop cut off half way: a partition whose row is gone is detached and dropped on the next run", async () => {
    const sql = t.database.sql;
    await attachOldMonth();
    const part = `order_events_location_${oldMonth.replaceAll("-", "")}`;
    await sql`delete from event_partitions where name = ${part}`;
    assert.deepEqual(await dropExpiredPartitions(sql, { locationDays: 0, statusDays: 0 }), { dropped: [part], held: [], blocked: null });
    const [gone] = await sql<{ exists: boolean }[]>`select to_regclass(${part}) is not null as exists`;
    assert.equal(gone!.exists, false);
  });

  it("a table of a partition's name in another schema (a copy kept aside) is not taken for an orphan: the job runs on and leaves it be", async () => {
    const sql = t.database.sql;
    const name = `order_events_location_${oldMonth.replaceAll("-", "")}`;
    await sql`create schema if not exists kept_aside`;
    await sql.unsafe(`create table kept_aside.${name} (id bigint)`);
    await sql.unsafe(`insert into kept_aside.${name} values (1)`);
    try {
      // Was: picked as an orphan by name alone, then "relation does not exist" on every run.
      const result = await dropExpiredPartitions(sql, { locationDays: 0, statusDays: 0 });
      assert.ok(!result.dropped.includes(name) && !result.held.includes(name), JSON.stringify(result));
      const [kept] = await sql.unsafe<{ n: number }[]>(`select count(*)::int as n from kept_aside.${name}`);
      assert.equal(kept!.n, 1);
    } finally {
      await sql`drop schema kept_aside cascade`;
    }
  });

  it("a redaction after location retention leaves no rider name that only a dropped event told; a later event makes the order due again", async () => {
    const sql = t.database.sql;
    await attachOldMonth();
    const { at, send } = await oldOrder("RT-PII", "8800020");
    const ping = { rider_latitude: 12.9, rider_longitude: 77.6, rider_name: "Asha Rao", rider_contact: "9800000006" };
    await send({ order_status: "ALLOTTED", timestamp: at(0), rider_id: "R-5", rider_name: "Asha", rider_contact: "9800000005" });
    // The rider's name is last told by a ping; the delivery does not repeat it.
    await send({ ...ping, timestamp: at(5) });
    await send({ order_status: "DELIVERED", timestamp: at(30) });
    await t.runJobs();
    // As if tracklane had seen it finish back then: personal data's retention counts from that.
    await sql`update orders set finished_at = ${at(30)} where client_order_id = 'RT-PII'`;
    assert.equal((await orderOf("RT-PII")).rider?.name, "Asha Rao");
    await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 });
    assert.equal(await count("location", "8800020"), 0, "the ping went with its month");

    const personal = async () => {
      const [row] = await sql<{ state: string; redacted: boolean }[]>`
        select projection_state as state, redacted_at is not null as redacted from orders where client_order_id = 'RT-PII'`;
      const order = await orderOf("RT-PII");
      const timeline = await t.request("/v1/orders/RT-PII/events?limit=500").then((r) => r.text());
      return { shown: [order.rider?.id, order.rider?.name, order.rider?.contact], redacted: row!.redacted, leaks: /Asha|98000000/.test(row!.state + timeline) };
    };
    assert.ok((await redactDue(sql, 30)).orders >= 1);
    // The name the dropped ping told lived on in the stored state: it is redacted there too.
    assert.deepEqual(await personal(), { shown: ["R-5", REDACTED, REDACTED], redacted: true, leaks: false });

    // A ping arriving after the redaction shows its rider again, and makes the order due once more.
    await send({ ...ping, rider_latitude: 12.91, timestamp: at(40) });
    await t.runJobs();
    assert.deepEqual(await personal(), { shown: ["R-5", "Asha Rao", "9800000006"], redacted: false, leaks: true });
    assert.deepEqual(await redactDue(sql, 30), { orders: 1, events: 1, commands: 0, failed: [] });
    assert.deepEqual(await personal(), { shown: ["R-5", REDACTED, REDACTED], redacted: true, leaks: false });
    assert.deepEqual(await redactDue(sql, 30), { orders: 0, events: 0, commands: 0, failed: [] }, "done");
  });
});
