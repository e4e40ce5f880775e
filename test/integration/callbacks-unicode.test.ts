/**
 * The same event sent again in another spelling of the same text is a duplicate: escaped
 * (`\u0915`) or literal, with a UTF-8 BOM or without, and names in NFC or NFD (a client or
 * proxy that decomposes "é", or spells a Devanagari nukta letter as two code points).
 * Different text is a different event, and what is stored is the body as first received.
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

type Ack = { ok: boolean; event_id: string; duplicate: boolean };
async function send(raw: string | Uint8Array): Promise<Ack> {
  const res = await t.callback(raw);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as Ack;
}

// "José ड़ राम": é and the Devanagari ड़ each have a one- and a two-code-point spelling
// (U+095C is excluded from composition: NFC spells it as two, U+0921 U+093C).
const NFC_NAME = "Jos\u00e9 \u0921\u093c \u0930\u093e\u092e";
const OTHER_NAME = "Jose\u0301 \u095c \u0930\u093e\u092e";

describe("callbacks in other spellings of the same text", () => {
  it("two normalisation forms of a name are one event; the stored payload is the first one", async () => {
    assert.notEqual(NFC_NAME, OTHER_NAME);
    assert.equal(OTHER_NAME.normalize("NFC"), NFC_NAME);
    const body = (name: string) => JSON.stringify({ sfx_order_id: 5001, client_order_id: "U-1", order_status: "ALLOTTED", rider_name: name, event_time: "2026-11-22T10:00:00Z" });
    const first = await send(body(NFC_NAME));
    assert.equal(first.duplicate, false);
    const again = await send(body(OTHER_NAME));
    assert.deepEqual(again, { ok: true, event_id: first.event_id, duplicate: true });
    const [row] = await t.database.sql<{ n: number; name: string }[]>`select count(*)::int as n, min(payload->>'rider_name') as name from order_events where client_order_id = 'U-1'`;
    assert.deepEqual(row, { n: 1, name: NFC_NAME });
  });

  it("keys in NFD are the same keys", async () => {
    const a = await send(JSON.stringify({ sfx_order_id: 5002, order_status: "ALLOTTED", ["not\u00e9"]: "x", event_time: "2026-11-22T10:00:00Z" }));
    const b = await send(JSON.stringify({ sfx_order_id: 5002, order_status: "ALLOTTED", ["note\u0301"]: "x", event_time: "2026-11-22T10:00:00Z" }));
    assert.deepEqual(b, { ok: true, event_id: a.event_id, duplicate: true });
  });

  it("escaped, literal and BOM-prefixed bodies are one event", async () => {
    const literal = '{"sfx_order_id":5003,"order_status":"ALLOTTED","rider_name":"कमल 😀"}';
    const escaped = '{"sfx_order_id":5003,"order_status":"ALLOTTED","rider_name":"\\u0915\\u092e\\u0932 \\ud83d\\ude00"}';
    const first = await send(literal);
    assert.equal(first.duplicate, false);
    assert.deepEqual(await send(escaped), { ok: true, event_id: first.event_id, duplicate: true });
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(literal, "utf8")]);
    assert.deepEqual(await send(bom), { ok: true, event_id: first.event_id, duplicate: true });
  });

  it("text that differs (not only in its form) is another event", async () => {
    const a = await send(JSON.stringify({ sfx_order_id: 5004, order_status: "ALLOTTED", rider_name: "राम" }));
    const b = await send(JSON.stringify({ sfx_order_id: 5004, order_status: "ALLOTTED", rider_name: "रामा" }));
    assert.equal(b.duplicate, false);
    assert.notEqual(a.event_id, b.event_id);
  });

  it("an id of 128 characters beyond the BMP (256 UTF-16 units) is an id, as the API takes it", async () => {
    const coid = "😀".repeat(128);
    const res = await t.callback({ client_order_id: coid, order_status: "CREATED", event_time: "2026-11-22T10:00:00Z" });
    assert.equal(res.status, 200, await res.clone().text());
    await t.runJobs();
    const order = await t.request(`/v1/orders/${encodeURIComponent(coid)}`);
    assert.equal(order.status, 200);
    assert.equal(((await order.json()) as { event_count: number }).event_count, 1);
    const tooLong = await t.callback({ client_order_id: "😀".repeat(129), order_status: "CREATED" });
    assert.equal(tooLong.status, 422);
  });
});
