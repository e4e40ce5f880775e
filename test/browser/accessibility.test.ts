/**
 * Accessibility and keyboard use of the console, in a real browser, beyond what axe-core
 * finds (console.test.ts runs axe on every page): a refused form marks its field and takes
 * the focus there, an error page says so in its title, every table has a name, and a page
 * with a failed command does not scroll sideways at 320 px (nor at 640: 200% zoom of 1280).
 */
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { API_TOKEN } from "../helpers/app.ts";
import { chromiumMissing, overflowingElements, pageWidth, signIn, useBrowserApp } from "../helpers/browser.ts";

const missing = chromiumMissing();
const app = useBrowserApp(missing);

/** Submits the page's form with `act`, and waits for the page the post answers with: its response. */
async function submit(page: Page, act: () => Promise<void>) {
  const [res] = await Promise.all([page.waitForResponse((r) => r.request().method() === "POST"), page.waitForEvent("framenavigated"), act()]);
  await page.waitForLoadState();
  return res;
}

/** The focused element's name, its aria-invalid, and the text of what its aria-describedby names. */
const focused = async (page: Page) =>
  (await page.evaluate(`(() => {
    const e = document.activeElement;
    const described = (e.getAttribute("aria-describedby") || "").split(" ").filter(Boolean).map((id) => document.getElementById(id));
    return { name: e.getAttribute("name"), invalid: e.getAttribute("aria-invalid"), describedBy: described.map((d) => d ? d.getAttribute("role") + ": " + d.textContent.trim() : "(missing)") };
  })()`)) as { name: string | null; invalid: string | null; describedBy: string[] };

