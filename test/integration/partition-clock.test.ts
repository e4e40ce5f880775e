/**
 * The event log's hourly job, the daily retention run and an append that makes its own
 * partitions read "now" from the database: the clock that dates what they compare with (an
 * order's period, received_at, finished_at). A host whose own clock runs ahead of the
 * database's (no time sync) must not drop a partition, or delete a row, still within its
 * retention by that clock; one running behind must still make the partition an append
 * needs. The host's clock is moved here with node:test's Date mock; the database's stays.
 */
import assert from "node:assert/strict";
import { after, before, it, mock } from "node:test";
import { addDays, dayOf, spanStart } from "../../src/domain/periods.ts";
import { listPartitions } from "../../src/events/partitions.ts";
import type { Config } from "../../src/config.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { runJobsAs } from "../helpers/jobs.ts";

const DAY_MS = 86_400_000;
/** How far the worker's clock runs ahead of the database's. */
const AHEAD_MS = 2 * DAY_MS;

let t: TestApp;
/** The worker's configuration: location events kept for as long as the day before the oldest partition still needs. */
let config: Config;
let today: string;
let oldest: string;
before(async () => {
  // `today` below holds for the whole file (a few seconds): start past midnight UTC when it is
  // less than a minute away, so that no test compares with a day that has just ended.
  const left = DAY_MS - (Date.now() % DAY_MS);
  if (left < 60_000) await new Promise((r) => setTimeout(r, left + 1000));
  t = await createTestApp({ REJECTED_RETENTION_DAYS: "30" });
  const [row] = await t.database.sql<{ today: string; oldest: string }[]>`
    select (now() at time zone 'UTC')::date::text as today, (select min(starts)::text from event_partitions) as oldest`;
  today = row!.today;
  oldest = row!.oldest;
  // The last second of the day before `oldest` is that many days old tomorrow, by the database's clock.
  const locationDays = Math.round((Date.parse(today) - Date.parse(oldest)) / DAY_MS) + 1;
  config = { ...t.config, events: { ...t.config.events, locationDays } };
});
after(async () => {
  mock.timers.reset();
  await t.close();
});

/** Runs the due jobs as a worker whose clock is AHEAD_MS ahead of the database's. */
async function runJobsWithClockAhead(): Promise<void> {
  mock.timers.enable({ apis: ["Date"], now: Date.now() + AHEAD_MS });
  try {
    await runJobsAs(t, config);
  } finally {
    mock.timers.reset();
  }
}

it("the hourly job keeps a partition whose orders are still within retention by the database's clock", async () => {
  const sql = t.database.sql;
  const day = addDays(oldest, -1);
  // A day's partition before the oldest, holding an order first seen that day: within
  // retention until tomorrow by the database's clock, past it by the worker's.
  await sql`select order_events_attach_partition('location', ${day}::date, ${oldest}::date)`;
  await sql`
    insert into order_events (dedupe_key, source, kind, svc_order_id, provider_status, occurred_at, payload, period)
    values ('clock-1', 'provider', 'location', 'CLOCK-1', null, now(), '{}'::jsonb, ${day}::date)`;
  assert.ok(dayOf(new Date(Date.now() + AHEAD_MS)) > today, "the worker's clock is on a later day");
  await sql`select graphile_worker.add_job('events__partitions', '{}'::json)`;
  await runJobsWithClockAhead();
  assert.ok(
    (await listPartitions(sql)).some((p) => p.kind === "location" && p.starts === day),
    "the partition stays: its last day's orders are not yet that many days old",
  );
  const [kept] = await sql<{ n: number }[]>`select count(*)::int as n from order_events where dedupe_key = 'clock-1'`;
  assert.equal(kept!.n, 1);
});

it("the daily retention run keeps a row still within retention by the database's clock", async () => {
  const sql = t.database.sql;
  // Received 30 days less an hour ago: an hour within REJECTED_RETENTION_DAYS=30.
  await sql`insert into rejected_callbacks (received_at, reason, body, body_bytes) values (now() - interval '719 hours', 'invalid_json', '{', 1)`;
  await sql`select graphile_worker.add_job('retention__purge', '{}'::json)`;
  await runJobsWithClockAhead();
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from rejected_callbacks`;
  assert.equal(row!.n, 1, "the rejected callback stays");
});

it("a callback finding no partition for today is stored, with the web host's clock months behind the database's", async () => {
  const sql = t.database.sql;
  // The log as a worker last left it before this month: no partition holds today.
  const month = spanStart(today, "month");
  for (const p of await listPartitions(sql)) {
    if (p.starts < month) continue;
    await sql`delete from event_partitions where name = ${p.name}`;
    await sql`alter table order_events detach partition ${sql(p.name)}`;
    await sql`drop table ${sql(p.name)}`;
  }
  mock.timers.enable({ apis: ["Date"], now: Date.now() - 100 * DAY_MS });
  let res: Response;
  try {
    res = await t.callback({ client_order_id: "CLOCK-P-1", svc_order_id: "7710001", order_status: "ALLOTTED", rider_id: "R-1" });
  } finally {
    mock.timers.reset();
  }
  assert.equal(res.status, 200, await res.clone().text());
  const [row] = await sql<{ period: string }[]>`select period::text from order_events where svc_order_id = '7710001'`;
  assert.equal(row?.period, today, "stored under the database's today, in a partition made for it");
});
