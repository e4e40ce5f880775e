/**
 * Personal data out of finished orders (docs/operations.md, "Personal data"):
 * PII_RETENTION_DAYS after an order finished, the customer's details in its commands and the
 * rider's name and contact in its events and row read "[redacted]" through the API; younger
 * and unfinished orders keep theirs; the log still refuses every other change; a repeated
 * place of a redacted order is still recognised.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { redactCommandRequest, redactEventPayload, REDACTED } from "../../src/domain/redact.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { consoleSignIn } from "../helpers/console.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

let t: TestApp;
let emulator: EmulatorPair;
before(async () => {
  emulator = await startEmulatorPair();
  t = await createTestApp({}, { provider: emulator.client });
});
after(async () => {
  await t.close();
  await emulator.close();
});

const json = async <T>(res: Response): Promise<T> => {
  assert.ok(res.ok, `${res.status} ${await res.clone().text()}`);
  return (await res.json()) as T;
};
interface Order {
  status: string;
  rider: { id: string | null; name: string | null; contact: string | null; latitude: number | null } | null;
}
interface Events {
  items: { payload: Record<string, unknown> }[];
}

/** An order placed through tracklane, then delivered (or ended in `finalStatus`) by a rider, its events' times `daysAgo` days back. */
async function deliveredOrder(coid: string, svc: string, daysAgo: number, finalStatus = "DELIVERED"): Promise<void> {
  const body = placeOrderBody({ clientOrderId: coid });
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  await t.runJobs();
  const at = (min: number) => new Date(Date.now() - daysAgo * 86_400_000 + min * 60_000).toISOString();
  const rider = { rider_id: "R-77", rider_name: "Ravi Kumar", rider_contact: "9812345678" };
  await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "ALLOTTED", timestamp: at(0), ...rider, rider_details: { rider_phone: "9812345678", rider_id: "R-77" } });
  await t.callback({ client_order_id: coid, svc_order_id: svc, rider_latitude: 12.97, rider_longitude: 77.59, timestamp: at(5), ...rider });
  await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: finalStatus, timestamp: at(30), ...rider });
  await t.runJobs();
  await finishedDaysAgo(coid, daysAgo);
}

/** As if tracklane had recorded the order's finish `days` ago (retention counts from then, not from the events' times). */
async function finishedDaysAgo(coid: string, days: number): Promise<void> {
  const rows = await t.database.sql`update orders set finished_at = now() - ${days}::int * interval '1 day' where client_order_id = ${coid} and finished_at is not null`;
  assert.equal(rows.count, 1, `${coid} is finished`);
}

