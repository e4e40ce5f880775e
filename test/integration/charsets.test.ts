/**
 * Bodies are read as UTF-8, strictly, or in the charset they name: a callback in
 * ISO-8859-1 or UTF-16 is stored (the provider does not retry a refused callback: it was
 * lost), a UTF-8 body mislabelled ISO-8859-1 is not turned into mojibake, and an API body
 * with bytes that are not UTF-8 is refused instead of reaching the provider with U+FFFD
 * in place of its letters.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

type Ack = { ok: boolean; event_id: string; duplicate: boolean };
type Err = { error: { code: string; message: string } };
const JSON_TYPE = "application/json";
const storedName = async (eventId: string) =>
  (await t.database.sql<{ name: string }[]>`select payload->>'rider_name' as name from order_events where id = ${Number(eventId)}`)[0]?.name;

describe("callbacks in other charsets", () => {
  const body = '{"sfx_order_id":6001,"order_status":"ALLOTTED","rider_name":"José Müller","event_time":"2026-11-22T10:00:00Z"}';

  it("ISO-8859-1, as its charset says, is stored; the same event in UTF-8 or UTF-16 is its duplicate", async () => {
    const latin1 = await t.callback(Buffer.from(body, "latin1"), { headers: { "content-type": `${JSON_TYPE}; charset=ISO-8859-1` } });
    assert.equal(latin1.status, 200, await latin1.clone().text());
    const first = (await latin1.json()) as Ack;
    assert.equal(first.duplicate, false);
    assert.equal(await storedName(first.event_id), "José Müller");
    const utf8 = (await (await t.callback(body)).json()) as Ack;
    assert.deepEqual(utf8, { ok: true, event_id: first.event_id, duplicate: true });
    const bom = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(body, "utf16le")]);
    assert.deepEqual(await (await t.callback(bom)).json(), { ok: true, event_id: first.event_id, duplicate: true });
    const labelled = await t.callback(Buffer.from(body, "utf16le"), { headers: { "content-type": `${JSON_TYPE}; charset="UTF-16LE"` } });
    assert.deepEqual(await labelled.json(), { ok: true, event_id: first.event_id, duplicate: true });
  });

  it("UTF-8 labelled ISO-8859-1 is read as the UTF-8 it is", async () => {
    const res = await t.callback(Buffer.from('{"sfx_order_id":6002,"order_status":"ALLOTTED","rider_name":"कमल"}', "utf8"), { headers: { "content-type": `${JSON_TYPE}; charset=iso-8859-1` } });
    assert.equal(res.status, 200);
    assert.equal(await storedName(((await res.json()) as Ack).event_id), "कमल");
  });

  it("bytes that are not UTF-8 and name no charset, or one unknown, are refused and recorded", async () => {
    const bytes = Buffer.from('{"sfx_order_id":6003,"order_status":"ALLOTTED","rider_name":"José"}', "latin1");
    const plain = await t.callback(bytes);
    assert.equal(plain.status, 400);
    assert.match(((await plain.json()) as Err).error.message, /not valid UTF-8/);
    const unknown = await t.callback(bytes, { headers: { "content-type": `${JSON_TYPE}; charset=x-klingon` } });
    assert.equal(unknown.status, 400);
    assert.match(((await unknown.json()) as Err).error.message, /charset "x-klingon" is not one tracklane can read/);
  });
});

describe("rejected callbacks in other charsets", () => {
  it("are kept as read in their charset, not with U+FFFD for their letters", async () => {
    const res = await t.callback(Buffer.from('{"order_status":"ALLOTTED","rider_name":"José Müller"}', "latin1"), { headers: { "content-type": `${JSON_TYPE}; charset=ISO-8859-1` } });
    assert.equal(res.status, 422);
    const list = (await (await t.request("/v1/callbacks/rejected")).json()) as { items: { reason: string; body: string }[] };
    assert.equal(list.items[0]?.reason, "missing_order_id");
    assert.equal(list.items[0]?.body, '{"order_status":"ALLOTTED","rider_name":"José Müller"}');
  });
});

describe("API bodies", () => {
  it("a place whose customer name is not valid UTF-8 is a 400, and no order is made", async () => {
    const order = placeOrderBody();
    const text = JSON.stringify({ ...order, customer_details: { ...order.customer_details, name: "José" } });
    const res = await t.request("/v1/orders", { method: "POST", body: Buffer.from(text, "latin1"), headers: { "content-type": JSON_TYPE } });
    const answer = (await res.json()) as Err;
    assert.equal(res.status, 400, JSON.stringify(answer));
    assert.equal(answer.error.code, "invalid_json");
    assert.match(answer.error.message, /not valid UTF-8/);
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from orders where client_order_id = ${order.order_details.client_order_id}`;
    assert.equal(row?.n, 0);
  });

  it("a place in ISO-8859-1, as its charset says, keeps the customer's name", async () => {
    const order = placeOrderBody();
    const text = JSON.stringify({ ...order, customer_details: { ...order.customer_details, name: "José Müller" } });
    const res = await t.request("/v1/orders", { method: "POST", body: Buffer.from(text, "latin1"), headers: { "content-type": `${JSON_TYPE}; charset=ISO-8859-1` } });
    assert.equal(res.status, 202, await res.clone().text());
    const [row] = await t.database.sql<{ name: string }[]>`
      select request->'customer_details'->>'name' as name from commands c join orders o on o.id = c.order_id
      where o.client_order_id = ${order.order_details.client_order_id} and c.kind = 'place'`;
    assert.equal(row?.name, "José Müller");
  });
});
