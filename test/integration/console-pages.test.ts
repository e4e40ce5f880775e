/**
 * The console's Needs attention, AWB pool, Notifications and System pages
 * (docs/console.md) on real PostgreSQL through a real HTTP server: each kind of trouble
 * is listed while it lasts and leaves the list when it is dealt with, the pool's chart
 * tells the pool's levels, Replenish queues a top-up, Resend queues a failed message
 * again, the system page hides secrets; every post needs the CSRF token, every page a
 * session; bad input gets a page that names it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { createPool, POOL_NAMES } from "../../src/db/client.ts";
import { allocateAwb, insertAwbNumbers } from "../../src/awb/pool.ts";
import { insertPlacedOrder } from "../../src/orders/store.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";
import { consoleSignIn } from "../helpers/console.ts";

const ENDPOINTS = "/v1/notifications/endpoints";
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/**
 * The Replenish button needs a provider to be configured; nothing here calls it (its jobs
 * are removed unrun). /metrics listens for its token exchanges (there are none).
 */
const provider = { observeTokenExchanges: () => {} } as unknown as ProviderClient;

let t: TestApp;
let base: string;
let server: { url: string; close(): Promise<void> };
let session: { cookie: string; csrf: string };

before(async () => {
  t = await createTestApp(
    { NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0", NOTIFY_TIMEOUT_MS: "500", AWB_POOL_LOW_WATERMARK: "5", AWB_POOL_TARGET: "20", STUCK_AFTER_MIN: "45" },
    { provider },
  );
  server = await t.listen();
  base = server.url;
  session = await signIn();
});
after(async () => {
  await server.close();
  await t.close();
});

const signIn = () => consoleSignIn(base);

async function get(path: string, expect = 200): Promise<string> {
  const res = await fetch(`${base}${path}`, { headers: { cookie: session.cookie }, redirect: "manual" });
  const text = await res.text();
  assert.equal(res.status, expect, `GET ${path}: ${text.slice(0, 500)}`);
  return text;
}

function post(path: string, fields: Record<string, string>, o: { csrf?: boolean } = {}): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: session.cookie, origin: base },
    body: new URLSearchParams(o.csrf === false ? fields : { _csrf: session.csrf, ...fields }),
  });
}

/** The attention page's count for a kind (its card), and its section (empty when the kind has no rows). */
function kind(page: string, id: string): { count: string; section: string } {
  const count = new RegExp(`id="card-${id}"><div class="figure">([^<]+)</div>`).exec(page)?.[1];
  assert.ok(count !== undefined, `card ${id}`);
  const section = new RegExp(`<section id="${id}"[\\s\\S]*?</section>`).exec(page)?.[0] ?? "";
  return { count, section };
}