describe("redaction of personal data", () => {
  it("the pure functions replace only personal values, at any depth, and say when there is nothing to do", () => {
    assert.deepEqual(redactEventPayload({ rider_name: "A", rider_contact: "1", rider_id: "R", rider_details: { rider_phone: "2", rider_id: "R" }, x: 1 }), {
      rider_name: REDACTED,
      rider_contact: REDACTED,
      rider_id: "R",
      rider_details: { rider_phone: REDACTED, rider_id: "R" },
      x: 1,
    });
    assert.equal(redactEventPayload({ order_status: "ALLOTTED", rider_id: "R" }), null);
    assert.equal(redactEventPayload({ rider_name: REDACTED, rider_contact: null }), null, "already redacted");
    const request = { store_code: "S1", customer_details: { name: "Asha", contact_number: "98", address_line_1: "12 MG Road", city: "Bengaluru", latitude: 12.9, longitude: 77.6 } };
    assert.deepEqual(redactCommandRequest(request), {
      store_code: "S1",
      customer_details: { name: REDACTED, contact_number: REDACTED, address_line_1: REDACTED, city: "Bengaluru", latitude: REDACTED, longitude: REDACTED },
    });
    assert.equal(redactCommandRequest({ shipment_ready_timestamp: "2026-11-23T10:00:00Z" }), null);
    // A `__proto__` key, as JSON.parse makes it (an own key), stays a key.
    const parsed = JSON.parse('{"rider_name":"A","__proto__":{"x":1},"rider_details":{"rider_phone":"2","__proto__":{"y":2}}}') as Record<string, unknown>;
    assert.equal(
      JSON.stringify(redactEventPayload(parsed)),
      '{"rider_name":"[redacted]","__proto__":{"x":1},"rider_details":{"rider_phone":"[redacted]","__proto__":{"y":2}}}',
    );
  });

  it("an order finished more than PII_RETENTION_DAYS ago reads [redacted] everywhere; a recent one keeps its data", async () => {
    await deliveredOrder("PII-OLD", "7700001", 91);
    await deliveredOrder("PII-NEW", "7700002", 10);
    const result = await redactDue(t.database.sql, 90);
    assert.deepEqual(result, { orders: 1, events: 3, commands: 1, failed: [] });

    const old = await json<Order>(await t.request("/v1/orders/PII-OLD"));
    assert.equal(old.status, "DELIVERED", "the status stays");
    assert.deepEqual([old.rider?.id, old.rider?.name, old.rider?.contact, old.rider?.latitude], ["R-77", REDACTED, REDACTED, 12.97], "the rider's id and path stay");
    const events = await json<Events>(await t.request("/v1/orders/PII-OLD/events"));
    const text = JSON.stringify(events);
    assert.ok(!text.includes("Ravi Kumar") && !text.includes("9812345678"), text);
    assert.ok(events.items.some((e) => e.payload["rider_contact"] === REDACTED));
    const [command] = await t.database.sql<{ request: { customer_details: Record<string, unknown> }; redacted_at: Date | null }[]>`
      select c.request, c.redacted_at from commands c join orders o on o.id = c.order_id where o.client_order_id = 'PII-OLD' and c.kind = 'place'`;
    assert.equal(command!.request.customer_details["name"], REDACTED);
    assert.equal(command!.request.customer_details["contact_number"], REDACTED);
    assert.ok(command!.redacted_at);

    const recent = await json<Order>(await t.request("/v1/orders/PII-NEW"));
    assert.deepEqual([recent.rider?.name, recent.rider?.contact], ["Ravi Kumar", "9812345678"]);

    // The console says so too, and offers no number to call.
    const server = await t.listen();
    try {
      const { cookie } = await consoleSignIn(server.url);
      const page = async (coid: string) => {
        const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${coid}`;
        return await (await fetch(`${server.url}/orders/${row!.id}`, { headers: { cookie } })).text();
      };
      const oldPage = await page("PII-OLD");
      assert.match(oldPage, /<dt>Rider<\/dt><dd>(<bdi>)?\[redacted\](<\/bdi>)?, contact \[redacted\]/);
      assert.doesNotMatch(oldPage, /tel:|Ravi Kumar|9812345678/);
      assert.match(await page("PII-NEW"), /<a href="tel:9812345678">9812345678<\/a>/);
    } finally {
      await server.close();
    }

    // Done once: the next run finds nothing; a rebuild keeps the redaction (the log itself is redacted).
    assert.deepEqual(await redactDue(t.database.sql, 90), { orders: 0, events: 0, commands: 0, failed: [] });
    assert.deepEqual(await redactDue(t.database.sql, 0), { orders: 0, events: 0, commands: 0, failed: [] }, "0: never");
  });

  it("a callback with a __proto__ key is redacted like any other: the run neither fails on it nor stops there", async () => {
    const at = new Date(Date.now() - 120 * 86_400_000).toISOString();
    const raw = `{"svc_order_id":"7700009","client_order_id":"PII-PROTO","order_status":"DELIVERED","rider_name":"Asha","rider_contact":"9800000001","event_time":"${at}","__proto__":{"x":1}}`;
    const res = await t.request(`/callbacks/${CALLBACK_SECRET}`, { method: "POST", body: raw, headers: { "content-type": "application/json" } });
    assert.equal(res.status, 200, await res.clone().text());
    await t.runJobs();
    await finishedDaysAgo("PII-PROTO", 120);
    assert.deepEqual(await redactDue(t.database.sql, 90), { orders: 1, events: 1, commands: 0, failed: [] });
    const [row] = await t.database.sql<{ payload: string }[]>`select payload::text from order_events where client_order_id = 'PII-PROTO'`;
    const stored = JSON.parse(row!.payload) as Record<string, unknown>;
    assert.deepEqual(Object.keys(stored).sort(), ["__proto__", "client_order_id", "event_time", "order_status", "rider_contact", "rider_name", "svc_order_id"]);
    assert.deepEqual([stored["rider_name"], stored["rider_contact"]], [REDACTED, REDACTED]);
  });

  it("an order that cannot be redacted holds up no other: it is reported, stays as it was, and goes on a later run", async () => {
    await deliveredOrder("PII-STUCK", "7700011", 95);
    await deliveredOrder("PII-FREE", "7700012", 94);
    const sql = t.database.sql;
    // Something no one foresaw makes this one order's redaction fail.
    await sql`alter table orders add constraint test_stuck check (client_order_id <> 'PII-STUCK' or redacted_at is null)`;
    try {
      const result = await redactDue(sql, 90);
      const [stuck] = await sql<{ id: number }[]>`select id from orders where client_order_id = 'PII-STUCK'`;
      assert.deepEqual(result.failed.map((f) => f.orderId), [stuck!.id]);
      assert.match(String(result.failed[0]!.error), /test_stuck/);
      assert.deepEqual({ ...result, failed: [] }, { orders: 1, events: 3, commands: 1, failed: [] }, "PII-FREE, the one after it");
      assert.equal((await json<Order>(await t.request("/v1/orders/PII-STUCK"))).rider?.name, "Ravi Kumar", "rolled back whole");
      assert.equal((await json<Order>(await t.request("/v1/orders/PII-FREE"))).rider?.name, REDACTED);
    } finally {
      await sql`alter table orders drop constraint test_stuck`;
    }
    assert.deepEqual(await redactDue(sql, 90), { orders: 1, events: 3, commands: 1, failed: [] });
    assert.equal((await json<Order>(await t.request("/v1/orders/PII-STUCK"))).rider?.name, REDACTED);
  });

  it("a repeated place of a redacted order is still recognised by its request's hash (200, no second order)", async () => {
    const body = placeOrderBody({ clientOrderId: "PII-OLD" });
    const res = await t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(res.status, 200, await res.clone().text());
  });

  it("every status that finishes an order makes it due: DELIVERED, CANCELLED, CANCELLED_BY_CUSTOMER, RETURNED_TO_SELLER", async () => {
    const finals = ["DELIVERED", "CANCELLED", "CANCELLED_BY_CUSTOMER", "RETURNED_TO_SELLER"];
    for (const [i, status] of finals.entries()) await deliveredOrder(`PII-END-${i}`, String(7700100 + i), 91, status);
    assert.deepEqual((await redactDue(t.database.sql, 90)).failed, []);
    const rows = await t.database.sql<{ client_order_id: string; status: string; redacted: boolean; rider_name: string | null }[]>`
      select client_order_id, status, redacted_at is not null as redacted, rider_name from orders
      where client_order_id like 'PII-END-%' order by client_order_id`;
    assert.deepEqual(
      rows.map((r) => [r.status, r.redacted, r.rider_name]),
      finals.map((status) => [status, true, REDACTED]),
    );
  });

  it("an event after the finish does not move finished_at: the order is still due from when it finished", async () => {
    await deliveredOrder("PII-LATE", "7700200", 91);
    const finishedAt = async () =>
      (await t.database.sql<{ finished_at: Date }[]>`select finished_at from orders where client_order_id = 'PII-LATE'`)[0]!.finished_at.getTime();
    const before = await finishedAt();
    // A late position of the rider (it changes the row), projected like any other event.
    const late = await t.callback({ client_order_id: "PII-LATE", svc_order_id: "7700200", rider_latitude: 12.99, rider_longitude: 77.61, timestamp: new Date().toISOString() });
    assert.equal(late.status, 200);
    await t.runJobs();
    const [row] = await t.database.sql<{ latitude: number }[]>`select rider_latitude as latitude from orders where client_order_id = 'PII-LATE'`;
    assert.equal(row!.latitude, 12.99, "the late event was projected");
    assert.equal(await finishedAt(), before);
    await redactDue(t.database.sql, 90);
    const [redacted] = await t.database.sql<{ redacted: boolean }[]>`select redacted_at is not null as redacted from orders where client_order_id = 'PII-LATE'`;
    assert.equal(redacted!.redacted, true);
  });

  it("the log still refuses every change but a redaction, and only inside a transaction that declares it", async () => {
    const sql = t.database.sql;
    await assert.rejects(sql`update order_events set payload = payload || '{"rider_name": "[redacted]"}' where client_order_id = 'PII-NEW'`, /append-only/);
    await assert.rejects(
      sql.begin(async (tx) => {
        await tx`set local tracklane.redacting = 'on'`;
        await tx`update order_events set provider_status = 'CANCELLED' where client_order_id = 'PII-NEW' and provider_status = 'DELIVERED'`;
      }),
      /append-only/,
      "other columns stay",
    );
    await assert.rejects(
      sql.begin(async (tx) => {
        await tx`set local tracklane.redacting = 'on'`;
        await tx`update order_events set payload = payload || '{"rider_name": "Someone Else"}' where client_order_id = 'PII-NEW'`;
      }),
      /append-only/,
      "a value may only become [redacted]",
    );
    await assert.rejects(
      sql.begin(async (tx) => {
        await tx`set local tracklane.redacting = 'on'`;
        await tx`update order_events set payload = payload - 'rider_name' where client_order_id = 'PII-NEW'`;
      }),
      /append-only/,
      "keys stay",
    );
    await assert.rejects(
      sql.begin(async (tx) => {
        await tx`set local tracklane.redacting = 'on'`;
        await tx`delete from order_events where client_order_id = 'PII-NEW'`;
      }),
      /append-only/,
    );
  });
});
