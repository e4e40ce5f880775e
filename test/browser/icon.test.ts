/**
 * The console's icon in a real browser: headless Chromium asks for /favicon.ico when a page
 * names no icon, and reported the 404 as an error on every console page. Now each page
 * links tracklane's own icon, which the Content-Security-Policy (img-src 'self') lets load.
 */
import assert from "node:assert/strict";
import { it } from "node:test";
import type { Page } from "playwright-core";
import { API_TOKEN } from "../helpers/app.ts";
import { chromiumMissing, signIn, useBrowserApp } from "../helpers/browser.ts";

const missing = chromiumMissing();
const app = useBrowserApp(missing);

/** What the browser said while `path` loaded, and whether the page's icon loads as an image under the page's CSP. */
async function visit(page: Page, path: string): Promise<{ errors: string[]; iconLoads: boolean }> {
  const errors: string[] = [];
  const listen = (m: { type(): string; text(): string }) => {
    if (m.type() === "error") errors.push(m.text());
  };
  page.on("console", listen);
  await page.goto(`${app.url}${path}`);
  // The icon is fetched after the page loads, and its failure is reported a little later.
  await page.waitForTimeout(1000);
  const href = await page.locator('link[rel="icon"]').getAttribute("href");
  // Loaded as an image from the page: the page's CSP (img-src) applies, as to the icon.
  const iconLoads =
    href !== null &&
    (await page.evaluate(`new Promise((resolve) => {
      const img = new Image();
      img.onload = () => resolve(true);
      img.onerror = () => resolve(false);
      img.src = ${JSON.stringify(href)};
    })`)) === true;
  page.off("console", listen);
  return { errors, iconLoads };
}

it("no console page makes the browser report a missing icon; each one's icon loads", { skip: missing ? "no Chromium" : false }, async () => {
  const page = await app.browser.newPage();
  const signInPage = await visit(page, "/sign-in");
  assert.deepEqual(signInPage.errors, []);
  assert.ok(signInPage.iconLoads, "the sign-in page's icon loads");
  await signIn(page, app.url, API_TOKEN, "/orders");
  for (const path of ["/orders", "/system"]) {
    const visited = await visit(page, path);
    assert.deepEqual(visited.errors, [], path);
    assert.ok(visited.iconLoads, `${path}: its icon loads`);
  }
});
