/**
 * /docs in a real browser, at 127.0.0.1 as a newcomer opens it: the API reference renders
 * from tracklane alone (no request to another origin, no error), and offers nothing that
 * would reach Scalar's servers: on local hosts Scalar shows "Ask AI" (which sends the
 * OpenAPI document to api.scalar.com), MCP buttons and developer tools (Share, Deploy)
 * unless they are turned off.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import { chromiumMissing, recordRequests, useBrowserApp } from "../helpers/browser.ts";

const missing = chromiumMissing();
const app = useBrowserApp(missing);

it("renders the API reference from tracklane alone, with no error, no Ask AI and no developer tools", { skip: missing && "no Chromium" }, async () => {
  const base = new URL(app.url);
  assert.equal(base.hostname, "127.0.0.1", "a local host, where Scalar would offer Ask AI");
  const context = await app.browser.newContext();
  try {
    const requests = recordRequests(context);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${app.url}/docs`, { waitUntil: "networkidle" });
    await page.getByText("Get an order by client_order_id").first().waitFor({ timeout: 30_000 });
    // The icon is fetched after the page loads, and its failure is reported a little later.
    await page.waitForTimeout(1000);
    assert.deepEqual(requests.foreign(base.origin), []);
    assert.ok(requests.urls.some((u) => u.endsWith("/openapi.json")), requests.urls.join("\n"));
    assert.deepEqual(errors, []);
    for (const offer of [/Ask AI/i, /Developer Tools/i, /^Share$/, /^Deploy$/, /^VS Code$/, /^Cursor$/]) {
      assert.equal(await page.getByText(offer).count(), 0, `${offer.source} is offered`);
    }
  } finally {
    await context.close();
  }
});