let orderNo = 0;
/** An order the provider told us of (both ids) at `status`, its last event now; its internal id. */
async function newOrder(status = "ALLOTTED"): Promise<{ id: number; coid: string; svc: string }> {
  orderNo++;
  const coid = `CP-${orderNo}`;
  const svc = String(660_000 + orderNo);
  const res = await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: status, timestamp: new Date().toISOString() });
  assert.equal(res.status, 200);
  await t.runJobs();
  const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${coid}`;
  return { id: row!.id, coid, svc };
}

/** Removes waiting jobs of a task unrun (their handler would call the provider). */
async function dropJobs(task: string): Promise<number> {
  const rows = await t.database.sql<{ id: string }[]>`select id::text from graphile_worker.jobs where task_identifier = ${task}`;
  if (rows.length > 0) await t.database.sql`select graphile_worker.complete_jobs(${rows.map((r) => r.id)}::bigint[])`;
  return rows.length;
}

/** Markup rules every page keeps: one h1 and h2s after it, tables with column headers and a name, a label on every control, no inline style or script, nothing from elsewhere. */
function assertMarkup(page: string, path: string): void {
  const headings = [...page.matchAll(/<h([1-6])\b/g)].map((m) => Number(m[1]));
  assert.equal(headings[0], 1, `${path}: starts with h1`);
  assert.equal(headings.filter((h) => h === 1).length, 1, `${path}: one h1`);
  headings.forEach((h, i) => assert.ok(i === 0 || h <= headings[i - 1]! + 1, `${path}: heading levels in order`));
  for (const table of page.match(/<table\b[^>]*>[\s\S]*?<\/table>/g) ?? []) {
    assert.match(table, /<thead><tr><th scope="col"/, `${path}: a table with a header row`);
    assert.match(table, /^<table aria-labelledby="[^"]+">|^<table>\s*<caption>/, `${path}: a table with a name (its caption, or the heading it is under)`);
  }
  for (const control of page.match(/<(input|select|textarea)\b[^>]*>/g) ?? []) {
    if (/type="hidden"/.test(control)) continue;
    const at = page.indexOf(control);
    assert.ok(page.lastIndexOf("<label", at) > page.lastIndexOf("</label>", at), `${path}: ${control} has a label`);
  }
  assert.doesNotMatch(page, /\sstyle=/, `${path}: no inline style`);
  assert.doesNotMatch(page, /<script(?![^>]*src="\/assets\/)/, `${path}: no inline script`);
  assert.doesNotMatch(page, /\s(src|href)="(https?:)?\/\//, `${path}: nothing loaded from elsewhere`);
}

describe("doors", () => {
  it("without a session every page sends the browser to sign in (303), and a post is 403", async () => {
    for (const path of ["/", "/attention/live", "/awb", "/awb/replenish", "/notifications", "/notifications/messages/msg_X/resend", "/system"]) {
      const res = await fetch(`${base}${path}`, { redirect: "manual" });
      assert.equal(res.status, 303, path);
      assert.equal(res.headers.get("location"), `/sign-in?next=${encodeURIComponent(path)}`);
    }
    for (const path of ["/attention/rejected-seen", "/awb/replenish", "/notifications/messages/msg_X/resend"]) {
      const res = await fetch(`${base}${path}`, { method: "POST", redirect: "manual", headers: { "content-type": "application/x-www-form-urlencoded", origin: base }, body: "" });
      assert.equal(res.status, 403, path);
    }
  });

  it("every page keeps the markup rules", async () => {
    for (const path of ["/", "/awb", "/awb/replenish", "/notifications", "/system"]) assertMarkup(await get(path), path);
  });
});

describe("Needs attention", () => {
  it("with nothing wrong it says so, every count is 0, and the live fragment is the page's content", async () => {
    await insertAwbNumbers(t.database.sql, Array.from({ length: 10 }, (_, i) => `NA-${i}`), { source: "pool", requestId: null });
    const page = await get("/");
    assert.match(page, /Nothing needs attention right now\./);
    for (const id of ["unconfirmed", "failed-commands", "silent", "rejected", "endpoints", "awb"]) assert.equal(kind(page, id).count, "0", id);
    assert.match(page, /<div data-live="\/attention\/live">/);
    const fragment = await get("/attention/live");
    assert.ok(page.includes(fragment), "the page holds the fragment");
  });

  it("an unconfirmed placement is listed with a link to its order until it is confirmed", async () => {
    const change = await t.database.sql.begin((tx) => insertPlacedOrder(tx, { clientOrderId: "CP-UNCONF", storeCode: null, pickupOtp: null, at: new Date() }));
    const id = change.orderId;
    await t.database.sql`update orders set placement_state = 'unconfirmed', placement_error = 'the provider did not answer in time' where id = ${id}`;
    let unconfirmed = kind(await get("/"), "unconfirmed");
    assert.equal(unconfirmed.count, "1");
    assert.match(unconfirmed.section, new RegExp(`<a href="/orders/${id}">CP-UNCONF</a>`));
    assert.match(unconfirmed.section, /the provider did not answer in time/);
    const confirmed = await post(`/orders/${id}/confirm-placement`, { svc_order_id: "669999" });
    assert.equal(confirmed.status, 303);
    await t.runJobs();
    unconfirmed = kind(await get("/"), "unconfirmed");
    assert.equal(unconfirmed.count, "0");
    assert.equal(unconfirmed.section, "");
  });

  it("an active order is listed as silent only after STUCK_AFTER_MIN without an event, and leaves the list with its next event", async () => {
    const o = await newOrder("ALLOTTED");
    const finished = await newOrder("DELIVERED");
    const silentFor = async (min: number) => {
      await t.database.sql`update orders set last_event_at = now() - make_interval(mins => ${min}) where id = any(${[o.id, finished.id]}::bigint[])`;
      return kind(await get("/"), "silent");
    };
    assert.equal((await silentFor(44)).count, "0", "44 minutes is not yet 45");
    const silent = await silentFor(46);
    assert.equal(silent.count, "1", "a delivered order is never stuck");
    assert.match(silent.section, new RegExp(`<a href="/orders/${o.id}">${o.coid}</a>`));
    assert.match(silent.section, /46 min/);
    const res = await t.callback({ client_order_id: o.coid, svc_order_id: o.svc, order_status: "ARRIVED", timestamp: new Date().toISOString() });
    assert.equal(res.status, 200);
    await t.runJobs();
    assert.equal(kind(await get("/"), "silent").count, "0");
  });

  it("a failed command is listed with its order and a retry link; retried, it leaves the list", async () => {
    const o = await newOrder("ALLOTTED");
    const [command] = await t.database.sql<{ id: number }[]>`
      insert into commands (order_id, kind, state, request, request_hash, attempts, last_error, completed_at)
      values (${o.id}, 'dispatch_ready', 'failed', '{}'::jsonb, 'h', 3, 'HTTP 422: shipment not ready', now())
      returning id`;
    let failed = kind(await get("/"), "failed-commands");
    assert.equal(failed.count, "1");
    assert.match(failed.section, new RegExp(`<a href="/orders/${o.id}">${o.coid}</a>`));
    assert.match(failed.section, new RegExp(`href="/commands/${command!.id}/retry"`));
    assert.match(failed.section, /HTTP 422: shipment not ready/);
    assert.equal((await post(`/commands/${command!.id}/retry`, {})).status, 303);
    assert.equal(await dropJobs("command__execute"), 1);
    failed = kind(await get("/"), "failed-commands");
    assert.equal(failed.count, "0");
    assert.equal(failed.section, "");
  });

  it("failed commands can be marked as seen: those shown leave the list, and one that fails after the mark shows", async () => {
    const o = await newOrder("DELIVERED");
    const fail = async (error: string) =>
      (
        await t.database.sql<{ id: number }[]>`
          insert into commands (order_id, kind, state, request, request_hash, attempts, last_error, completed_at)
          values (${o.id}, 'cancel', 'failed', '{}'::jsonb, 'h', 1, ${error}, now())
          returning id`
      )[0]!.id;
    await fail("HTTP 400: already delivered");
    await fail("HTTP 400: already delivered, again");
    let failed = kind(await get("/"), "failed-commands");
    assert.equal(failed.count, "2");
    const upto = /action="\/attention\/failed-seen".*?name="upto" value="(\d+)"/s.exec(failed.section)?.[1];
    assert.ok(upto, failed.section);
    assert.equal((await post("/attention/failed-seen", { upto }, { csrf: false })).status, 403);
    assert.equal((await post("/attention/failed-seen", { upto: "soon" })).status, 422);
    assert.equal(kind(await get("/"), "failed-commands").count, "2", "refused posts change nothing");

    const seen = await post("/attention/failed-seen", { upto });
    assert.equal(seen.status, 303);
    failed = kind(await get("/"), "failed-commands");
    assert.deepEqual([failed.count, failed.section], ["0", ""]);
    // A failure after the mark (a new one, or one retried that failed again) shows.
    await new Promise((r) => setTimeout(r, 5));
    const later = await fail("HTTP 400: later");
    failed = kind(await get("/"), "failed-commands");
    assert.equal(failed.count, "1");
    assert.match(failed.section, new RegExp(`command #${later} cancel`));
    // The API's list of failed commands is not a view of the console's mark.
    const api = (await (await t.request("/v1/commands?state=failed")).json()) as { items: unknown[] };
    assert.ok(api.items.length >= 3);
  });

  it("rejected callbacks are counted until marked as seen; the mark needs the CSRF token and an id that exists", async () => {
    for (const body of ["{not json", "nope", `{"order_status": "${"x".repeat(300)}`]) {
      assert.equal((await t.callback(body)).status, 400);
    }
    let page = await get("/");
    let rejected = kind(page, "rejected");
    assert.equal(rejected.count, "3");
    assert.match(rejected.section, /invalid_json/);
    assert.match(rejected.section, /<code>\{not json<\/code>/);
    assert.match(rejected.section, /<code>\{&quot;order_status&quot;: &quot;x{100,}…<\/code>/, "a long body is cut");
    const upto = /name="upto" value="(\d+)"/.exec(rejected.section)?.[1];
    assert.ok(upto);

    assert.equal((await post("/attention/rejected-seen", { upto }, { csrf: false })).status, 403);
    assert.equal(kind(await get("/"), "rejected").count, "3", "a post without the token changes nothing");
    const beyond = await post("/attention/rejected-seen", { upto: String(Number(upto) + 1) });
    assert.equal(beyond.status, 422);
    assert.match(await beyond.text(), new RegExp(`There is no rejected callback ${Number(upto) + 1}`));
    const notNumber = await post("/attention/rejected-seen", { upto: "soon" });
    assert.equal(notNumber.status, 422);
    assert.match(await notNumber.text(), /upto: /);

    const seen = await post("/attention/rejected-seen", { upto });
    assert.equal(seen.status, 303);
    assert.equal(seen.headers.get("location"), "/");
    page = await get("/");
    assert.equal(kind(page, "rejected").count, "0");
    assert.equal(kind(page, "rejected").section, "");
    assert.equal((await t.callback("again not json")).status, 400);
    rejected = kind(await get("/"), "rejected");
    assert.equal(rejected.count, "1", "only what came after the mark");
    assert.match(rejected.section, /again not json/);
    assert.equal((await post("/attention/rejected-seen", { upto: /name="upto" value="(\d+)"/.exec(rejected.section)![1]! })).status, 303);
  });
});

