/**
 * A rider's number on the order page is a link a phone can dial: a `tel:` URI of its
 * digits in ASCII with its "+", whatever digits or separators the provider sent it in
 * (Devanagari, full width, spaces, dashes); the number shows as sent.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { consoleSignIn } from "../helpers/console.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

it("a rider's number in Devanagari or full-width digits links to tel: in ASCII digits", async () => {
  const cases: [string, string][] = [
    ["+91 ९८७६५ ४३२१०", "tel:+919876543210"],
    ["＋９１ ９８７６５-４３２１０", "tel:+919876543210"],
    ["98765-43210", "tel:9876543210"],
  ];
  for (const [i, [contact]] of cases.entries()) {
    const res = await t.callback({ sfx_order_id: 8800 + i, client_order_id: `TEL-${i}`, order_status: "ALLOTTED", rider_name: "राम", rider_contact: contact, event_time: "2026-11-22T10:00:00Z" });
    assert.equal(res.status, 200);
  }
  await t.runJobs();
  const server = await t.listen();
  try {
    const { cookie } = await consoleSignIn(server.url);
    for (const [i, [contact, href]] of cases.entries()) {
      const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${`TEL-${i}`}`;
      const page = await (await fetch(`${server.url}/orders/${row!.id}`, { headers: { cookie } })).text();
      const link = /<a href="(tel:[^"]*)">([^<]*)<\/a>/.exec(page);
      assert.deepEqual([link?.[1], link?.[2]], [href, contact], contact);
    }
  } finally {
    await server.close();
  }
});
