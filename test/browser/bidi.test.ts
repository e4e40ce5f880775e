/**
 * Right-to-left text in the console (an Urdu or Arabic rider name, a Hebrew order id) keeps
 * to itself: what stands beside it stays in reading order. Without isolation, the name's
 * right-to-left run took in the contact after it, and "+91 98765 43210" showed as
 * "43210 98765 91+", left of the name.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { API_TOKEN } from "../helpers/app.ts";
import { chromiumMissing, signIn, useBrowserApp } from "../helpers/browser.ts";

const missing = chromiumMissing();
const app = useBrowserApp(missing);

it("an order's right-to-left rider name does not reorder the contact beside it", { skip: missing ? "no Chromium" : false }, async () => {
  const { t } = app;
  const res = await t.callback({ sfx_order_id: 7701, client_order_id: "RTL-1", order_status: "ALLOTTED", rider_name: "محمد علی", rider_contact: "+91 98765 43210", event_time: "2026-11-22T10:00:00Z" });
  assert.equal(res.status, 200);
  await t.runJobs();
  const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = 'RTL-1'`;
  const page = await app.browser.newPage({ viewport: { width: 390, height: 900 } });
  try {
    await signIn(page, app.url, API_TOKEN, `/orders/${row!.id}`);
    // Where the name's glyphs and the contact link are drawn, and the order of the
    // contact's own characters on screen (by the left edge of each one).
    const drawn = await page.evaluate(`(() => {
      const dd = [...document.querySelectorAll("dt")].find((d) => d.textContent === "Rider").nextElementSibling;
      const link = dd.querySelector("a");
      const nameNode = [...dd.childNodes].find((n) => n.textContent.includes("محمد"));
      const range = document.createRange();
      range.selectNodeContents(nameNode);
      const name = range.getBoundingClientRect();
      const text = link.textContent.trim();
      const textNode = link.firstChild.nodeType === 3 ? link.firstChild : link.firstChild.firstChild;
      const lefts = [...text].map((_, i) => {
        const r = document.createRange();
        r.setStart(textNode, i);
        r.setEnd(textNode, i + 1);
        return r.getBoundingClientRect().left;
      });
      return { nameRight: name.right, linkLeft: link.getBoundingClientRect().left, inOrder: lefts.every((x, i) => i === 0 || x >= lefts[i - 1]) };
    })()`) as { nameRight: number; linkLeft: number; inOrder: boolean };
    assert.ok(drawn.linkLeft >= drawn.nameRight, `the contact is drawn left of the name: ${JSON.stringify(drawn)}`);
    assert.ok(drawn.inOrder, "the contact's characters are drawn in reading order");
  } finally {
    await page.close();
  }
});
