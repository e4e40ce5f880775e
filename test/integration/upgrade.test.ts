/**
 * Upgrading a populated database, as a merchant does: a database an older release migrated
 * (its migrations up to 0010, before the partitioned log; up to 0012; up to 0015; up to
 * 0016), holding what that release wrote (events in its log, orders projected from them,
 * events queued but not yet projected, commands, AWBs, notification endpoints, messages,
 * deliveries and attempts, console sessions), is migrated to this release by `npm run
 * migrate` (runMigrations). Every row is still there with the same values, an old
 * callback sent again is a duplicate of its first copy, the queued events are projected,
 * new callbacks are accepted and projected (a rider reassigned after the upgrade is not
 * shown with the last rider's details), the next notification continues the order's
 * sequence, the API reads it all, and `npm run rebuild` finds every order row right.
 */
import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { runMigrations as runWorkerMigrations } from "graphile-worker";
import { createPool } from "../../src/db/client.ts";
import { drizzle, migrate } from "../../src/db/drizzle.ts";
import { MIGRATIONS_FOLDER, runMigrations } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/ready.ts";
import { foldState, project } from "../../src/domain/projection.ts";
import type { StoredEvent } from "../../src/domain/projection.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { rebuild } from "../../src/projection/rebuild.ts";
import { encodeState } from "../../src/projection/state.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