describe("the console's accessibility", { skip: missing ? "no Chromium" : false, timeout: 120_000 }, () => {
  /** Orders made by callbacks: one with a failed cancel, one whose placement is unconfirmed, one plain. */
  const ids = { cancelled: 0, unconfirmed: 0, plain: 0 };
  let page: Page;

  before(async () => {
    const { t } = app;
    for (const [i, coid] of ["A11Y-1", "A11Y-2", "A11Y-3"].entries()) {
      const res = await t.callback({ sfx_order_id: 9900 + i, client_order_id: coid, order_status: "ALLOTTED", rider_name: "Asha", rider_contact: "+91 98765 43210", event_time: new Date().toISOString() });
      assert.equal(res.status, 200);
    }
    await t.runJobs();
    assert.equal((await t.request("/v1/orders/A11Y-1/cancel", { method: "POST", json: { reason: "customer asked", user: "Seller" } })).status, 202);
    // The states a provider's refusal and a lost answer leave, set directly: what is checked is the pages.
    await t.database.sql`update commands set state = 'failed', attempts = 3, last_error = 'order is already picked up', completed_at = now()`;
    await t.database.sql`update orders set placement_state = 'unconfirmed' where client_order_id = 'A11Y-2'`;
    const rows = await t.database.sql<{ id: number; coid: string }[]>`select id::int as id, client_order_id as coid from orders`;
    const idOf = (coid: string) => rows.find((r) => r.coid === coid)!.id;
    Object.assign(ids, { cancelled: idOf("A11Y-1"), unconfirmed: idOf("A11Y-2"), plain: idOf("A11Y-3") });
    page = await app.browser.newPage({ viewport: { width: 1280, height: 900 } });
    await signIn(page, app.url, API_TOKEN);
  });

  it("a wrong token marks the token field invalid, describes it with the error and focuses it; the title says Error", async () => {
    const page = await app.browser.newPage();
    await page.goto(`${app.url}/sign-in`);
    await page.getByLabel("API token").fill("not-the-token");
    assert.equal((await submit(page, () => page.keyboard.press("Enter"))).status(), 403);
    assert.deepEqual(await focused(page), { name: "token", invalid: "true", describedBy: ["alert: That is not the API token."] });
    assert.equal(await page.title(), "Error: Sign in · tracklane");
    await page.close();
  });

  for (const [what, path, field, value] of [
    ["a cancel without a reason", "cancel", "Reason", "   "],
    ["a confirmation without the provider's id", "confirm-placement", "The provider's order id", "   "],
  ] as const) {
    it(`${what} comes back with its field marked, described by the error and focused, from the keyboard alone`, async () => {
      const id = path === "cancel" ? ids.plain : ids.unconfirmed;
      await page.goto(`${app.url}/orders/${id}/${path}`);
      await page.getByLabel(field).fill(value);
      assert.equal((await submit(page, () => page.keyboard.press("Enter"))).status(), 422);
      const got = await focused(page);
      assert.equal(got.invalid, "true", `the focused field (${got.name}) is marked invalid`);
      assert.equal(got.describedBy.length, 1);
      assert.match(got.describedBy[0]!, /^alert: /);
      assert.match(await page.title(), /^Error: /);
      assert.equal(await page.locator("[aria-invalid]").count(), 1, "only the field the error is about is marked");
    });
  }

  it("a replenish with a count of 0 marks and focuses the count", async () => {
    await page.goto(`${app.url}/awb/replenish`);
    await page.getByLabel("How many").fill("0");
    // The browser's own check (min="1") would stop it first: the server's answer is what is checked.
    await page.evaluate(`document.querySelector("form[action='/awb/replenish']").noValidate = true`);
    assert.equal((await submit(page, () => page.getByRole("button", { name: "Replenish" }).click())).status(), 422);
    const got = await focused(page);
    assert.equal(got.name, "count");
    assert.equal(got.invalid, "true");
    assert.match(got.describedBy[0] ?? "", /^alert: count: /);
  });

  it("an error page's title says so, and differs from the page it stands in for", async () => {
    const titleOf = async (path: string) => {
      await page.goto(`${app.url}${path}`);
      return await page.title();
    };
    assert.equal(await titleOf("/orders"), "Orders · tracklane");
    assert.equal(await titleOf("/orders?q=NO-SUCH-ORDER"), "Error: Orders · tracklane");
    assert.equal(await titleOf("/orders/999999"), "Error: Order not found · tracklane");
  });

  it("every table has an accessible name (its caption or the heading it is under)", async () => {
    const unnamed: string[] = [];
    for (const path of ["/", "/orders", `/orders/${ids.cancelled}`, `/orders/${ids.unconfirmed}`, "/awb", "/notifications", "/system"]) {
      await page.goto(`${app.url}${path}`);
      const tables = (await page.evaluate(`[...document.querySelectorAll("table")].map((t) => {
        const caption = t.querySelector("caption");
        const by = (t.getAttribute("aria-labelledby") || "").split(" ").filter(Boolean).map((id) => document.getElementById(id)?.textContent.trim() ?? "").join(" ");
        return (caption ? caption.textContent.trim() : "") || by || (t.getAttribute("aria-label") ?? "");
      })`)) as string[];
      assert.ok(tables.length > 0 || ["/awb", "/notifications"].includes(path), `${path} has tables`);
      tables.forEach((name, i) => {
        if (name === "") unnamed.push(`${path}: table ${i + 1}`);
      });
    }
    assert.deepEqual(unnamed, []);
  });

  it("an order with a failed command does not scroll sideways at 320 px or at 640 px (200% zoom), and its Retry… is there", async () => {
    const failures: string[] = [];
    for (const width of [320, 640]) {
      await page.setViewportSize({ width, height: 800 });
      for (const path of [`/orders/${ids.cancelled}`, "/", `/orders/${ids.unconfirmed}`, `/orders/${ids.cancelled}/cancel`, "/orders"]) {
        await page.goto(`${app.url}${path}`);
        const w = await pageWidth(page);
        if (w.scrollWidth > w.innerWidth) failures.push(`${path} at ${width} px: scrollWidth ${w.scrollWidth} > ${w.innerWidth}: ${(await overflowingElements(page)).join(", ")}`);
      }
      await page.goto(`${app.url}/orders/${ids.cancelled}`);
      assert.equal(await page.getByRole("link", { name: "Retry…" }).count(), 1, `one Retry… at ${width} px`);
      await page.getByRole("link", { name: "Retry…" }).focus();
      await page.keyboard.press("Enter");
      await page.getByRole("heading", { level: 1, name: /^Retry command/ }).waitFor();
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    assert.deepEqual(failures, []);
  });

  it("each Mark as seen on Needs attention is described by the heading of what it marks", async () => {
    await page.goto(`${app.url}/`);
    const descriptions = (await page.evaluate(`[...document.querySelectorAll("button")].filter((b) => b.textContent.trim() === "Mark as seen").map((b) => {
      const described = (b.getAttribute("aria-describedby") || "").split(" ").filter(Boolean).map((id) => document.getElementById(id));
      return described.length === 1 && described[0] && described[0].closest("section")?.contains(b) ? described[0].textContent : null;
    })`)) as (string | null)[];
    assert.deepEqual(descriptions, ["Failed commands (1)"], "the one listed (a failed command), described by its section's heading");
  });

  it("the skip link takes the keyboard past the header to the page's content", async () => {
    await page.goto(`${app.url}/orders/${ids.plain}`);
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate("document.activeElement.textContent"), "Skip to the page");
    await page.keyboard.press("Enter");
    await page.keyboard.press("Tab");
    assert.equal(await page.evaluate("document.activeElement.closest('main') !== null"), true, "the next Tab lands in main");
  });
});