describe("an order's actions and a command's retry", () => {
  const commandsOf = async (orderId: number, kind: string) =>
    await t.database.sql<{ id: number; state: string }[]>`select id, state from commands where order_id = ${orderId} and kind = ${kind} order by id`;

  it("a cancel posted twice (a double click, or a page left open) records one command; the second post says it was already recorded", async () => {
    const o = await newOrder("ALLOTTED");
    const first = await post(`/orders/${o.id}/cancel`, { reason: "customer left", user: "Customer" });
    assert.equal(first.status, 303);
    const [command] = await commandsOf(o.id, "cancel");
    assert.equal(first.headers.get("location"), `/orders/${o.id}?done=cancel&command=${command!.id}`);
    const second = await post(`/orders/${o.id}/cancel`, { reason: "customer left", user: "Customer" });
    assert.equal(second.status, 303);
    assert.equal(second.headers.get("location"), `/orders/${o.id}?done=cancel&command=${command!.id}&already=1`);
    assert.deepEqual((await commandsOf(o.id, "cancel")).map((k) => k.id), [command!.id], "the provider is asked to cancel once");
    assert.match(await get(second.headers.get("location")!), new RegExp(`Cancel the order: already recorded as command #${command!.id}, so nothing more was sent`));
    // Stop re-attempts too; once the first is done, a new one is recorded.
    assert.equal((await post(`/orders/${o.id}/stop-reattempt`, {})).status, 303);
    assert.match((await post(`/orders/${o.id}/stop-reattempt`, {})).headers.get("location") ?? "", /&already=1$/);
    assert.equal(await dropJobs("command__execute"), 2);
    await t.database.sql`update commands set state = 'succeeded', completed_at = now() where order_id = ${o.id}`;
    assert.doesNotMatch((await post(`/orders/${o.id}/stop-reattempt`, {})).headers.get("location") ?? "", /already/);
    assert.equal((await commandsOf(o.id, "stop_reattempt")).length, 2);
    await dropJobs("command__execute");
  });

  it("a retry's page names the order and what is asked again; once retried, the page and a second post say the command is pending, with no Retry button", async () => {
    const o = await newOrder("ALLOTTED");
    const [command] = await t.database.sql<{ id: number }[]>`
      insert into commands (order_id, kind, state, request, request_hash, attempts, last_error, completed_at)
      values (${o.id}, 'cancel', 'failed', '{"reason": "customer left", "user": "Customer"}'::jsonb, 'h', 2, 'HTTP 503', now())
      returning id`;
    const path = `/commands/${command!.id}/retry`;
    const form = `<form method="post" action="${path}"`;
    const page = await get(path);
    assert.match(page, new RegExp(`<h1>Retry command #${command!.id} \\(cancel\\) of order ${o.coid}\\?</h1>`));
    assert.match(page, new RegExp(`asks the provider again to cancel order ${o.coid} \\(reason: customer left; asked by Customer\\)`));
    assert.ok(page.includes(form));

    assert.equal((await post(path, {})).status, 303);
    // The same form sent again: refused, and the page tells the command's state now.
    const again = await post(path, {});
    assert.equal(again.status, 409);
    const refused = await again.text();
    assert.match(refused, new RegExp(`Command #${command!.id} \\(cancel\\) of order ${o.coid} is pending`));
    assert.match(refused, /Nothing more was sent/);
    assert.doesNotMatch(refused, /It failed after/);
    assert.ok(!refused.includes(form), "no Retry button for a pending command");
    const later = await get(path);
    assert.match(later, /is pending/);
    assert.ok(!later.includes(form));
    assert.equal(await dropJobs("command__execute"), 1);
  });
});

