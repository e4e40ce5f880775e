/**
 * The event log's partitions at the calendar's edges, on a database whose sessions' TimeZone
 * is on another day than UTC now (UTC+14 or UTC-12) and a process whose TZ is UTC-10
 * (neither may change anything: periods are UTC days). Partitions made at the last millisecond of month ends, a year end and February in
 * leap and common years, through every EVENTS_PARTITION value and changes between them:
 * contiguous, named for their first day, with PostgreSQL's bounds as event_partitions
 * records them, and an order first seen on the last day of a span or on the next one's
 * first day lands in the partition that holds its day.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import type { Sql } from "postgres";
import { createPool } from "../../src/db/client.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import { addDays, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import type { PartitionSpan } from "../../src/domain/periods.ts";
import { appendEvents } from "../../src/events/log.ts";
import { dropExpiredPartitions, ensurePartitions, listPartitions } from "../../src/events/partitions.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let db: TestDatabase;
let sql: Sql;
const tz = process.env.TZ;
/**
 * A zone whose date differs from UTC's for the file's few seconds: UTC+14 from 10:00 UTC to
 * midnight, UTC-12 from midnight to 12:00 UTC. Chosen an hour clear of 10:00 and 12:00, and
 * past midnight UTC when that is under a minute away.
 */
let ZONE: string;
before(async () => {
  const left = 86_400_000 - (Date.now() % 86_400_000);
  if (left < 60_000) await new Promise((r) => setTimeout(r, left + 1000));
  ZONE = new Date().getUTCHours() >= 11 ? "Pacific/Kiritimati" : "Etc/GMT+12";
  db = await createTestDatabase();
  const admin = createPool(db.url, 1, "calendar-setup");
  await admin.unsafe(`alter database ${db.name} set timezone = '${ZONE}'`);
  await admin.end();
  sql = createPool(db.url, 2, "calendar");
  process.env.TZ = "Pacific/Honolulu";
});
after(async () => {
  if (tz === undefined) delete process.env.TZ;
  else process.env.TZ = tz;
  await sql.end();
  await db.drop();
});

/** Next year, and the first leap year after the year after it: edges after every partition the template has. */
const Y = new Date().getUTCFullYear() + 1;
let LEAP = Y + 2;
while (!(LEAP % 4 === 0 && (LEAP % 100 !== 0 || LEAP % 400 === 0))) LEAP++;

let n = 0;
/** An event of an order first seen on `period` (recorded as the append would have), and the partition it landed in. */
async function landsIn(kind: "location" | "status", period: string): Promise<string> {
  const key = `CAL-${++n}`;
  await sql`insert into order_periods (order_key, period) values (${key}, ${period}::date)`;
  const [row] = await sql<{ part: string }[]>`
    insert into order_events (dedupe_key, source, kind, svc_order_id, provider_status, occurred_at, payload, period)
    values (${key}, 'provider', ${kind}, ${key}, null, now(), '{}'::jsonb, ${period}::date)
    returning tableoid::regclass::text as part`;
  return row!.part;
}

it("the session's TimeZone and the process's TZ change no period: an append dates a new order by the UTC day", async () => {
  assert.equal((await sql<{ tz: string }[]>`select current_setting('TimeZone') as tz`)[0]!.tz, ZONE);
  const [day] = await sql<{ differs: boolean }[]>`select now()::date <> (now() at time zone 'UTC')::date as differs`;
  assert.equal(day!.differs, true, "the session's day is not UTC's");
  const body = { sfx_order_id: 9900001, client_order_id: "CAL-TZ-1", order_status: "ALLOTTED" };
  const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
  if (!r.ok) throw new Error(r.message);
  const [answer] = await appendEvents(sql, [{ event: r.event, payload: body }]);
  const [row] = await sql<{ same: boolean }[]>`
    select period = (received_at at time zone 'UTC')::date as same from order_events where id = ${answer!.eventId}`;
  assert.equal(row!.same, true);
});

it("partitions made at month ends, a year end and leap days stay contiguous, named and bounded as recorded, and take the edges' orders", async () => {
  const steps: [string, PartitionSpan][] = [
    [`${Y}-12-31T23:59:59.999Z`, "month"],
    [`${Y + 1}-01-31T23:59:59.999Z`, "day"],
    [`${Y + 1}-02-28T23:59:59.999Z`, "week"],
    [`${Y + 1}-04-30T23:59:59.999Z`, "month"],
    [`${Y + 1}-06-30T23:59:59.999Z`, "month"],
    [`${LEAP}-02-28T23:59:59.999Z`, "month"],
    [`${LEAP}-02-29T23:59:59.999Z`, "day"],
    [`${LEAP}-12-31T23:59:59.999Z`, "week"],
  ];
  for (const [at, span] of steps) {
    await ensurePartitions(sql, span, new Date(at));
    const parts = await listPartitions(sql);
    for (const day of [at.slice(0, 10), addDays(at.slice(0, 10), 1)]) {
      for (const kind of ["location", "status"] as const) {
        const holder = parts.find((p) => p.kind === kind && p.starts <= day && day < p.ends);
        assert.ok(holder, `a ${kind} partition holds ${day} once made at ${at} (${span})`);
        assert.equal(await landsIn(kind, day), holder.name, `an order first seen ${day}`);
      }
    }
  }
  const parts = await listPartitions(sql);
  const bounds = await sql<{ name: string; bound: string }[]>`
    select c.relname as name, pg_get_expr(c.relpartbound, c.oid) as bound
    from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = 'order_events'::regclass`;
  assert.equal(bounds.length, parts.length, "every partition attached is recorded");
  for (const kind of ["location", "status"]) {
    const mine = parts.filter((p) => p.kind === kind);
    mine.forEach((p, i) => {
      assert.equal(p.name, `order_events_${kind}_${p.starts.replaceAll("-", "")}`);
      assert.equal(bounds.find((b) => b.name === p.name)?.bound, `FOR VALUES FROM ('${kind}', '${p.starts}') TO ('${kind}', '${p.ends}')`);
      if (i > 0) assert.equal(p.starts, mine[i - 1]!.ends, `no gap or overlap before ${p.name}`);
    });
  }
  // The weeks made at the year's end run Monday to Monday, across it.
  const lastWeek = spanStart(`${LEAP}-12-31`, "week");
  assert.ok(parts.some((p) => p.kind === "status" && p.starts === lastWeek && p.ends === addDays(lastWeek, 7)));
});

it("retention drops a partition only once the orders of its last day are that many days old", async () => {
  // The week after the leap year's last: its last day's orders are one day old a day after it ends.
  const starts = nextBoundary(`${LEAP}-12-31`, "week");
  const week = (await listPartitions(sql)).find((p) => p.kind === "location" && p.starts === starts)!;
  assert.equal(week.ends, addDays(starts, 7));
  const oldestStatus = (await listPartitions(sql)).find((p) => p.kind === "status")!.name;
  const run = async (at: string) => (await dropExpiredPartitions(sql, { locationDays: 1, statusDays: 0 }, new Date(at))).dropped;
  assert.ok(!(await run(`${week.ends}T23:59:59.999Z`)).includes(week.name), "kept while its last day's orders are younger than a day");
  assert.ok((await run(`${addDays(week.ends, 1)}T00:00:00.000Z`)).includes(week.name), "dropped at the next midnight");
  const left = await listPartitions(sql);
  assert.ok(left.every((p) => p.kind === "status" || p.starts >= week.ends), "every older location partition went");
  assert.equal(left.find((p) => p.kind === "status")?.name, oldestStatus, "status partitions kept: 0 keeps forever");
});
