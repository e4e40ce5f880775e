/**
 * The dedupe key's two stored forms (migration 0013, src/events/log.ts): from
 * order_events_short_keys_from() on, an event keeps the first 32 hex digits of its body's
 * SHA-256; in earlier periods, all 64. A copy is stored with its first copy's period, so
 * it takes the same form and the unique index refuses it, whenever it arrives.
 */
import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { drizzle, migrate } from "../../src/db/drizzle.ts";
import { MIGRATIONS_FOLDER, runMigrations } from "../../src/db/migrate.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import { appendEvents } from "../../src/events/log.ts";
import type { EventInput } from "../../src/events/log.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestDatabase, serverUrl } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 1 });
});
after(async () => {
  await sql.end();
  await testDb.drop();
});

function callback(svcOrderId: number | null, clientOrderId: string, status: string): EventInput {
  const body = { ...(svcOrderId === null ? {} : { sfx_order_id: svcOrderId }), client_order_id: clientOrderId, order_status: status, timestamp: "2026-11-23T09:00:00Z" };
  const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
  if (!r.ok) throw new Error(r.message);
  return { event: r.event, payload: body };
}

async function stored(orderKey: string) {
  return await sql<{ id: string; dedupe_key: string; period: string }[]>`
    select id::text, dedupe_key, period::text from order_events
    where coalesce(svc_order_id, client_order_id) = ${orderKey} order by id`;
}

const utcDay = (offsetDays: number) => new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);

describe("dedupe keys", () => {
  it("a log migrated empty stores the short form from the start, and refuses a copy", async () => {
    const [{ since } = { since: "" }] = await sql<{ since: string }[]>`select order_events_short_keys_from()::text as since`;
    assert.equal(since, "-infinity");

    const first = callback(770001, "DK-1", "ALLOTTED");
    const [a] = await appendEvents(sql, [first]);
    const rows = await stored("770001");
    assert.deepEqual(
      rows.map((r) => r.dedupe_key),
      [first.event.dedupeKey.slice(0, 32)],
    );

    const [copy] = await appendEvents(sql, [callback(770001, "DK-1", "ALLOTTED"), callback(770001, "DK-1", "ARRIVED")]);
    assert.deepEqual(copy, { eventId: a!.eventId, duplicate: true });
    assert.equal((await stored("770001")).length, 2);
  });

  it("an older period keeps the long form, and a late copy of its event is refused as well as a copy of a new one", async () => {
    // A log that had events when it was migrated: the short form starts the day after
    // tomorrow. Order 770002 is first seen today (before the change); 770003's key on the
    // day of the change, as far as the log knows (its period).
    const since = utcDay(2);
    await sql.unsafe(`create or replace function order_events_short_keys_from() returns date language sql immutable
      as $$ select '${since}'::date $$`);
    await sql`insert into order_periods (order_key, period) values ('770003', ${since}::date)`;
    const oldEvent = callback(770002, "DK-2", "ALLOTTED");
    const newEvent = callback(770003, "DK-3", "ALLOTTED");
    const [o, n] = await appendEvents(sql, [oldEvent, newEvent]);
    const [older] = await stored("770002");
    assert.equal(older!.dedupe_key, oldEvent.event.dedupeKey);
    assert.ok(older!.period < since, older!.period);
    assert.deepEqual(
      (await stored("770003")).map((r) => [r.dedupe_key, r.period]),
      [[newEvent.event.dedupeKey.slice(0, 32), since]],
    );

    // Late copies of both, among a new event, in one batch and then each alone.
    const answers = await appendEvents(sql, [callback(770003, "DK-3", "ALLOTTED"), callback(770002, "DK-2", "ARRIVED"), callback(770002, "DK-2", "ALLOTTED")]);
    assert.deepEqual(answers[0], { eventId: n!.eventId, duplicate: true });
    assert.equal(answers[1]!.duplicate, false);
    assert.deepEqual(answers[2], { eventId: o!.eventId, duplicate: true });
    assert.deepEqual(await appendEvents(sql, [callback(770002, "DK-2", "ALLOTTED")]), [{ eventId: o!.eventId, duplicate: true }]);
    assert.deepEqual(await appendEvents(sql, [callback(770003, "DK-3", "ALLOTTED")]), [{ eventId: n!.eventId, duplicate: true }]);

    assert.deepEqual(
      (await stored("770002")).map((r) => r.dedupe_key.length),
      [64, 64],
    );
    assert.equal((await stored("770003")).length, 1);
  });

  it("a log that had events when it was migrated keeps the long form until the day after tomorrow (UTC)", async () => {
    // The migrations before this change, from a copy of the folder whose journal ends there.
    const folder = mkdtempSync(join(tmpdir(), "tracklane-migrations-"));
    const name = `${testDb.name}_upgrade`;
    const admin = driverSql(serverUrl("postgres"), { max: 1 });
    await admin.unsafe(`create database ${name}`);
    const db = driverSql(serverUrl(name), { max: 1 });
    try {
      cpSync(MIGRATIONS_FOLDER, folder, { recursive: true });
      const journalPath = join(folder, "meta", "_journal.json");
      const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
      const cut = journal.entries.findIndex((e) => e.tag === "0013_short_dedupe_keys");
      assert.ok(cut > 0);
      writeFileSync(journalPath, JSON.stringify({ ...journal, entries: journal.entries.slice(0, cut) }));
      await migrate(drizzle(db, { casing: "snake_case" }), { migrationsFolder: folder });
      await db`insert into order_periods (order_key, period) values ('770009', (now() at time zone 'UTC')::date)`;
      await db`insert into order_events (dedupe_key, kind, svc_order_id, provider_status, occurred_at, payload, period)
               values (${"f".repeat(64)}, 'status', '770009', 'ALLOTTED', now(), '{}', (now() at time zone 'UTC')::date)`;

      const before = utcDay(2);
      await runMigrations(serverUrl(name), createLogger({ level: "silent" }));
      const [{ since } = { since: "" }] = await db<{ since: string }[]>`select order_events_short_keys_from()::text as since`;
      assert.ok([before, utcDay(2)].includes(since), since);
    } finally {
      await db.end();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
      rmSync(folder, { recursive: true, force: true });
    }
  });
});