describe("notifications", () => {
  let receiver: Receiver;
  let failing = true;
  before(async () => {
    receiver = await startReceiver({ otherwise: () => (failing ? 500 : 200) });
  });
  after(async () => {
    for (const ep of ((await (await t.request(ENDPOINTS)).json()) as { items: { id: string }[] }).items) {
      assert.equal((await t.request(`${ENDPOINTS}/${ep.id}`, { method: "DELETE" })).status, 204);
    }
    await receiver.close();
  });

  it("a failing endpoint is on both pages, its failed message resends, and once delivered the endpoint is fine again; secrets never show", async () => {
    const created = await t.request(ENDPOINTS, { method: "POST", json: { url: `${receiver.url}/hooks`, events: ["order.status_changed"] } });
    assert.equal(created.status, 201);
    const ep = (await created.json()) as { id: string; secret: string };
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
    await t.runJobs();
    await receiver.waitFor(1);

    const endpoints = kind(await get("/"), "endpoints");
    assert.equal(endpoints.count, "1");
    assert.match(endpoints.section, new RegExp(`<a href="/notifications">${receiver.url}/hooks</a>`));
    assert.match(endpoints.section, /HTTP 500/);

    let page = await get("/notifications");
    assert.ok(!page.includes(ep.secret), "the endpoint's secret is not on the page");
    assert.match(page, /0%/);
    const messageId = new RegExp(`href="/notifications/messages/(msg_\\w+)/resend"`).exec(page)?.[1];
    assert.ok(messageId, "the failed message has a Resend link");
    assert.match(page, /test\.ping/);

    const confirm = await get(`/notifications/messages/${messageId}/resend`);
    assertMarkup(confirm, "resend");
    assert.match(confirm, new RegExp(`action="/notifications/messages/${messageId}/resend"`));
    assert.equal((await post(`/notifications/messages/${messageId}/resend`, {}, { csrf: false })).status, 403);
    const [still] = await t.database.sql<{ status: string }[]>`select status from notification_deliveries where message_id = ${messageId}`;
    assert.equal(still!.status, "failed");

    failing = false;
    const resent = await post(`/notifications/messages/${messageId}/resend`, {});
    assert.equal(resent.status, 303);
    assert.equal(resent.headers.get("location"), "/notifications?done=resend&deliveries=1");
    const [queued] = await t.database.sql<{ status: string; attempts: number }[]>`select status, attempts from notification_deliveries where message_id = ${messageId}`;
    assert.deepEqual({ ...queued }, { status: "pending", attempts: 0 }, "re-queued from the start");
    assert.match(await get("/notifications?done=resend&deliveries=1"), /Sent again: 1 delivery queued/);
    await t.runJobs();
    await receiver.waitFor(2);
    assert.equal(kind(await get("/"), "endpoints").count, "0", "delivered: the endpoint no longer needs attention");
    page = await get("/notifications");
    assert.doesNotMatch(page, /\/resend"/, "no failed message left");
    assert.match(page, /100%/);
  });

  it("a Resend sent twice queues the message once: the second post leaves the delivery being sent alone, and the page says it was already queued", async () => {
    const created = await t.request(ENDPOINTS, { method: "POST", json: { url: `${receiver.url}/twice`, events: ["order.status_changed"] } });
    const ep = (await created.json()) as { id: string };
    failing = true;
    const ping = async () => {
      const res = await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" });
      assert.equal(res.status, 202);
      return ((await res.json()) as { message_id: string }).message_id;
    };
    const [first, second] = [await ping(), await ping()];
    await t.runJobs();
    const sentOf = (id: string) => receiver.received.filter((q) => q.headers["webhook-id"] === id).length;
    assert.deepEqual([sentOf(first), sentOf(second)], [1, 1], "each failed once");
    failing = false;

    // Both posts at once: the one after the other's commit finds the delivery queued.
    const both = await Promise.all([post(`/notifications/messages/${first}/resend`, {}), post(`/notifications/messages/${first}/resend`, {})]);
    assert.deepEqual(both.map((r) => r.status), [303, 303]);
    assert.deepEqual(both.map((r) => r.headers.get("location")).sort(), ["/notifications?done=resend&deliveries=0&already=1", "/notifications?done=resend&deliveries=1"]);
    const notice = await get("/notifications?done=resend&deliveries=0&already=1");
    assert.match(notice, /Already queued: 1 delivery of this message was waiting to go/);
    assert.doesNotMatch(notice, /Sent again/);
    await t.runJobs();
    assert.equal(sentOf(first), 2, "sent again once");

    // The second post while the run sends what the first queued: that send is not taken
    // from its run and sent once more.
    assert.equal((await post(`/notifications/messages/${second}/resend`, {})).headers.get("location"), "/notifications?done=resend&deliveries=1");
    receiver.answers.push({ status: 200, delayMs: 300 }); // within NOTIFY_TIMEOUT_MS
    const sending = t.runJobs();
    await receiver.waitFor(receiver.received.length + 1);
    const again = await post(`/notifications/messages/${second}/resend`, {});
    assert.equal(again.headers.get("location"), "/notifications?done=resend&deliveries=0&already=1");
    await sending;
    assert.equal(sentOf(second), 2, "the failed one, then the resent one once");
    const [d] = await t.database.sql<{ status: string; attempts: number }[]>`select status, attempts from notification_deliveries where message_id = ${second}`;
    assert.deepEqual({ ...d }, { status: "delivered", attempts: 1 });
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}`, { method: "DELETE" })).status, 204);
  });

  it("a Resend of a delivery waiting for its next attempt sends it now, in the round it is in", async () => {
    const created = await t.request(ENDPOINTS, { method: "POST", json: { url: `${receiver.url}/later`, events: ["order.status_changed"] } });
    const ep = (await created.json()) as { id: string };
    failing = false;
    const res = await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" });
    const { message_id: id } = (await res.json()) as { message_id: string };
    // As after three failed attempts, the next an hour away; the receiver is back.
    await t.database.sql`update notification_deliveries set attempts = 3, next_attempt_at = now() + interval '1 hour' where message_id = ${id}`;
    const resent = await post(`/notifications/messages/${id}/resend`, {});
    assert.equal(resent.headers.get("location"), "/notifications?done=resend&deliveries=0&already=1");
    const [d] = await t.database.sql<{ attempts: number; due: boolean }[]>`
      select attempts, next_attempt_at <= now() as due from notification_deliveries where message_id = ${id}`;
    assert.deepEqual({ ...d }, { attempts: 3, due: true });
    await t.runJobs();
    assert.equal(receiver.received.filter((q) => q.headers["webhook-id"] === id).length, 1, "sent now, once");
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}`, { method: "DELETE" })).status, 204);
  });

  it("a disabled endpoint is listed; a message of it cannot be resent (409); unknown messages are 404", async () => {
    const created = await t.request(ENDPOINTS, { method: "POST", json: { url: `${receiver.url}/off`, events: ["order.status_changed"] } });
    const ep = (await created.json()) as { id: string };
    failing = true;
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
    await t.runJobs();
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}`, { method: "PATCH", json: { enabled: false } })).status, 200);
    const endpoints = kind(await get("/"), "endpoints");
    assert.match(endpoints.section, new RegExp(`${receiver.url}/off</a></td><td><span class="badge bad">disabled</span> by hand`));
    const [message] = await t.database.sql<{ message_id: string }[]>`select message_id from notification_deliveries where endpoint_id = ${ep.id}`;
    const refused = await post(`/notifications/messages/${message!.message_id}/resend`, {});
    assert.equal(refused.status, 409);
    assert.match(await refused.text(), /None of the endpoints this message went to is enabled/);
    assert.match(await get("/notifications/messages/msg_NOPE/resend", 404), /There is no notification message msg_NOPE/);
    assert.equal((await post("/notifications/messages/not-a-message/resend", {})).status, 404);
    assert.match(await get("/notifications?before=x", 400), /before: /);
  });
});

describe("AWB pool", () => {
  it("the chart's levels are the pool's: where it started 24 hours ago, each change since, and now", async () => {
    await t.database.sql`update awb_numbers set created_at = now() - interval '30 hours'`; // the 10 from the first test
    await insertAwbNumbers(t.database.sql, Array.from({ length: 6 }, (_, i) => `NB-${i}`), { source: "pool", requestId: null });
    await t.database.sql`update awb_numbers set created_at = now() - interval '2 hours' where awb_number like 'NB-%'`;
    for (let i = 0; i < 4; i++) assert.ok(await allocateAwb(t.database.sql, { lowWatermark: 5 }));
    await t.database.sql`update awb_numbers set allocated_at = now() - interval '1 hour' where state = 'allocated'`;
    // 10 then, +6 two hours ago, -4 an hour ago: 12 now.
    const page = await get("/awb");
    assert.match(page, /id="awb-available"><div class="figure">12<\/div>/);
    assert.match(page, /id="awb-allocated"><div class="figure">4<\/div>/);
    assert.match(page, /<figcaption>Available AWB numbers: 12 now; lowest 10 and highest 16 between .+; low watermark 5\./);
    const path = /<path d="([^"]+)"/.exec(page)?.[1];
    assert.equal(path?.match(/V/g)?.length, 2, "two steps");
    assert.equal(kind(await get("/"), "awb").count, "0", "12 is above the watermark");
  });

  it("below the low watermark the pool needs attention", async () => {
    for (let i = 0; i < 8; i++) assert.ok(await allocateAwb(t.database.sql, { lowWatermark: 5 }));
    await dropJobs("awb__replenish"); // the automatic top-up the allocations queued
    const awb = kind(await get("/"), "awb");
    assert.equal(awb.count, "1");
    assert.match(awb.section, /<a href="\/awb">4 available<\/a>, below the low watermark of 5/);
    assert.match(await get("/awb"), /Only 4 numbers are available, below the low watermark of 5/);
  });

  it("Replenish asks first, then queues the same top-up as the API; bad input is 422 naming the field", async () => {
    const confirm = await get("/awb/replenish");
    assert.match(confirm, /<form method="post" action="\/awb\/replenish">/);
    const bad = await post("/awb/replenish", { count: "0", mode: "pool" });
    assert.equal(bad.status, 422);
    assert.match(await bad.text(), /count: must be at least 1/);
    assert.equal((await post("/awb/replenish", { count: "7", mode: "fresh" }, { csrf: false })).status, 403);
    assert.equal((await t.database.sql`select 1 from graphile_worker.jobs where task_identifier = 'awb__replenish'`).length, 0);

    const res = await post("/awb/replenish", { count: "7", mode: "fresh" });
    assert.equal(res.status, 303);
    assert.equal(res.headers.get("location"), "/awb?done=replenish");
    const jobs = await t.database.sql<{ payload: unknown; queue_name: string }[]>`
      select j.payload, v.queue_name from graphile_worker.jobs v join graphile_worker._private_jobs j using (id) where v.task_identifier = 'awb__replenish'`;
    assert.deepEqual(
      jobs.map((j) => ({ ...j })),
      [{ payload: { reason: "manual", count: 7, mode: "fresh" }, queue_name: "awb" }],
    );
    const empty = await post("/awb/replenish", { count: "", mode: "pool" });
    assert.equal(empty.status, 303, "no count: up to the target");
    assert.match(await get("/awb?done=replenish"), /Top-up queued/);
    assert.equal(await dropJobs("awb__replenish"), 2);
  });

  it("without a provider Replenish is refused (409) and says why", async () => {
    const bare = await createTestApp();
    const s = await bare.listen();
    try {
      const res = await fetch(`${s.url}/sign-in`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: s.url },
        body: new URLSearchParams({ token: API_TOKEN }),
      });
      const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
      const page = await (await fetch(`${s.url}/awb/replenish`, { headers: { cookie } })).text();
      assert.match(page, /No provider is configured/);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;
      const refused = await fetch(`${s.url}/awb/replenish`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin: s.url, cookie },
        body: new URLSearchParams({ _csrf: csrf, mode: "pool" }),
      });
      assert.equal(refused.status, 409);
      assert.equal((await bare.database.sql`select 1 from graphile_worker.jobs where task_identifier = 'awb__replenish'`).length, 0);
    } finally {
      await s.close();
      await bare.close();
    }
  });
});

describe("System", () => {
  it("says when no worker is running, and how many are", async () => {
    assert.match(await get("/system"), /<p id="workers" class="error" role="alert">\s*No worker is running: jobs wait and callbacks are not projected/);
    const liveness = createPool(t.testDb.url, 1, POOL_NAMES.workerLiveness);
    try {
      await liveness`select 1`;
      assert.match(await get("/system"), /<p id="workers">\s*1 worker process running/);
    } finally {
      await liveness.end();
    }
  });

  it("shows the version, the roles connected, the queues and the configuration, never a secret", async () => {
    const saved = { API_TOKEN: process.env["API_TOKEN"], CALLBACK_SECRET: process.env["CALLBACK_SECRET"], STUCK_AFTER_MIN: process.env["STUCK_AFTER_MIN"] };
    Object.assign(process.env, { API_TOKEN, CALLBACK_SECRET, STUCK_AFTER_MIN: "45" });
    try {
      await t.database.sql`select graphile_worker.add_job('projection__drain', '{}'::json, run_at := now() + interval '1 hour')`;
      const page = await get("/system");
      assert.match(page, new RegExp(`tracklane ${VERSION.replaceAll(".", "\\.")}`));
      assert.match(page, /<td>tracklane-test<\/td><td class="num">[1-9]\d*<\/td>/, "the test app's pool, by its application_name");
      assert.match(page, /id="jobs-scheduled"><div class="figure">[1-9]\d*<\/div>/);
      assert.match(page, /<td><code>STUCK_AFTER_MIN<\/code><\/td><td><code>45<\/code><\/td>/);
      assert.match(page, /<td><code>API_TOKEN<\/code><\/td><td><code>\(hidden\)<\/code><\/td>/);
      assert.match(page, /<td><code>PORT<\/code><\/td><td>default \(<code>3000<\/code>\)<\/td>/);
      assert.ok(!page.includes(API_TOKEN), "API_TOKEN's value is not on the page");
      assert.ok(!page.includes(CALLBACK_SECRET), "CALLBACK_SECRET's value is not on the page");
      assert.match(page, /href="\/docs"/);
      assert.match(page, /href="\/metrics"/);
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});
