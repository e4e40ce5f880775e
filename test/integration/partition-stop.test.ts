/**
 * A stopping worker and the hourly partition job: drops go one partition at a time, each
 * waiting up to the lock timeout, twice; once the worker stops, no further partition is
 * begun, and the next run drops the rest (src/events/partitions.ts).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { dropExpiredPartitions, listPartitions } from "../../src/events/partitions.ts";
import type { JobHelpers } from "graphile-worker";
import type { WorkerDeps } from "../../src/worker/deps.ts";
import { taskList } from "../../src/worker/runner.ts";
import { createTestApp } from "../helpers/app.ts";
import { stuckReader } from "../helpers/db.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const RETENTION = { locationDays: 30, statusDays: 0 };
const oldest = spanStart(addDays(spanStart(dayOf(new Date()), "month"), -200), "month");
const months = [oldest, nextBoundary(oldest, "month"), nextBoundary(nextBoundary(oldest, "month"), "month")];
const names = months.map((m) => `order_events_location_${m.replaceAll("-", "")}`);

it("a drop of several partitions, stopped while one waits for its locks, finishes that one and begins no other; the next run drops the rest", async () => {
  const sql = t.database.sql;
  for (const m of months) await sql`select order_events_attach_partition('location', ${m}::date, ${nextBoundary(m, "month")}::date)`;
  const stuck = await stuckReader(t.testDb.url);
  const stop = new AbortController();
  const drop = dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 10_000, stopping: stop.signal });
  // The first detach waits for the open transaction; the worker begins to stop meanwhile
  // (once it waits, however slow the machine).
  const waiting = async () => (await sql<{ n: number }[]>`select count(*)::int as n from pg_stat_activity where ${stuck.pid}::int = any(pg_blocking_pids(pid))`)[0]!.n > 0;
  while (!(await waiting())) await new Promise((r) => setTimeout(r, 20));
  stop.abort();
  await stuck.end();
  const first = await drop;
  assert.deepEqual([first.dropped, first.blocked], [[names[0]], null]);
  const left = (await listPartitions(sql)).map((p) => p.name);
  assert.deepEqual(names.filter((n) => left.includes(n)), names.slice(1));

  const next = await dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 10_000 });
  assert.deepEqual(next.dropped, names.slice(1));
});

it("the hourly task of a stopping worker makes partitions ahead but drops none; the next run drops them", async () => {
  const sql = t.database.sql;
  for (const m of months) await sql`select order_events_attach_partition('location', ${m}::date, ${nextBoundary(m, "month")}::date)`;
  const deps: WorkerDeps = { config: { ...t.config, events: { ...t.config.events, ...RETENTION } }, databaseUrl: t.testDb.url, sql, log: t.log, metrics: t.metrics };
  const helpers = { job: { id: "1", attempts: 1, max_attempts: 3, key: "event_partitions" } } as unknown as JobHelpers;
  const stop = new AbortController();
  stop.abort();
  await taskList(deps, stop.signal)["events__partitions"]!({}, helpers);
  let left = (await listPartitions(sql)).map((p) => p.name);
  assert.deepEqual(names.filter((n) => left.includes(n)), names);
  await taskList(deps)["events__partitions"]!({}, helpers);
  left = (await listPartitions(sql)).map((p) => p.name);
  assert.deepEqual(names.filter((n) => left.includes(n)), []);
});
