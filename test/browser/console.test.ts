/**
 * The console in a real browser (issue #15): headless Chromium (test/helpers/browser.ts)
 * against a tracklane on a real socket, wired over HTTP to the provider emulator. Signs in
 * through the form, finds orders, watches one being delivered without a reload, cancels
 * one, resolves an unconfirmed placement, retries a failed command, checks the CSRF
 * guard, runs axe-core on every page at 390 and 1280 px, and checks that no page asked
 * anything of another origin. One browser, one app; the tests share them and run in order.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import type { Command, Order } from "../helpers/api.ts";
import { axeRun, chromiumPath, failsPage, launchBrowser, newAxeContext, overflowingElements, pageWidth, recordRequests, signIn } from "../helpers/browser.ts";
import type { AxeViolation, RequestRecorder } from "../helpers/browser.ts";
import { createProviderClient } from "../../src/provider/client.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { HANG_TIMEOUT_MS, placeOrderBody, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";
import { settle } from "../helpers/stack.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;
/** The live poll runs every 5 s: a change shows within one period, plus the time to fetch it. */
const LIVE_WAIT_MS = 9_000;
const WIDTHS = [390, 1280] as const;

/** Where Chromium is, or why it cannot be found (a failure, never a silent skip). */
const chromium = (() => {
  try {
    return { path: chromiumPath() };
  } catch (err) {
    return { missing: err as Error };
  }
})();

it("Chromium for the browser tests is installed (CHROMIUM_PATH, /usr/bin/chromium or chromium on PATH)", (ctx) => {
  if ("missing" in chromium) throw chromium.missing;
  ctx.diagnostic(`Chromium: ${chromium.path}`);
});