/** Applies this release's migrations up to `tag` only, as the release that shipped it did. */
async function migrateTo(url: string, tag: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-migrations-"));
  try {
    mkdirSync(join(dir, "meta"));
    const journal = JSON.parse(readFileSync(join(MIGRATIONS_FOLDER, "meta/_journal.json"), "utf8")) as { entries: { tag: string }[] };
    const last = journal.entries.findIndex((e) => e.tag === tag);
    assert.ok(last >= 0, tag);
    journal.entries = journal.entries.slice(0, last + 1);
    for (const e of journal.entries) cpSync(join(MIGRATIONS_FOLDER, `${e.tag}.sql`), join(dir, `${e.tag}.sql`));
    writeFileSync(join(dir, "meta/_journal.json"), JSON.stringify(journal));
    const sql = createPool(url, 1, "tracklane-test-old-release");
    try {
      await migrate(drizzle(sql, { casing: "snake_case" }), { migrationsFolder: dir });
    } finally {
      await sql.end();
    }
    await runWorkerMigrations({ connectionString: url });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const HOUR = 3_600_000;
const levelOf = (tag: string) => MIGRATIONS.findIndex((m) => m.tag === tag);

/** A callback body as the provider sent it, and the event the old release stored for it. */
interface OldEvent {
  body: JsonObject;
  location: boolean;
  receivedAt: Date;
}

function stored(e: OldEvent, id: number): StoredEvent {
  const n = normaliseCallback(e.body, { receivedAt: e.receivedAt, forceLocation: e.location });
  assert.ok(n.ok);
  return {
    id,
    dedupeKey: n.event.dedupeKey,
    kind: n.event.kind,
    svcOrderId: n.event.svcOrderId,
    clientOrderId: n.event.clientOrderId,
    providerStatus: n.event.providerStatus,
    occurredAt: n.event.occurredAt,
    receivedAt: e.receivedAt,
    payload: e.body,
  };
}

/** Every row of the tables an older release had, by the columns it had (the fingerprint a later migration must keep). */
async function snapshot(sql: TestApp["database"]["sql"], columns: Map<string, string[]>): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  for (const [table, cols] of columns) {
    const rows = await sql.unsafe<{ r: string }[]>(`select row(${cols.map((c) => `"${c}"`).join(", ")})::text as r from ${table} order by 1`);
    out.set(table, rows.map((x) => x.r));
  }
  return out;
}

async function tableColumns(sql: TestApp["database"]["sql"]): Promise<Map<string, string[]>> {
  const rows = await sql<{ table_name: string; column_name: string }[]>`
    select c.table_name, c.column_name from information_schema.columns c
    join information_schema.tables t on t.table_schema = c.table_schema and t.table_name = c.table_name and t.table_type = 'BASE TABLE'
    where c.table_schema = 'public' and c.is_generated = 'NEVER'
      and not exists (select from pg_inherits i where i.inhrelid = format('public.%I', c.table_name)::regclass)
    order by c.table_name, c.ordinal_position`;
  const out = new Map<string, string[]>();
  for (const r of rows) out.set(r.table_name, [...(out.get(r.table_name) ?? []), r.column_name]);
  return out;
}

for (const from of ["0010_order_local_dedupe", "0012_queue_partition_key", "0015_pending_commands_index", "0016_other_svc_ids_index_and_sequences"]) {
  describe(`upgrading a populated database from ${from}`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true" });
      // The older release's schema, in place of this one's.
      await t.database.sql.unsafe(`drop schema public cascade; create schema public; drop schema drizzle cascade; drop schema graphile_worker cascade`);
      await migrateTo(t.testDb.url, from);
    });
    after(async () => {
      await t.close();
    });

    it("keeps every row, and the service works on it afterwards", async () => {
      const sql = t.database.sql;
      const level = levelOf(from);
      const partitioned = level >= levelOf("0011_partitioned_log");
      const queueKeyed = level >= levelOf("0012_queue_partition_key");
      // From 0013 on, a release stores an event's dedupe key in the form of its period.
      const shortKeys = level >= levelOf("0013_short_dedupe_keys");
      const now = Date.now();
      // Events sent hours and days ago; the partitioned log's were received today (its
      // partitions start at the month 0011 ran in), the unpartitioned log's when sent (0011
      // makes partitions for their months).
      const at = (d: Date) => d.toISOString();
      const monthStart = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), 1);
      const sent = (d: Date, body: JsonObject, location = false): OldEvent => ({
        body: { ...body, timestamp: at(d) },
        location,
        receivedAt: partitioned ? new Date(Math.max(now - 60_000, monthStart)) : d,
      });
      const later = (d: Date, ms: number) => new Date(d.getTime() + ms);
      const r1 = new Date(now - 80 * HOUR);
      const r2 = new Date(now - 30 * HOUR);
      const r3 = new Date(now - 2 * HOUR);
      const ev: Record<string, OldEvent[]> = {
        "UP-1": [
          sent(r1, { svc_order_id: "SVC-UP-1", client_order_id: "UP-1", order_status: "ALLOTTED", rider_id: "R1", rider_name: "Ravi", rider_contact: "9000000001" }),
          sent(later(r1, 60_000), { svc_order_id: "SVC-UP-1", client_order_id: "UP-1", order_status: "DELIVERED" }),
        ],
        "UP-2": [
          sent(r2, { svc_order_id: "SVC-UP-2", client_order_id: "UP-2", order_status: "ALLOTTED", rider_id: "R2", rider_name: "Sita", rider_contact: "9000000002" }),
          sent(later(r2, 30_000), { svc_order_id: "SVC-UP-2", rider_id: "R2", latitude: 12.97, longitude: 77.59 }, true),
          sent(later(r2, 60_000), { svc_order_id: "SVC-UP-2", client_order_id: "UP-2", order_status: "COLLECTED" }),
        ],
        "UP-3": [
          sent(r3, { svc_order_id: "SVC-UP-3", client_order_id: "UP-3", order_status: "CREATED" }),
          sent(later(r3, 60_000), { svc_order_id: "SVC-UP-3", client_order_id: "UP-3", order_status: "ARRIVED" }),
        ],
      };
      let nextId = 1;
      const events = new Map(Object.entries(ev).map(([coid, list]) => [coid, list.map((e) => stored(e, nextId++))]));
      const period = (coid: string) => events.get(coid)![0]!.receivedAt.toISOString().slice(0, 10);
      for (const [coid, list] of events) {
        if (partitioned) await sql`insert into order_periods (order_key, period) values (${list[0]!.svcOrderId!}, ${period(coid)})`;
        for (const e of list) {
          const p = partitioned ? period(coid) : null;
          await sql.unsafe(
            `insert into order_events (id, dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload${partitioned ? ", period" : ""})
             overriding system value values ($1, ${shortKeys ? "case when $10::date >= order_events_short_keys_from() then left($2, 32) else $2 end" : "$2"}, $3, $4, $5, $6, $7, $8, $9::text::jsonb${partitioned ? ", $10" : ""})`,
            [e.id, e.dedupeKey, e.kind, e.svcOrderId, e.clientOrderId, e.providerStatus, e.occurredAt, e.receivedAt, JSON.stringify(e.payload), ...(partitioned ? [p] : [])] as never[],
          );
        }
      }
      await sql`select setval(pg_get_serial_sequence('order_events', 'id'), ${nextId - 1})`;

      // The rows the release before projected (its fold state had no rider ids: 0010's).
      const orderIds = new Map<string, number>();
      for (const [coid, list] of events) {
        const projected = coid === "UP-3" ? list.slice(0, 1) : list;
        const s = foldState(projected);
        const p = project(s);
        const old = { ...s, riderName: s.riderName && { ...s.riderName, rider: undefined }, riderContact: s.riderContact && { ...s.riderContact, rider: undefined }, location: s.location && { ...s.location, rider: undefined } };
        const [row] = await sql<{ id: string }[]>`
          insert into orders ${sql({
            client_order_id: coid, svc_order_id: p.svcOrderId, svc_order_ids: p.svcOrderIds, store_code: "BLR-1", status: p.status, provider_status: p.providerStatus, status_at: p.statusAt,
            rider_id: p.rider?.id ?? null, rider_name: p.rider?.name ?? null, rider_contact: p.rider?.contact ?? null,
            rider_latitude: p.rider?.latitude ?? null, rider_longitude: p.rider?.longitude ?? null, rider_location_at: p.rider?.locationAt ?? null,
            placement_state: coid === "UP-1" ? "placed" : "external", event_count: p.eventCount, last_event_at: p.lastEventAt,
            projection_state: encodeState(old), created_at: list[0]!.receivedAt, updated_at: projected.at(-1)!.receivedAt,
          })} returning id::text`;
        orderIds.set(coid, Number(row!.id));
      }
      for (const e of events.get("UP-3")!.slice(1)) {
        if (queueKeyed) await sql`insert into projection_queue (event_id, kind, period) values (${e.id}, ${e.kind}, ${period("UP-3")})`;
        else await sql`insert into projection_queue (event_id) values (${e.id})`;
      }

      const place = { client_order_id: "UP-1", store_code: "BLR-1", customer_details: { name: "Asha", contact_number: "9800000000" } };
      await sql`
        insert into commands (order_id, kind, state, request, request_hash, response, attempts, completed_at)
        values (${orderIds.get("UP-1")!}, 'place', 'succeeded', ${sql.json(place)}, ${"a".repeat(64)}, ${sql.json({ svc_order_id: "SVC-UP-1" })}, 1, now() - interval '3 days'),
               (${orderIds.get("UP-1")!}, 'dispatch_ready', 'failed', '{}', ${"b".repeat(64)}, null, 20, now() - interval '2 days')`;
      await sql`update commands set last_error = 'provider said 400: not ready' where kind = 'dispatch_ready'`;
      await sql`insert into awb_numbers (awb_number, state, client_order_id, allocated_at, source) values ('AWB-1', 'allocated', 'UP-1', now() - interval '3 days', 'pool'), ('AWB-2', 'available', null, null, 'pool')`;
      await sql`insert into awb_requests (mode, request_id, status, count, received, added, completed_at) values ('pool', 'REQ-1', 'completed', 2, 2, 2, now() - interval '3 days')`;
      await sql`insert into notification_endpoints (id, url, events, secret) values ('ep_old', 'http://127.0.0.1:9/hooks', '{}', ${"whsec_" + "x".repeat(32)})`;
      const oldBody = JSON.stringify({ type: "order.status_changed", timestamp: at(r2), data: { order: { client_order_id: "UP-2" }, sequence: 4 } });
      await sql`insert into notification_messages (id, type, order_id, client_order_id, svc_order_id, sequence, body)
                values ('msg_old_4', 'order.status_changed', ${orderIds.get("UP-2")!}, 'UP-2', 'SVC-UP-2', 4, ${oldBody})`;
      const [delivery] = await sql<{ id: string }[]>`
        insert into notification_deliveries (message_id, endpoint_id, status, attempts, last_status_code, delivered_at)
        values ('msg_old_4', 'ep_old', 'delivered', 1, 200, now()) returning id::text`;
      await sql`insert into notification_attempts (delivery_id, status_code, duration_ms) values (${delivery!.id}, 200, 12)`;
      await sql`insert into console_sessions (id, csrf_token, expires_at) values ('sess_old', 'csrf_old', now() + interval '6 hours')`;
      await sql`insert into console_marks (name, value) values ('failed_commands_seen', 2)`;
      await sql`insert into rejected_callbacks (reason, content_type, body, body_bytes) values ('missing_order_id', 'application/json', '{"order_status":"DELIVERED"}', 28)`;

      const columns = await tableColumns(sql);
      const before = await snapshot(sql, columns);
      assert.equal(before.get("order_events")!.length, 7);

      await runMigrations(t.testDb.url, t.log);

      // Nothing lost or changed, in every table and column the release before had.
      const afterwards = await snapshot(sql, columns);
      for (const [table, rows] of before) assert.deepEqual(afterwards.get(table), rows, `${table} after the upgrade`);

      // A callback of the release before, sent again: a duplicate of its first copy.
      const again = await t.callback(ev["UP-2"]![2]!.body);
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), { ok: true, event_id: String(events.get("UP-2")![2]!.id), duplicate: true });

      // The queued events are projected; new callbacks are accepted and projected: UP-2 is
      // reassigned to a rider whose first event names nobody (R2's name, phone and position
      // are not R3's), then delivered.
      const reassigned = await t.callback({ svc_order_id: "SVC-UP-2", client_order_id: "UP-2", order_status: "COLLECTED", rider_id: "R3", timestamp: new Date(Date.now() - 5_000).toISOString() });
      assert.equal(reassigned.status, 200);
      const reassignedId = ((await reassigned.json()) as { event_id: string }).event_id;
      const delivered = await t.callback({ svc_order_id: "SVC-UP-2", client_order_id: "UP-2", order_status: "DELIVERED", timestamp: new Date().toISOString() });
      assert.equal(delivered.status, 200);
      const body = (await delivered.json()) as { event_id: string; duplicate: boolean };
      assert.equal(body.duplicate, false);
      assert.ok(Number(body.event_id) > nextId - 1, "the log's ids continue above the old ones");
      await t.runJobs();

      const order = async (coid: string) => {
        const res = await t.request(`/v1/orders/${coid}`);
        assert.equal(res.status, 200, coid);
        return (await res.json()) as { status: string; rider: { id: string; name: string | null; contact: string | null; latitude: number | null } | null; placement: { state: string } };
      };
      const up1 = await order("UP-1");
      assert.equal(up1.status, "DELIVERED");
      assert.equal(up1.placement.state, "placed");
      assert.deepEqual([up1.rider?.id, up1.rider?.name], ["R1", "Ravi"]);
      const up2 = await order("UP-2");
      assert.equal(up2.status, "DELIVERED");
      assert.deepEqual([up2.rider?.id, up2.rider?.name, up2.rider?.contact, up2.rider?.latitude], ["R3", null, null, null], "no detail of R2 under R3's id");
      assert.equal((await order("UP-3")).status, "ARRIVED");
      const timeline = await t.request("/v1/orders/UP-2/events");
      assert.equal(timeline.status, 200);
      const tl = (await timeline.json()) as { items: { id: string; payload: JsonObject }[] };
      assert.deepEqual(tl.items.map((e) => e.id), [...events.get("UP-2")!.map((e) => String(e.id)), reassignedId, body.event_id]);
      assert.deepEqual(tl.items[0]!.payload, ev["UP-2"]![0]!.body);

      // The order's next notification continues its sequence above the old message's.
      const [next] = await sql<{ sequence: number }[]>`select sequence from notification_messages where client_order_id = 'UP-2' and id <> 'msg_old_4' order by sequence limit 1`;
      assert.equal(next?.sequence, 5);
      const messages = await t.request("/v1/notifications/messages?limit=50");
      assert.equal(messages.status, 200);
      assert.ok(JSON.stringify(await messages.json()).includes("msg_old_4"));
      const commands = await t.request("/v1/commands?state=failed");
      assert.equal(commands.status, 200);
      assert.ok(JSON.stringify(await commands.json()).includes("dispatch_ready"));
      assert.equal((await t.request("/v1/awb/pool")).status, 200);

      // `npm run rebuild` after the upgrade: it changes nothing any order shows (it rewrites
      // the states of the release before, which carry no rider ids).
      const shown = async () => await sql`select client_order_id, status, status_at, rider_id, rider_name, rider_contact, rider_latitude, event_count from orders order by id`;
      const beforeRebuild = await shown();
      await rebuild(sql);
      assert.deepEqual(await shown(), beforeRebuild);
    });
  });
}
