/**
 * The console's doors (docs/console.md): signing in with the API token, the session
 * cookie and its end, the CSRF token and Origin on every post, the limit on failed
 * sign-ins, the headers that keep pages private; and the orders pages' refusals of bad
 * input. Real PostgreSQL and a real HTTP server; the browser tests drive the same pages.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { API_TOKEN, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { consoleSignIn } from "../helpers/console.ts";
import { CONSOLE_FORM_MAX_BYTES, consoleRoutes } from "../../src/http/console/index.ts";
import { insertPlacedOrder, recordPlacementEnded } from "../../src/orders/store.ts";

let t: TestApp;
let base: string;
let server: { url: string; close(): Promise<void> };

before(async () => {
  t = await createTestApp();
  server = await t.listen();
  base = server.url;
});
after(async () => {
  await server.close();
  await t.close();
});

const form = (fields: Record<string, string>) => ({
  method: "POST",
  redirect: "manual" as const,
  headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
  body: new URLSearchParams(fields),
});

const signIn = () => consoleSignIn(base, "/orders");

let orderNo = 0;
/** An order known to tracklane (both ids), projected; its internal id. */
async function newOrder(status = "ALLOTTED"): Promise<number> {
  orderNo++;
  const res = await t.callback({ client_order_id: `CA-${orderNo}`, svc_order_id: String(770_000 + orderNo), order_status: status, timestamp: "2026-11-23T10:00:00Z" });
  assert.equal(res.status, 200);
  await t.runJobs();
  const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${`CA-${orderNo}`}`;
  return row!.id;
}

describe("signing in and out", () => {
  it("without a session every page sends the browser to sign in, and back after it", async () => {
    for (const path of ["/", "/orders", "/orders/1", "/awb", "/notifications", "/system"]) {
      const res = await fetch(`${base}${path}`, { redirect: "manual" });
      assert.equal(res.status, 303, path);
      assert.equal(res.headers.get("location"), `/sign-in?next=${encodeURIComponent(path)}`, path);
    }
    const page = await fetch(`${base}/sign-in?next=%2Forders%3Fstatus%3DDELIVERED`);
    assert.equal(page.status, 200);
    const res = await fetch(`${base}/sign-in`, form({ token: API_TOKEN, next: "/orders?status=DELIVERED" }));
    assert.equal(res.headers.get("location"), "/orders?status=DELIVERED");
  });

  it("the cookie is HttpOnly, SameSite=Strict, lasts CONSOLE_SESSION_HOURS, and the database keeps only the token's hash", async () => {
    const res = await fetch(`${base}/sign-in`, form({ token: API_TOKEN }));
    const cookie = res.headers.get("set-cookie")!;
    assert.match(cookie, /^tracklane_session=[\w-]{43}; Max-Age=43200; Path=\/; HttpOnly; SameSite=Strict$/);
    assert.doesNotMatch(cookie, /Secure/, "PUBLIC_URL is http here");
    const token = cookie.split(";")[0]!.split("=")[1]!;
    const rows = await t.database.sql<{ id: string }[]>`select id from console_sessions`;
    assert.ok(rows.length > 0);
    assert.ok(rows.every((r) => r.id !== token && /^[0-9a-f]{64}$/.test(r.id)));
  });

  it("a wrong token is refused (403) with the page again; only a path of this site is a place to come back to", async () => {
    const wrong = await fetch(`${base}/sign-in`, form({ token: "not-the-token" }));
    assert.equal(wrong.status, 403);
    assert.match(await wrong.text(), /That is not the API token/);
    assert.equal(wrong.headers.get("set-cookie"), null);
    for (const next of ["//evil.example/x", "https://evil.example/", "/\\evil.example"]) {
      const res = await fetch(`${base}/sign-in`, form({ token: API_TOKEN, next }));
      assert.equal(res.headers.get("location"), "/", next);
    }
  });

  it("a place to come back to holding a control character is refused, not a 500 after a good sign-in", async () => {
    for (const next of ["/orders\x01", "/\x7f", "/a\x1bb"]) {
      const res = await fetch(`${base}/sign-in`, form({ token: API_TOKEN, next }));
      assert.equal(res.status, 303, JSON.stringify(next));
      assert.equal(res.headers.get("location"), "/", JSON.stringify(next));
    }
    // Signed in already, the sign-in page sends the browser straight on: the same check.
    const { cookie } = await signIn();
    const res = await fetch(`${base}/sign-in?next=%2Forders%01`, { headers: { cookie }, redirect: "manual" });
    assert.equal(res.status, 303);
    assert.equal(res.headers.get("location"), "/");
  });

  it("a sign-in from another site's page (Origin) is 403 even with the right token", async () => {
    const res = await fetch(`${base}/sign-in`, { ...form({ token: API_TOKEN }), headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://evil.example" } });
    assert.equal(res.status, 403);
    assert.equal(res.headers.get("set-cookie"), null);
  });

  it("signing out ends the session for every copy of the cookie", async () => {
    const { cookie, csrf } = await signIn();
    const out = await fetch(`${base}/sign-out`, { ...form({ _csrf: csrf }), headers: { ...form({}).headers, cookie } });
    assert.equal(out.status, 303);
    assert.equal(out.headers.get("location"), "/sign-in?signed-out=1");
    assert.match(out.headers.get("set-cookie") ?? "", /tracklane_session=;.*Max-Age=0/);
    const again = await fetch(`${base}/orders`, { headers: { cookie }, redirect: "manual" });
    assert.equal(again.status, 303, "the old cookie opens nothing");
  });

  it("a new API_TOKEN ends the sessions signed in with the old one", async () => {
    const { cookie } = await signIn();
    // The same database, a process given another API_TOKEN (a token taken back after a leak).
    const pages = (apiToken: string) => consoleRoutes({ config: { ...t.config, apiToken }, sql: t.database.sql, readSql: t.database.readSql, log: t.log });
    const withToken = async (apiToken: string) => (await pages(apiToken).request("/orders", { headers: { cookie }, redirect: "manual" })).status;
    assert.equal(await withToken(API_TOKEN), 200, "the token it was signed in with");
    assert.equal(await withToken("a-new-api-token-after-a-leak-0123"), 303, "sent to sign in again");
  });

  it("an expired session opens nothing", async () => {
    const { cookie } = await signIn();
    await t.database.sql`update console_sessions set expires_at = now() - interval '1 second'`;
    const res = await fetch(`${base}/orders`, { headers: { cookie }, redirect: "manual" });
    assert.equal(res.status, 303);
  });

  it("a form posted after its session ended is 403 with the sign-in form saying nothing was done, back to the page it came from; signing out is done", async () => {
    const { cookie, csrf } = await signIn();
    await t.database.sql`update console_sessions set expires_at = now() - interval '1 second'`;
    const posted = (path: string, referer: string) =>
      fetch(`${base}${path}`, { ...form({ _csrf: csrf, upto: "0" }), headers: { ...form({}).headers, cookie, referer } });
    const res = await posted("/attention/rejected-seen", `${base}/orders?status=DELIVERED`);
    assert.equal(res.status, 403);
    const page = await res.text();
    assert.match(page, /Your session has ended, so that was not done: sign in, then do it again\./);
    assert.match(page, /<input type="hidden" name="next" value="\/orders\?status=DELIVERED"/);
    // A Referer of another site is no place to come back to.
    const elsewhere = await (await posted("/attention/rejected-seen", "https://elsewhere.example/orders")).text();
    assert.match(elsewhere, /<input type="hidden" name="next" value="\/"/);
    const out = await posted("/sign-out", `${base}/orders`);
    assert.equal(out.status, 303);
    assert.equal(out.headers.get("location"), "/sign-in?signed-out=1");
  });
});

describe("forms", () => {
  it("a post without the CSRF token, with a wrong one, or from another Origin is 403 and changes nothing", async () => {
    const { cookie, csrf } = await signIn();
    const id = await newOrder();
    const post = (fields: Record<string, string>, origin: string | null) =>
      fetch(`${base}/orders/${id}/stop-reattempt`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", cookie, ...(origin ? { origin } : {}) },
        body: new URLSearchParams(fields),
      });
    assert.equal((await post({}, base)).status, 403);
    assert.equal((await post({ _csrf: "x".repeat(43) }, base)).status, 403);
    assert.equal((await post({ _csrf: csrf }, "https://evil.example")).status, 403);
    assert.equal((await post({ _csrf: csrf }, null)).status, 403, "no Origin at all");
    const [none] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from commands where order_id = ${id}`;
    assert.equal(none!.n, 0);
    const ok = await post({ _csrf: csrf }, base);
    assert.equal(ok.status, 303);
    assert.match(ok.headers.get("location")!, new RegExp(`^/orders/${id}\\?done=stop-reattempt&command=\\d+$`));
    const [one] = await t.database.sql<{ kind: string }[]>`select kind from commands where order_id = ${id}`;
    assert.equal(one!.kind, "stop_reattempt");
  });

  it("a cancel without a reason is 422 naming the field; with one it is recorded and the order's page says so", async () => {
    const { cookie, csrf } = await signIn();
    const id = await newOrder();
    const headers = { "content-type": "application/x-www-form-urlencoded", cookie, origin: base };
    const bad = await fetch(`${base}/orders/${id}/cancel`, { method: "POST", headers, body: new URLSearchParams({ _csrf: csrf, reason: " ", user: "Seller" }) });
    assert.equal(bad.status, 422);
    assert.match(await bad.text(), /reason: give a reason/);
    const ok = await fetch(`${base}/orders/${id}/cancel`, { method: "POST", redirect: "manual", headers, body: new URLSearchParams({ _csrf: csrf, reason: "customer asked", user: "Customer" }) });
    assert.equal(ok.status, 303);
    const page = await (await fetch(`${base}${ok.headers.get("location")}`, { headers: { cookie } })).text();
    assert.match(page, /Cancel the order: recorded as command #\d+/);
    assert.match(page, /#\d+ cancel/);
    const [row] = await t.database.sql<{ request: { reason: string; user: string } }[]>`select request from commands where order_id = ${id} and kind = 'cancel'`;
    assert.deepEqual(row!.request, { reason: "customer asked", user: "Customer" });
  });

  it("a cancel's reason is held to what the API (and the provider) take: over 128 characters is 422, nothing recorded", async () => {
    const { cookie, csrf } = await signIn();
    const id = await newOrder();
    const headers = { "content-type": "application/x-www-form-urlencoded", cookie, origin: base };
    const cancel = (reason: string) => fetch(`${base}/orders/${id}/cancel`, { method: "POST", redirect: "manual", headers, body: new URLSearchParams({ _csrf: csrf, reason, user: "Seller" }) });
    const long = await cancel("r".repeat(129));
    assert.equal(long.status, 422);
    assert.match(await long.text(), /reason: must be at most 128 characters/);
    assert.equal((await t.database.sql`select 1 from commands where order_id = ${id}`).length, 0, "nothing recorded");
    const page = await (await fetch(`${base}/orders/${id}/cancel`, { headers: { cookie } })).text();
    assert.match(page, /<input name="reason" required="" maxlength="128"/, "the form says so before it is sent");
    assert.equal((await cancel("r".repeat(128))).status, 303);
  });

  it("an order whose placement the provider refused says to retry it, not to wait for it", async () => {
    const { cookie } = await signIn();
    const id = await t.database.sql.begin(async (tx) => {
      const { orderId } = await insertPlacedOrder(tx, { clientOrderId: "CA-REFUSED", storeCode: null, pickupOtp: null, at: new Date() });
      await recordPlacementEnded(tx, orderId, "failed", "store_code: unknown store");
      return orderId;
    });
    const page = await (await fetch(`${base}/orders/${id}`, { headers: { cookie } })).text();
    const actions = /<h2>Actions<\/h2>(.*?)<h2>/s.exec(page)![1]!;
    assert.match(actions, /refused this order&#39;s placement/);
    assert.doesNotMatch(actions, /wait for its placement/);
  });

  it("an action the order's state does not allow is 409 with the reason, on the confirmation page", async () => {
    const { cookie, csrf } = await signIn();
    const id = await newOrder("DELIVERED");
    const res = await fetch(`${base}/orders/${id}/cancel`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: base },
      body: new URLSearchParams({ _csrf: csrf, reason: "too late", user: "Seller" }),
    });
    assert.equal(res.status, 409);
    assert.match(await res.text(), /class="error" role="alert">order is already DELIVERED</);
  });
});