// About a minute alone on two vCPUs, longer while other test files run beside it.
describe("the console in a real browser", { timeout: 240_000, skip: "missing" in chromium ? "no Chromium: see the failing test above" : false }, () => {
  let browser: Browser;
  let pair: EmulatorPair;
  let t: TestApp;
  let server: { url: string; close(): Promise<void> };
  let base: string;
  let context: BrowserContext;
  let page: Page;
  const recorders: RequestRecorder[] = [];
  /** Messages the browser reported: page errors and Content-Security-Policy refusals. */
  const problems: string[] = [];

  /** The orders made before the tests: client_order_id, internal id (the console's URLs) and provider id. */
  const orders: Record<"live" | "focus" | "cancel" | "unconfirmed" | "refused" | "doorstep" | "stillUnconfirmed", { coid: string; id: number; svc: string | null }> = {} as never;

  const place = async (): Promise<string> => {
    const body = placeOrderBody();
    const res = await t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(res.status, 202, await res.clone().text());
    await settle(t, pair);
    return body.order_details.client_order_id;
  };
  const orderOf = async (coid: string) => await json<Order>(await t.request(`/v1/orders/${coid}`));
  const internalId = async (coid: string): Promise<number> => {
    const [row] = await t.database.sql<{ id: number }[]>`select id::int as id from orders where client_order_id = ${coid}`;
    assert.ok(row, `order ${coid} exists`);
    return row.id;
  };
  const sandbox = async (coid: string, action: string, body: unknown = {}) => {
    const res = await t.request(`/v1/sandbox/orders/${coid}/${action}`, { method: "POST", json: body });
    assert.equal(res.status, 200, `${action}: ${await res.clone().text()}`);
    await pair.emulator.callbacks.idle();
  };
  const watch = (p: Page) => {
    p.on("pageerror", (err) => problems.push(`${p.url()}: page error: ${err.message}`));
    p.on("console", (m) => {
      if (m.type() === "error" && /Content Security Policy|Refused to/i.test(m.text())) problems.push(`${p.url()}: ${m.text()}`);
    });
    return p;
  };
  /** The status badge of an order's page (the summary's first fact). */
  const statusBadge = (p: Page) => p.locator("dl.facts dt", { hasText: /^Status$/ }).locator("xpath=following-sibling::dd[1]").locator(".badge").first();
  const placementBadge = (p: Page) => p.locator("dl.facts dt", { hasText: /^Placement$/ }).locator("xpath=following-sibling::dd[1]").locator(".badge").first();
  /** The row of the commands table for command `id`. */
  const commandRow = (p: Page, id: number | string) => p.locator("tr", { has: p.locator("td", { hasText: new RegExp(`^#${id} `) }) });

  before(async () => {
    browser = await launchBrowser();
    pair = await startEmulatorPair();
    // The app's provider client is the pair's, which waits long for answered calls, except
    // while the two places whose answers are lost go out (lostPlace).
    let current = pair.client;
    const provider = new Proxy<ProviderClient>(pair.client, { get: (_target, key) => Reflect.get(current, key) as unknown });
    const impatient = createProviderClient({ baseUrl: pair.url, auth: { method: "token", token: TEST_TOKEN }, timeoutMs: HANG_TIMEOUT_MS });
    /** A place held (HANG_MS) past an impatient client's timeout: an unconfirmed order. */
    const lostPlace = async (): Promise<string> => {
      await pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "timeout_after" });
      current = impatient;
      try {
        return await place();
      } finally {
        current = pair.client;
      }
    };
    t = await createTestApp({ COMMAND_RETRY_BASE_MS: "5", COMMAND_MAX_ATTEMPTS: "4" }, { provider });
    server = await t.listen();
    base = server.url;
    pair.emulator.state.callbackUrls = [`${base}/callbacks/${CALLBACK_SECRET}`];

    const live = await place();
    const focus = await place();
    const cancel = await place();
    await pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 400, body: { message: "Failure", errors: { store_code: ["unknown store"] } } });
    const refused = await place();
    // The provider creates this one, but its answer never arrives: tracklane cannot know.
    const unconfirmed = await lostPlace();
    // Left as they are, so the list shows its widest badges (unconfirmed, CUSTOMER_DOOR_STEP,
    // CANCELLED_BY_CUSTOMER) when it is checked at 390 px.
    const stillUnconfirmed = await lostPlace();
    const doorstep = await place();
    await sandbox(doorstep, "allot", { rider_id: 502 });
    await sandbox(doorstep, "doorstep-arrival", { time_arrival: new Date().toISOString(), arrival_lat: 12.97, arrival_lng: 77.59, arrival_accuracy: 8 });
    const returned = await place();
    await sandbox(returned, "allot", { rider_id: 503 });
    await sandbox(returned, "customer-return");
    await settle(t, pair);
    for (const [key, coid] of Object.entries({ live, focus, cancel, refused, unconfirmed, stillUnconfirmed, doorstep }) as [keyof typeof orders, string][]) {
      const o = await orderOf(coid);
      orders[key] = { coid, id: await internalId(coid), svc: o.svc_order_id };
    }
    assert.equal((await orderOf(refused)).placement.state, "failed");
    assert.equal((await orderOf(unconfirmed)).placement.state, "unconfirmed");
    assert.equal((await orderOf(doorstep)).status, "CUSTOMER_DOOR_STEP");
    assert.equal((await orderOf(returned)).status, "CANCELLED_BY_CUSTOMER");

    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    recorders.push(recordRequests(context));
    page = watch(await context.newPage());
  });

  after(async () => {
    await browser?.close();
    await server?.close();
    await pair?.close();
    await t?.close();
  });

  it("a page asked for without a session goes to the sign-in form, and signing in there comes back to it", async () => {
    await page.goto(`${base}/orders`);
    assert.equal(new URL(page.url()).pathname, "/sign-in");
    assert.equal(new URL(page.url()).searchParams.get("next"), "/orders");
    await page.getByLabel("API token").fill("not-the-token-at-all");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: "That is not the API token." }).waitFor();

    await page.getByLabel("API token").fill(API_TOKEN);
    await Promise.all([page.waitForURL(`${base}/orders`), page.getByRole("button", { name: "Sign in" }).click()]);
    await page.getByRole("heading", { level: 1, name: "Orders" }).waitFor();
    assert.ok((await context.cookies()).some((c) => c.name === "tracklane_session" && c.httpOnly && c.sameSite === "Strict"));
    await page.getByRole("navigation", { name: "Console" }).getByRole("link", { name: "Orders" }).waitFor();
  });

  it("finds an order by either id with the search box, and in the list", async () => {
    const { coid, id, svc } = orders.live;
    assert.ok(svc);
    for (const q of [coid, svc]) {
      await page.goto(`${base}/orders`);
      await page.getByRole("searchbox", { name: /Order id/ }).fill(q);
      await Promise.all([page.waitForURL(`${base}/orders/${id}`), page.getByRole("button", { name: "Show" }).click()]);
      await page.getByRole("heading", { level: 1, name: `Order ${coid}` }).waitFor();
    }
    // An id nobody has: the list again, saying so.
    await page.goto(`${base}/orders`);
    await page.getByRole("searchbox", { name: /Order id/ }).fill("NO-SUCH-ORDER");
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByRole("alert").filter({ hasText: "No order has the id NO-SUCH-ORDER" }).waitFor();

    await page.goto(`${base}/orders`);
    const link = page.locator("tbody").getByRole("link", { name: coid, exact: true });
    await Promise.all([page.waitForURL(`${base}/orders/${id}`), link.click()]);
    assert.equal(await statusBadge(page).textContent(), "CREATED");
    assert.equal(await placementBadge(page).textContent(), "placed");
  });

  it("the open order page and the open list follow the delivery without a reload", async () => {
    const { coid, id } = orders.live;
    const list = watch(await context.newPage());
    await list.goto(`${base}/orders`);
    await page.goto(`${base}/orders/${id}`);
    assert.equal(await statusBadge(page).textContent(), "CREATED");
    const row = list.locator("tbody tr", { has: list.getByRole("link", { name: coid, exact: true }) });
    assert.equal(await row.locator(".badge").first().textContent(), "CREATED");
    // A mark on each page's window: a reload would lose it.
    for (const p of [page, list]) await p.evaluate(() => ((globalThis as { stillTheSamePage?: boolean }).stillTheSamePage = true));

    await sandbox(coid, "allot", { rider_id: 501 });
    await sandbox(coid, "collect", { status: "COLLECTED", pickup_lat: 12.935, pickup_lng: 77.614 });
    for (const [lat, lng] of [[12.94, 77.61], [12.95, 77.605], [12.962, 77.598]]) await sandbox(coid, "rider-location", { latitude: lat, longitude: lng, accuracy: 5 });
    await sandbox(coid, "deliver", { status: "DELIVERED", delivery_latitude: 12.9716, delivery_longitude: 77.5946, is_partial_delivery: false });
    await settle(t, pair);
    assert.equal((await orderOf(coid)).status, "DELIVERED");

    const started = Date.now();
    await Promise.all([
      statusBadge(page).filter({ hasText: /^DELIVERED$/ }).waitFor({ timeout: LIVE_WAIT_MS }),
      row.locator(".badge", { hasText: /^DELIVERED$/ }).waitFor({ timeout: LIVE_WAIT_MS }),
    ]);
    const tookMs = Date.now() - started;
    for (const p of [page, list]) assert.equal(await p.evaluate(() => (globalThis as { stillTheSamePage?: boolean }).stillTheSamePage), true, "the page was not reloaded");
    // The rest of the order's page moved with it: rider, path, timeline.
    await page.locator("dl.facts").getByText("Rider 501").waitFor();
    assert.equal(await page.locator("figure svg").count(), 1, "the rider's path is drawn");
    const timeline = page.locator("table").last();
    assert.ok((await timeline.locator(".badge", { hasText: /^DELIVERED$/ }).count()) >= 1, "the timeline shows DELIVERED");
    await timeline.getByText("accepted by the provider").waitFor();
    assert.ok(tookMs < LIVE_WAIT_MS);
    await list.close();
  });

  it("a live update waits while the keyboard focus is inside its region, then lands once the focus leaves, keeping the scroll position", async () => {
    const { coid, id } = orders.focus;
    // Short, so that the page scrolls.
    await page.setViewportSize({ width: 1280, height: 400 });
    await page.goto(`${base}/orders/${id}`);
    assert.equal(await statusBadge(page).textContent(), "CREATED");
    const link = page.locator("[data-live]").getByRole("link", { name: "Cancel the order…" });
    await link.focus();
    await link.evaluate((el: unknown) => ((globalThis as { focused?: unknown }).focused = el));
    /** Whether the focus is still on that very element, still in the page (a swap would have replaced it). */
    const focusKept = () =>
      page.evaluate(() => {
        const g = globalThis as unknown as { focused?: unknown; document: { activeElement: unknown; contains(node: unknown): boolean } };
        return g.focused !== undefined && g.document.activeElement === g.focused && g.document.contains(g.focused);
      });
    assert.equal(await focusKept(), true);

    await sandbox(coid, "allot", { rider_id: 504 });
    await settle(t, pair);
    assert.equal((await orderOf(coid)).status, "ALLOTTED");
    // Longer than one period of the live poll (5 s): the region is left as it is, and the focus where it was.
    const until = Date.now() + 6_500;
    while (Date.now() < until) {
      assert.equal(await focusKept(), true, "the focus stays on the link inside the live region");
      await page.waitForTimeout(250);
    }
    assert.equal(await statusBadge(page).textContent(), "CREATED", "no update while the focus is inside");

    // The focus leaves (to the page, which does not scroll it), and the page is scrolled a little: the update lands, and the page stays where it was.
    await link.evaluate((el: unknown) => (el as { blur(): void }).blur());
    const scrolled = await page.evaluate(() => {
      const g = globalThis as unknown as { scrollTo(x: number, y: number): void; scrollY: number };
      g.scrollTo(0, 120);
      return g.scrollY;
    });
    assert.ok(scrolled > 0, "the page scrolls");
    await statusBadge(page).filter({ hasText: /^ALLOTTED$/ }).waitFor({ timeout: LIVE_WAIT_MS });
    await page.locator("dl.facts").getByText("Rider 504").waitFor();
    assert.equal(await page.evaluate(() => (globalThis as unknown as { scrollY: number }).scrollY), scrolled, "the scroll position is kept");
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it("cancels an order through its confirmation page; the command shows, then the provider's answer", async () => {
    const { coid, id } = orders.cancel;
    await page.goto(`${base}/orders/${id}`);
    await Promise.all([page.waitForURL(`${base}/orders/${id}/cancel`), page.getByRole("link", { name: "Cancel the order…" }).click()]);
    await page.getByRole("heading", { level: 1, name: "Cancel the order?" }).waitFor();
    // The form refuses an empty reason in the browser (required) before anything is sent.
    await page.getByLabel("Reason").fill("customer changed their mind");
    await page.getByLabel("Asked by").selectOption("Customer");
    await Promise.all([page.waitForURL(new RegExp(`/orders/${id}\\?done=cancel&command=\\d+$`)), page.getByRole("button", { name: "Cancel the order" }).click()]);
    const commandId = new URL(page.url()).searchParams.get("command")!;
    await page.getByRole("status").filter({ hasText: `Cancel the order: recorded as command #${commandId}` }).waitFor();
    const row = commandRow(page, commandId);
    assert.match((await row.textContent()) ?? "", /cancel/);
    assert.equal(await row.locator(".badge").first().textContent(), "pending");
    assert.match((await row.locator("td").nth(3).textContent()) ?? "", /waiting/);

    await settle(t, pair);
    await page.reload();
    assert.equal(await row.locator(".badge").first().textContent(), "succeeded");
    const answer = (await row.locator("td").nth(3).textContent()) ?? "";
    assert.ok(answer !== "waiting" && answer.length > 2, `the provider's answer shows: ${answer}`);
    const commands = await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`));
    assert.deepEqual(commands.items.find((c) => String(c.id) === commandId)?.state, "succeeded");
    assert.equal(await statusBadge(page).textContent(), "CANCELLED");
    await page.getByText("Nothing to do: the order is finished.").waitFor();
  });

  it("resolves an unconfirmed placement with the provider's id, through the form", async () => {
    const { coid, id } = orders.unconfirmed;
    const [atProvider, ...more] = await pair.control.orders(coid);
    assert.ok(atProvider, "the provider did create the order");
    assert.equal(more.length, 0);
    const svc = String(atProvider["svc_order_id"]);

    await page.goto(`${base}/orders/${id}`);
    assert.equal(await placementBadge(page).textContent(), "unconfirmed");
    await page.getByRole("link", { name: "Place it again…" }).waitFor();
    // Its place command failed with an unknown outcome: a retry of the command would be refused
    // (it could create a second order), so the page offers the placement's actions instead.
    assert.match((await page.locator("tr", { hasText: "outcome unknown" }).first().textContent()) ?? "", /place/);
    assert.equal(await page.getByRole("link", { name: "Retry…" }).count(), 0, "no Retry… for a place whose outcome is unknown");
    // Its retry page (linked from elsewhere, e.g. a list of failed commands) says why and leads to the placement's actions.
    const [placeCommand] = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`))).items;
    assert.deepEqual([placeCommand?.kind, placeCommand?.state], ["place", "failed"]);
    await page.goto(`${base}/commands/${placeCommand!.id}/retry`);
    await page.getByRole("heading", { level: 1, name: `Command #${placeCommand!.id} (place) is not retried` }).waitFor();
    assert.equal(await page.locator("main form").count(), 0, "no retry form");
    await Promise.all([page.waitForURL(`${base}/orders/${id}/confirm-placement`), page.getByRole("link", { name: "Confirm the placement…" }).click()]);
    await page.getByLabel("The provider's order id").fill(svc);
    await Promise.all([page.waitForURL(new RegExp(`/orders/${id}\\?done=confirm-placement&command=\\d+$`)), page.getByRole("button", { name: "Confirm the placement" }).click()]);
    await page.getByRole("status").filter({ hasText: "Confirm the placement: recorded" }).waitFor();
    assert.equal(await placementBadge(page).textContent(), "placed");
    await page.locator("dl.facts dd", { hasText: svc }).first().waitFor();
    await page.locator("table").last().getByText("placement confirmed by hand").waitFor();
    const order = await orderOf(coid);
    assert.deepEqual([order.placement.state, order.svc_order_id], ["placed", svc]);
  });

  it("shows a failed command with the provider's refusal and retries it through its confirmation page", async () => {
    const { coid, id } = orders.refused;
    await page.goto(`${base}/orders/${id}`);
    assert.equal(await placementBadge(page).textContent(), "failed");
    const failedRow = page.locator("tr", { has: page.locator(".badge", { hasText: /^failed$/ }) }).filter({ hasText: "place" });
    assert.match((await failedRow.textContent()) ?? "", /unknown store/);
    const retry = failedRow.getByRole("link", { name: "Retry…" });
    const href = (await retry.getAttribute("href"))!;
    const commandId = /^\/commands\/(\d+)\/retry$/.exec(href)?.[1];
    assert.ok(commandId, href);
    await Promise.all([page.waitForURL(`${base}${href}`), retry.click()]);
    await page.getByRole("heading", { level: 1, name: `Retry command #${commandId} (place) of order ${coid}?` }).waitFor();
    await Promise.all([page.waitForURL(new RegExp(`/orders/${id}\\?done=retry-command&command=${commandId}$`)), page.getByRole("button", { name: "Retry", exact: true }).click()]);
    await page.getByRole("status").filter({ hasText: `Retry: recorded as command #${commandId}` }).waitFor();
    assert.equal(await commandRow(page, commandId).locator(".badge").first().textContent(), "pending");

    await settle(t, pair);
    await page.reload();
    assert.equal(await commandRow(page, commandId).locator(".badge").first().textContent(), "succeeded");
    assert.equal(await placementBadge(page).textContent(), "placed");
    assert.equal(await page.getByRole("link", { name: "Retry…" }).count(), 0);
    assert.equal((await orderOf(coid)).placement.state, "placed");
  });

  it("refuses a post without the CSRF token, or from elsewhere, with 403 and changes nothing", async () => {
    const { coid, id } = orders.live;
    const commandsBefore = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`))).items.length;
    await page.goto(`${base}/orders/${id}/stop-reattempt`);
    const token = await page.locator("main form input[name=_csrf]").inputValue();
    assert.ok(token.length >= 16);

    // From the page itself (same origin, the session cookie): without the token, with a wrong one.
    const fromPage = async (fields: Record<string, string>) =>
      await page.evaluate(
        async ({ url, fields }) => {
          const res = await fetch(url, { method: "POST", body: new URLSearchParams(fields), redirect: "manual", credentials: "same-origin" });
          return { status: res.status, text: await res.text() };
        },
        { url: `/orders/${id}/stop-reattempt`, fields },
      );
    const none = await fromPage({});
    assert.equal(none.status, 403);
    assert.match(none.text, /CSRF/);
    assert.equal((await fromPage({ _csrf: "x".repeat(token.length) })).status, 403);

    // With the session cookie and the right token, but not from tracklane's pages (no Origin, or another one).
    const cookie = (await context.cookies()).find((c) => c.name === "tracklane_session")!;
    for (const origin of [undefined, "http://evil.example"]) {
      const res = await fetch(`${base}/orders/${id}/stop-reattempt`, {
        method: "POST",
        redirect: "manual",
        headers: { cookie: `tracklane_session=${cookie.value}`, "content-type": "application/x-www-form-urlencoded", ...(origin ? { origin } : {}) },
        body: new URLSearchParams({ _csrf: token }),
      });
      assert.equal(res.status, 403, `origin ${origin ?? "(none)"}`);
    }
    // No session at all.
    const anonymous = await fetch(`${base}/orders/${id}/stop-reattempt`, { method: "POST", redirect: "manual", headers: { origin: base }, body: new URLSearchParams({ _csrf: token }) });
    assert.equal(anonymous.status, 403);
    const commandsAfter = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`))).items.length;
    assert.equal(commandsAfter, commandsBefore, "no command was recorded");
  });

  it("every console page passes axe-core (no serious or critical violation) at 390 and 1280 px and does not scroll sideways at 390 px", async (ctx) => {
    const { live, cancel, unconfirmed, refused } = orders;
    assert.equal((await orderOf(orders.stillUnconfirmed.coid)).placement.state, "unconfirmed");
    const [refusedPlace] = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${refused.coid}/commands`))).items;
    const [stillUnconfirmedPlace] = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${orders.stillUnconfirmed.coid}/commands`))).items;
    const pages: [string, string][] = [
      ["sign-in", "/sign-in"],
      ["needs attention", "/"],
      ["orders", "/orders"],
      ["orders, filtered", "/orders?status=DELIVERED&placement=placed&updated=24h"],
      ["order (delivered, rider's path)", `/orders/${live.id}`],
      ["order (cancelled)", `/orders/${cancel.id}`],
      ["order (placed by hand)", `/orders/${unconfirmed.id}`],
      ["order (unconfirmed placement)", `/orders/${orders.stillUnconfirmed.id}`],
      ["order (at the customer's door)", `/orders/${orders.doorstep.id}`],
      ["cancel confirmation", `/orders/${refused.id}/cancel`],
      ["confirm-placement confirmation", `/orders/${unconfirmed.id}/confirm-placement`],
      ["command retry confirmation", `/commands/${refusedPlace!.id}/retry`],
      ["retry page of a place whose outcome is unknown", `/commands/${stillUnconfirmedPlace!.id}/retry`],
      ["AWB pool", "/awb"],
      ["notifications", "/notifications"],
      ["system", "/system"],
    ];
    // axe in a context that bypasses the CSP (it is injected as an inline script); the
    // same pages also load in the ordinary context, where the CSP holds, for the width check.
    const axeContext = await newAxeContext(browser);
    recorders.push(recordRequests(axeContext));
    const signedOut = watch(await (await browser.newContext()).newPage());
    recorders.push(recordRequests(signedOut.context()));
    const axePage = await axeContext.newPage();
    const axeSignedOut = await (await newAxeContext(browser)).newPage();
    recorders.push(recordRequests(axeSignedOut.context()));
    await signIn(axePage, base, API_TOKEN);

    const failures: string[] = [];
    const summary: string[] = [];
    for (const width of WIDTHS) {
      const viewport = { width, height: 900 };
      for (const p of [page, axePage, signedOut, axeSignedOut]) await p.setViewportSize(viewport);
      for (const [name, path] of pages) {
        const [plain, forAxe] = path === "/sign-in" ? [signedOut, axeSignedOut] : [page, axePage];
        const res = await plain.goto(`${base}${path}`);
        const where = `${name} (${path}) at ${width} px`;
        if (res?.status() !== 200 || new URL(plain.url()).pathname !== path.split("?")[0]) {
          failures.push(`${where}: HTTP ${res?.status()} at ${plain.url()}`);
          summary.push(`${where}: not checked (HTTP ${res?.status()})`);
          continue;
        }
        if (width === 390) {
          const w = await pageWidth(plain);
          if (w.scrollWidth > w.innerWidth) failures.push(`${where}: scrolls sideways (scrollWidth ${w.scrollWidth} > innerWidth ${w.innerWidth}): ${(await overflowingElements(plain)).join(", ")}`);
        }
        await forAxe.goto(`${base}${path}`);
        const violations: AxeViolation[] = await axeRun(forAxe);
        const count = (impact: string) => violations.filter((v) => v.impact === impact).length;
        summary.push(`${where}: critical ${count("critical")}, serious ${count("serious")}, moderate ${count("moderate")}, minor ${count("minor")}${violations.length ? ` (${violations.map((v) => `${v.impact} ${v.id}`).join(", ")})` : ""}`);
        for (const v of violations.filter(failsPage)) failures.push(`${where}: axe ${v.impact} ${v.id} (${v.help}): ${v.targets.join(" | ")}`);
      }
    }
    for (const line of summary) ctx.diagnostic(`axe: ${line}`);
    await axeContext.close();
    await axeSignedOut.context().close();
    await signedOut.context().close();
    assert.deepEqual(failures, []);
  });

  it("a long unbroken id or rider name (as sent) wraps instead of making a page scroll sideways, on a phone and on a wide screen", async () => {
    // 128 characters (the most a client_order_id may have) without a break, and a rider's
    // name from the provider's callback as long and as unbroken.
    const coid = `LONG-${"0123456789".repeat(12)}XYZ`;
    assert.equal(coid.length, 128);
    const body = placeOrderBody({ clientOrderId: coid });
    assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(t, pair);
    const svc = (await orderOf(coid)).svc_order_id;
    assert.ok(svc);
    const rider = `Rider${"Verylongname".repeat(12)}`;
    const res = await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "ALLOTTED", rider_id: 505, rider_name: rider, timestamp: new Date().toISOString() });
    assert.equal(res.status, 200);
    await settle(t, pair);
    const id = await internalId(coid);
    const failures: string[] = [];
    for (const [width, paths] of [
      [390, [`/orders/${id}`, `/orders/${id}/cancel`, "/orders"]],
      [1280, [`/orders/${id}`, "/orders"]],
    ] as const) {
      await page.setViewportSize({ width, height: 900 });
      for (const path of paths) {
        await page.goto(`${base}${path}`);
        const w = await pageWidth(page);
        if (w.scrollWidth > w.innerWidth) failures.push(`${path} at ${width} px: scrollWidth ${w.scrollWidth} > ${w.innerWidth}: ${(await overflowingElements(page)).join(", ")}`);
      }
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${base}/orders/${id}`);
    await page.locator("dl.facts").getByText(rider).waitFor();
    assert.deepEqual(failures, []);
  });

  it("signs out through the header's form; the pages then send to the sign-in form again", async () => {
    await page.goto(`${base}/orders`);
    await Promise.all([page.waitForURL(`${base}/sign-in?signed-out=1`), page.getByRole("button", { name: "Sign out" }).click()]);
    await page.getByRole("status").filter({ hasText: "Signed out." }).waitFor();
    await page.goto(`${base}/orders/${orders.live.id}`);
    assert.equal(new URL(page.url()).pathname, "/sign-in");
  });

  it("no page asked anything of another origin, and the browser reported no CSP refusal or script error", () => {
    const origin = new URL(base).origin;
    const all = recorders.flatMap((r) => r.urls);
    assert.ok(all.length > 50, `requests were recorded (${all.length})`);
    assert.ok(all.some((u) => u.includes("/live")), "the live updates were among them");
    assert.deepEqual(
      recorders.flatMap((r) => r.foreign(origin)),
      [],
    );
    assert.deepEqual(problems, []);
  });
});