describe("what a form or query may hold", () => {
  it("a form larger than the console takes is 413 before anything reads it, signed in or not", async () => {
    const big = "x".repeat(CONSOLE_FORM_MAX_BYTES + 1);
    // No Origin either: the size is refused first, and the body never parsed.
    const anonymous = await fetch(`${base}/sign-in`, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: `token=${big}` });
    assert.equal(anonymous.status, 413);
    assert.match(await anonymous.text(), /at most 16384 bytes/);
    const { cookie, csrf } = await signIn();
    const id = await newOrder();
    const res = await fetch(`${base}/orders/${id}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin: base },
      body: new URLSearchParams({ _csrf: csrf, reason: big, user: "Seller" }),
    });
    assert.equal(res.status, 413);
    const [none] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from commands where order_id = ${id}`;
    assert.equal(none!.n, 0);
  });

  it("a sign-in from another site is refused before its form is read", async () => {
    // Not form-encoded: a handler that parsed first would still answer 403, so the order is
    // shown by a body the parser would reject (a multipart body without its boundary).
    const res = await fetch(`${base}/sign-in`, { method: "POST", headers: { "content-type": "multipart/form-data", origin: "https://evil.example" }, body: "--x" });
    assert.equal(res.status, 403);
    // From this site, the same body is a 400 that says why, not a 500.
    const own = await fetch(`${base}/sign-in`, { method: "POST", headers: { "content-type": "multipart/form-data", origin: base }, body: "--x" });
    assert.equal(own.status, 400);
    assert.match(await own.text(), /the form could not be read/);
  });

  it("a NUL in a query or a form field is 400 naming the field, never a database error", async () => {
    const { cookie, csrf } = await signIn();
    const id = await newOrder();
    const logged = t.logLines.length;
    for (const path of ["/orders?q=%00", "/orders?store=a%00b", "/orders/rows?store=%00"]) {
      const res = await fetch(`${base}${path}`, { headers: { cookie } });
      assert.equal(res.status, 400, path);
      assert.match(await res.text(), /field (q|store) holds a character that cannot be stored/, path);
    }
    const headers = { "content-type": "application/x-www-form-urlencoded", cookie, origin: base };
    for (const [action, fields] of [
      ["cancel", { reason: "a\u0000b", user: "Seller" }],
      ["confirm-placement", { svc_order_id: "1\u00002" }],
    ] as const) {
      const res = await fetch(`${base}/orders/${id}/${action}`, { method: "POST", headers, body: new URLSearchParams({ _csrf: csrf, ...fields }) });
      assert.equal(res.status, 400, action);
      assert.match(await res.text(), /field (reason|svc_order_id) holds a character/, action);
    }
    const errors = t.logLines.slice(logged).filter((l) => l.includes('"level":50'));
    assert.deepEqual(errors, [], "no error logged");
  });

  it("the provider's track_url is a link only when it is http or https", async () => {
    const { cookie } = await signIn();
    orderNo++;
    for (const [n, url] of [[1, "javascript:alert(document.domain)"], [2, "https://track.example.com/t/1"]] as const) {
      const res = await t.callback({ client_order_id: `CT-${orderNo}-${n}`, svc_order_id: String(880_000 + orderNo * 10 + n), order_status: "ALLOTTED", track_url: url, timestamp: "2026-11-23T10:00:00Z" });
      assert.equal(res.status, 200);
    }
    await t.runJobs();
    const page = async (n: number) => {
      const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${`CT-${orderNo}-${n}`}`;
      return await (await fetch(`${base}/orders/${row!.id}`, { headers: { cookie } })).text();
    };
    const unsafe = await page(1);
    assert.doesNotMatch(unsafe, /href="javascript:/);
    assert.match(unsafe, /<dt>Tracking<\/dt><dd>javascript:alert\(document.domain\)<\/dd>/);
    assert.match(await page(2), /<a href="https:\/\/track.example.com\/t\/1" rel="noreferrer noopener">/);
  });
});

describe("the orders pages", () => {
  it("search by either id goes to the order; an unknown id is 404 naming it; a bad filter is 400 naming it", async () => {
    const { cookie } = await signIn();
    const id = await newOrder();
    const get = (q: string) => fetch(`${base}/orders?${q}`, { headers: { cookie }, redirect: "manual" });
    for (const q of [`CA-${orderNo}`, String(770_000 + orderNo)]) {
      const res = await get(`q=${q}`);
      assert.equal(res.status, 303, q);
      assert.equal(res.headers.get("location"), `/orders/${id}`);
    }
    const unknown = await get("q=NOPE-1");
    assert.equal(unknown.status, 404);
    assert.match(await unknown.text(), /No order has the id NOPE-1/);
    const bad = await get("status=LOST");
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /status: Invalid option/);
    assert.equal((await fetch(`${base}/orders/abc`, { headers: { cookie } })).status, 404);
    assert.equal((await fetch(`${base}/orders/99999999`, { headers: { cookie } })).status, 404);
  });

  it("an order with more events than its page shows: the latest ones, the rider's latest location, the path to it", async () => {
    const { cookie } = await signIn();
    const coid = "CA-LONG";
    const ids = { client_order_id: coid, svc_order_id: "779001" };
    const at = (s: number) => new Date(Date.UTC(2026, 10, 23, 9, 0, s)).toISOString();
    assert.equal((await t.callback({ ...ids, order_status: "ALLOTTED", timestamp: at(0), rider_name: "Ravi" })).status, 200);
    const locations = 520;
    for (let k = 1; k <= locations; k += 40) {
      await Promise.all(
        Array.from({ length: Math.min(40, locations + 1 - k) }, (_, i) => {
          const n = k + i;
          return t.callback({ ...ids, rider_latitude: Number((12.9 + n / 10_000).toFixed(4)), rider_longitude: 77.6, timestamp: at(n) });
        }),
      );
    }
    assert.equal((await t.callback({ ...ids, order_status: "DELIVERED", timestamp: at(locations + 1) })).status, 200);
    await t.runJobs();
    const [row] = await t.database.sql<{ id: number; event_count: number }[]>`select id, event_count from orders where client_order_id = ${coid}`;
    assert.equal(row!.event_count, locations + 2);
    const page = await (await fetch(`${base}/orders/${row!.id}`, { headers: { cookie } })).text();
    // The path ends where the rider was last: the newest location, not the 500th oldest.
    assert.match(page, /last at 12\.95200, 77\.60000\./);
    const timeline = /<h2 id="timeline-title">Timeline<\/h2>([\s\S]*)$/.exec(page)![1]!;
    assert.match(timeline, /DELIVERED/, "the newest event is on the page");
    assert.match(timeline, /Showing the latest 500 events/);
    assert.equal((timeline.match(/<tr>/g) ?? []).length, 1 + 500, "a header row and 500 events");
  });

  it("filters narrow the list, and the live fragment has the same rows", async () => {
    const { cookie } = await signIn();
    await newOrder("DELIVERED");
    await newOrder("ARRIVED");
    const page = await (await fetch(`${base}/orders?status=ARRIVED`, { headers: { cookie } })).text();
    assert.match(page, /data-live="\/orders\/rows\?status=ARRIVED"/);
    const rows = await (await fetch(`${base}/orders/rows?status=ARRIVED`, { headers: { cookie } })).text();
    assert.match(rows, /ARRIVED/);
    assert.doesNotMatch(rows, /DELIVERED/);
    assert.ok(page.includes(rows), "the page's tbody is the fragment");
  });

  it("pages are private: no-store, a strict Content-Security-Policy, no framing; the time spent is in Server-Timing", async () => {
    const { cookie } = await signIn();
    const res = await fetch(`${base}/orders`, { headers: { cookie } });
    assert.equal(res.headers.get("cache-control"), "no-store");
    const csp = res.headers.get("content-security-policy") ?? "";
    for (const part of ["default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'"]) assert.ok(csp.includes(part), part);
    assert.equal(res.headers.get("x-frame-options"), "SAMEORIGIN");
    assert.match(res.headers.get("server-timing") ?? "", /^page;dur=\d+(\.\d)?$/);
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*src="\/assets\/)/, "no inline script");
    assert.doesNotMatch(html, /https?:\/\/(?!127\.0\.0\.1)/, "nothing from another origin");
  });

  it("the stylesheet, script and icon come from tracklane, versioned and cached for a year", async () => {
    const page = await (await fetch(`${base}/sign-in`)).text();
    const assets: [RegExp, string][] = [
      [/href="(\/assets\/console\.css\?v=[0-9a-f]{12})"/, "text/css; charset=utf-8"],
      [/src="(\/assets\/console\.js\?v=[0-9a-f]{12})"/, "text/javascript; charset=utf-8"],
      [/<link rel="icon" type="image\/svg\+xml" href="(\/assets\/icon\.svg\?v=[0-9a-f]{12})"/, "image/svg+xml"],
    ];
    for (const [path, type] of assets) {
      const url = path.exec(page)?.[1];
      assert.ok(url, String(path));
      const res = await fetch(`${base}${url}`);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get("content-type"), type);
      assert.equal(res.headers.get("cache-control"), "public, max-age=31536000, immutable");
    }
    assert.equal((await fetch(`${base}/assets/console.css?v=old`)).headers.get("cache-control"), "no-cache");
  });
});

describe("failed sign-ins", () => {
  // Last: this app's address is then locked out for five minutes.
  it("after five failures from one address the sixth try is 429 with Retry-After, even with the right token", async () => {
    // Earlier tests failed once from this address (the test client is one address).
    for (let i = 0; i < 5; i++) await fetch(`${base}/sign-in`, form({ token: `wrong-${i}` }));
    const res = await fetch(`${base}/sign-in`, form({ token: API_TOKEN }));
    assert.equal(res.status, 429);
    assert.ok(Number(res.headers.get("retry-after")) > 0);
    assert.match(await res.text(), /Too many failed sign-ins/);
    assert.equal(res.headers.get("set-cookie"), null);
    const logged = t.logLines.filter((l) => l.includes("console sign-in failed"));
    assert.ok(logged.length >= 5);
    assert.ok(logged.every((l) => !l.includes("wrong-")), "the tried tokens never reach the log");
  });
});
