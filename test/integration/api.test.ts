import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { latestOrderEvents, orderTimeline } from "../../src/events/log.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
  // 12 orders: 4 DELIVERED in store S1 (via a store_code on the row), the rest ALLOTTED.
  for (let i = 0; i < 12; i++) {
    await t.callback({
      sfx_order_id: 700 + i,
      client_order_id: `API-${i}`,
      order_status: i < 4 ? "DELIVERED" : "ALLOTTED",
      event_time: `2026-11-22T11:${String(i).padStart(2, "0")}:00Z`,
      rider_id: 42,
      rider_name: "Meera",
      rider_contact: "+911234567890",
      track_url: `https://track.example/${i}`,
    });
  }
  await t.callback({ sfx_order_id: 700, rider_latitude: 12.97, rider_longitude: 77.59, timestamp: "2026-11-22T11:30:00Z" }, { path: `/callbacks/${CALLBACK_SECRET}/location` });
  await t.runJobs();
  await t.database.sql`update orders set store_code = 'S1' where client_order_id in ('API-0', 'API-1', 'API-5')`;
});
after(async () => {
  await t.close();
});

const json = async <T>(res: Response) => (await res.json()) as T;
type Err = { error: { code: string; message: string; request_id: string; issues?: { path: string; message: string }[] } };

describe("GET /v1/orders/{order} — happy", () => {
  it("returns the order with every contract field", async () => {
    const res = await t.request("/v1/orders/API-0");
    assert.equal(res.status, 200);
    const o = await json<Record<string, unknown>>(res);
    assert.deepEqual(Object.keys(o).sort(), [
      "awb_number", "client_order_id", "created_at", "event_count", "last_event_at", "pickup_otp", "placement",
      "provider_status", "rider", "status", "status_at", "store_code", "svc_order_id", "svc_order_ids", "track_url", "updated_at",
    ]);
    assert.equal(o.svc_order_id, "700");
    assert.deepEqual(o.svc_order_ids, ["700"]);
    assert.equal(o.status, "DELIVERED");
    assert.equal(o.track_url, "https://track.example/0");
    assert.deepEqual(o.placement, { state: "external", error: null });
    assert.deepEqual(o.rider, { id: "42", name: "Meera", contact: "+911234567890", latitude: 12.97, longitude: 77.59, location_at: "2026-11-22T11:30:00.000Z" });
    assert.equal(o.event_count, 2);
  });

  it("finds the same order by svc id", async () => {
    const a = await json(await t.request("/v1/orders/API-3"));
    const b = await json(await t.request("/v1/orders/by-svc-id/703"));
    assert.deepEqual(a, b);
  });

  it("shows the timeline in event-time order, with pagination", async () => {
    const all = await json<{ items: { id: string; kind: string; occurred_at: string }[]; next_cursor: string | null }>(await t.request("/v1/orders/API-0/events"));
    assert.deepEqual(all.items.map((e) => e.kind), ["status", "location"]);
    assert.equal(all.next_cursor, null);
    const first = await json<{ items: { id: string }[]; next_cursor: string }>(await t.request("/v1/orders/API-0/events?limit=1"));
    assert.equal(first.items.length, 1);
    const second = await json<{ items: { id: string }[]; next_cursor: string | null }>(await t.request(`/v1/orders/API-0/events?limit=1&cursor=${first.next_cursor}`));
    assert.deepEqual([...first.items, ...second.items].map((e) => e.id), all.items.map((e) => e.id));
    assert.equal(second.next_cursor, null);
    // A cursor pages through its own order only: on another order's timeline it was read as a position there.
    for (const other of ["/v1/orders/API-1/events", "/v1/orders/by-svc-id/701/events"]) {
      const res = await t.request(`${other}?limit=1&cursor=${first.next_cursor}`);
      assert.equal(res.status, 400, other);
      assert.equal((await json<Err>(res)).error.code, "invalid_parameter", other);
    }
    // The same order by its provider id is the same timeline.
    const twin = await json<{ items: { id: string }[] }>(await t.request(`/v1/orders/by-svc-id/700/events?limit=1&cursor=${first.next_cursor}`));
    assert.deepEqual(twin.items.map((e) => e.id), second.items.map((e) => e.id));
  });

  it("the timeline's rows are as EventRow types them: period is the partition's day as text, not a Date", async () => {
    // postgres.js reads a date column as a Date: `select *` handed the pages a period the type says is a string.
    const ids = { svc_order_id: "700", client_order_id: "API-0" };
    const { rows } = await orderTimeline(t.database.sql, ids, { limit: 10 });
    const { rows: latest } = await latestOrderEvents(t.database.sql, ids, 10);
    assert.equal(rows.length, 2);
    assert.equal(latest.length, 2);
    for (const row of [...rows, ...latest]) {
      assert.equal(typeof row.period, "string");
      assert.match(row.period, /^\d{4}-\d{2}-\d{2}$/);
    }
  });
});

describe("GET /v1/orders — list", () => {
  it("pages newest first through every order exactly once", async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { items: { client_order_id: string }[]; next_cursor: string | null } = await json(await t.request(`/v1/orders?limit=5${cursor ? `&cursor=${cursor}` : ""}`));
      assert.ok(page.items.length <= 5);
      seen.push(...page.items.map((o) => o.client_order_id));
      cursor = page.next_cursor;
    } while (cursor);
    assert.equal(seen.length, 12);
    assert.equal(new Set(seen).size, 12);
    assert.equal(seen[0], "API-11");
  });

  it("filters by status, store_code and updated_after", async () => {
    const delivered = await json<{ items: { status: string }[] }>(await t.request("/v1/orders?status=DELIVERED"));
    assert.equal(delivered.items.length, 4);
    assert.ok(delivered.items.every((o) => o.status === "DELIVERED"));
    const s1 = await json<{ items: { client_order_id: string }[] }>(await t.request("/v1/orders?store_code=S1&status=DELIVERED"));
    assert.deepEqual(s1.items.map((o) => o.client_order_id).sort(), ["API-0", "API-1"]);
    const future = await json<{ items: unknown[] }>(await t.request("/v1/orders?updated_after=2999-01-01T00:00:00Z"));
    assert.equal(future.items.length, 0);
    const past = await json<{ items: unknown[] }>(await t.request("/v1/orders?updated_after=2000-01-01T00:00:00%2B05:30"));
    assert.equal(past.items.length, 12);
  });
});

describe("GET /v1/callbacks/rejected", () => {
  it("lists rejected callbacks newest first with their reason and body", async () => {
    await t.callback("{broken");
    await t.callback({ order_status: "DELIVERED" });
    const res = await json<{ items: { reason: string; body: string; content_type: string }[] }>(await t.request("/v1/callbacks/rejected"));
    assert.deepEqual(res.items.slice(0, 2).map((r) => [r.reason, r.body]), [
      ["missing_order_id", '{"order_status":"DELIVERED"}'],
      ["invalid_json", "{broken"],
    ]);
    assert.equal(res.items[0]!.content_type, "application/json");
  });
});

describe("read API — errors", () => {
  it("404 order_not_found on both id families, with a request id", async () => {
    for (const path of ["/v1/orders/NOPE", "/v1/orders/by-svc-id/NOPE", "/v1/orders/NOPE/events"]) {
      const res = await t.request(path);
      assert.equal(res.status, 404, path);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "order_not_found");
      assert.match(body.error.message, /NOPE/);
      assert.ok(body.error.request_id);
    }
  });

  it("400 naming each bad query parameter", async () => {
    const res = await t.request("/v1/orders?limit=0&status=LOST&updated_after=yesterday");
    assert.equal(res.status, 400);
    const body = await json<Err>(res);
    assert.equal(body.error.code, "invalid_parameter");
    assert.deepEqual(body.error.issues!.map((i) => i.path).sort(), ["limit", "status", "updated_after"]);
  });

  it("400 for a filter value no list could match: an unknown status, state, kind or type, an empty id", async () => {
    // endpoint= (empty) answered an empty page, as if no message had been sent.
    for (const [path, field] of [
      ["/v1/orders?placement=lost", "placement"],
      ["/v1/commands?kind=teleport", "kind"],
      ["/v1/notifications/messages?type=order.lost", "type"],
      ["/v1/notifications/messages?endpoint=", "endpoint"],
      ["/v1/notifications/messages?order=", "order"],
      ["/v1/orders?store_code=", "store_code"],
    ] as const) {
      const res = await t.request(path);
      assert.equal(res.status, 400, path);
      assert.deepEqual((await json<Err>(res)).error.issues!.map((i) => i.path), [field], path);
    }
  });

  it("400 naming an unknown query parameter on every list, instead of a silently unfiltered answer", async () => {
    // A misspelt filter (stauts=) used to answer 200 with every order; an export with fromm= exported everything.
    for (const path of [
      "/v1/orders?stauts=DELIVERED",
      "/v1/orders/API-0/events?stauts=DELIVERED",
      "/v1/orders/by-svc-id/700/events?stauts=DELIVERED",
      "/v1/orders/export?stauts=DELIVERED",
      "/v1/commands?stauts=DELIVERED",
      "/v1/callbacks/rejected?stauts=DELIVERED",
      "/v1/notifications/messages?stauts=DELIVERED",
      // Lists without filters: a filter named anyway is not silently ignored either.
      "/v1/orders/API-0/commands?stauts=DELIVERED",
      "/v1/orders/by-svc-id/700/commands?stauts=DELIVERED",
      "/v1/notifications/endpoints?stauts=DELIVERED",
    ]) {
      const res = await t.request(path);
      assert.equal(res.status, 400, path);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "invalid_parameter", path);
      assert.deepEqual(body.error.issues, [{ path: "stauts", message: "unknown parameter" }], path);
      assert.match(body.error.message, /stauts: unknown parameter/, path);
    }
  });

  it("422 naming an unknown field in the bodies tracklane defines, instead of dropping it", async () => {
    // {client_orderid} used to hand out a new AWB on every call; {cuont} filled the pool to its target.
    for (const [method, path, body, field] of [
      ["POST", "/v1/awb/allocate", { client_orderid: "API-0" }, "client_orderid"],
      ["POST", "/v1/awb/replenish", { cuont: 5 }, "cuont"],
      ["POST", "/v1/orders/NOPE/cancel", { reason: "x", user: "Customer", note: "typo" }, "note"],
      ["POST", "/v1/orders/NOPE/dispatch-ready", { shipment_ready_time: 1764000000 }, "shipment_ready_time"],
      ["POST", "/v1/orders/NOPE/placement/confirm", { svc_order_id: "1", svc_id: "2" }, "svc_id"],
      ["POST", "/v1/notifications/endpoints", { url: "ftp://hooks.example", evnets: [] }, "evnets"],
      ["PATCH", "/v1/notifications/endpoints/ep_nope", { enabeld: false, description: "x" }, "enabeld"],
      // A field the recovery did not know (dry_run) was dropped: a client asking for a dry run re-sent everything.
      ["POST", "/v1/notifications/endpoints/ep_nope/recover", { since: "2026-11-01T00:00:00Z", dry_run: true }, "dry_run"],
    ] as const) {
      const res = await t.request(path, { method, json: body });
      assert.equal(res.status, 422, path);
      const err = (await json<Err>(res)).error;
      assert.equal(err.code, "validation_failed", path);
      assert.ok(err.issues!.some((i) => i.path === field && i.message === "unknown field"), `${path}: ${JSON.stringify(err.issues)}`);
    }
  });

  it("422 for a body sent to a route that takes none; none, an empty one or {} is fine", async () => {
    // {"reason": …} on stop-reattempt, or {"type": …} on …/test, was dropped unread.
    for (const path of [
      "/v1/orders/NOPE/stop-reattempt",
      "/v1/orders/by-svc-id/NOPE/placement/retry",
      "/v1/commands/1/retry",
      "/v1/notifications/endpoints/ep_nope/test",
      "/v1/notifications/endpoints/ep_nope/secret/rotate",
      "/v1/notifications/messages/msg_nope/resend",
    ]) {
      const res = await t.request(path, { method: "POST", json: { reason: "x" } });
      assert.equal(res.status, 422, path);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "validation_failed", path);
      assert.deepEqual(body.error.issues!.map((i) => i.path), ["body"], path);
      // Without a body, or with an empty one, the route is reached (here: its 404).
      for (const init of [{}, { json: {} }, { body: "", headers: { "content-type": "application/json" } }, { body: " { } ", headers: { "content-type": "application/json" } }]) {
        assert.equal((await t.request(path, { method: "POST", ...init })).status, 404, `${path} ${JSON.stringify(init)}`);
      }
    }
  });

  it("400 for a cursor of another list: GET /v1/orders' and the rejected callbacks' cursors are not interchangeable", async () => {
    // Both were {id}: one list's cursor was read by the other as a position in its own table.
    const orders = await json<{ next_cursor: string }>(await t.request("/v1/orders?limit=1"));
    const rejected = await t.request(`/v1/callbacks/rejected?cursor=${orders.next_cursor}`);
    assert.equal(rejected.status, 400);
    assert.equal((await json<Err>(rejected)).error.code, "invalid_parameter");
    await t.callback("not json {");
    await t.callback("not json [");
    const page = await json<{ next_cursor: string }>(await t.request("/v1/callbacks/rejected?limit=1"));
    assert.equal((await t.request(`/v1/orders?cursor=${page.next_cursor}`)).status, 400);
    const next = await json<{ items: unknown[] }>(await t.request(`/v1/callbacks/rejected?limit=1&cursor=${page.next_cursor}`));
    assert.equal(next.items.length, 1);
  });

  it("400 naming the parameter for a query parameter a route without filters does not know", async () => {
    // GET /v1/awb/pool?mode=fresh answered the pool as if the parameter meant something.
    for (const [method, path] of [
      ["GET", "/v1/awb/pool?mode=fresh"],
      ["GET", "/v1/orders/API-0?fields=status"],
      ["GET", "/v1/orders/by-svc-id/700?fields=status"],
      ["POST", "/v1/orders/NOPE/stop-reattempt?force=true"],
      ["POST", "/v1/commands/1/retry?force=true"],
      ["GET", "/v1/notifications/endpoints/ep_nope?fields=url"],
      ["POST", "/v1/notifications/messages/msg_nope/resend?force=true"],
    ] as const) {
      const res = await t.request(path, { method });
      assert.equal(res.status, 400, path);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "invalid_parameter", path);
      assert.equal(body.error.issues!.length, 1, path);
      assert.match(body.error.issues![0]!.message, /unknown parameter/, path);
    }
  });

  it("limit is a whole number in range, in digits: anything else is a 400 naming limit", async () => {
    // " 5", "1e2", "0x10" and "+5" were read as numbers (5, 100, 16, 5).
    for (const limit of ["%205", "1e2", "0x10", "+5", "5.0", "", "0", "501"]) {
      const res = await t.request(`/v1/orders?limit=${limit}`);
      assert.equal(res.status, 400, limit);
      const body = await json<Err>(res);
      assert.deepEqual(body.error.issues!.map((i) => i.path), ["limit"], limit);
    }
    for (const limit of ["1", "500", "007"]) assert.equal((await t.request(`/v1/orders?limit=${limit}`)).status, 200, limit);
  });

  it("a cursor pages through the list it was handed out for: other filters, an altered or a non-positive position are a 400 naming the cursor", async () => {
    const cursorOf = async (path: string) => (await json<{ next_cursor: string }>(await t.request(path))).next_cursor;
    const refused = async (path: string, message: RegExp) => {
      const res = await t.request(path);
      assert.equal(res.status, 400, path);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "invalid_parameter", path);
      assert.deepEqual(body.error.issues!.map((i) => i.path), ["cursor"], path);
      assert.match(body.error.issues![0]!.message, message, path);
    };
    // A cursor of the ALLOTTED orders was read under status=DELIVERED as a position there, skipping orders.
    const allotted = await cursorOf("/v1/orders?status=ALLOTTED&limit=2");
    assert.equal((await t.request(`/v1/orders?status=ALLOTTED&limit=2&cursor=${allotted}`)).status, 200);
    await refused(`/v1/orders?status=DELIVERED&limit=2&cursor=${allotted}`, /other filters/);
    await refused(`/v1/orders?limit=2&cursor=${allotted}`, /other filters/);
    const unfiltered = await cursorOf("/v1/orders?limit=2");
    await refused(`/v1/orders?store_code=S1&limit=2&cursor=${unfiltered}`, /other filters/);
    await refused(`/v1/orders?updated_after=2000-01-01T00:00:00Z&cursor=${unfiltered}`, /other filters/);
    // The same instant written another way is the same filter.
    const since = await cursorOf("/v1/orders?updated_after=2000-01-01T00:00:00Z&limit=2");
    assert.equal((await t.request(`/v1/orders?updated_after=2000-01-01T05:30:00%2B05:30&limit=2&cursor=${since}`)).status, 200);
    // Altered positions: an extra key, or ids no row has, were read as they came.
    const position = JSON.parse(Buffer.from(unfiltered, "base64url").toString()) as Record<string, unknown>;
    for (const forged of [{ ...position, extra: 1 }, { id: 0 }, { id: -5 }, { id: "5" }, { id: 1.5 }]) {
      await refused(`/v1/orders?cursor=${Buffer.from(JSON.stringify(forged)).toString("base64url")}`, /not a cursor from this endpoint/);
    }
  });

  it("400 saying so for a query parameter given twice", async () => {
    // ?status=DELIVERED&status=CREATED said "expected one of CREATED|…|DELIVERED|…", as if the values were wrong.
    for (const [path, field] of [
      ["/v1/orders?status=DELIVERED&status=CREATED", "status"],
      ["/v1/orders?limit=1&limit=1", "limit"],
      ["/v1/commands?cursor=a&cursor=b", "cursor"],
      ["/v1/orders/export?format=csv&format=csv", "format"],
    ] as const) {
      const res = await t.request(path);
      assert.equal(res.status, 400, path);
      const body = await json<Err>(res);
      assert.deepEqual(body.error.issues, [{ path: field, message: "given more than once; send it once" }], path);
      assert.match(body.error.message, new RegExp(`${field}: given more than once`), path);
    }
  });

  it("400 for a forged cursor", async () => {
    const res = await t.request("/v1/orders?cursor=bm90LWEtY3Vyc29y");
    assert.equal(res.status, 400);
    assert.equal((await json<Err>(res)).error.code, "invalid_parameter");
  });

  it("a 4xx naming the field for an instant PostgreSQL cannot hold: year 0000, or past 9999 once in UTC", async () => {
    for (const [path, init, field, status] of [
      ["/v1/orders?updated_after=0000-01-01T00:00:00Z", {}, "updated_after", 400],
      ["/v1/orders?updated_after=9999-12-31T23:59:59-23:59", {}, "updated_after", 400],
      ["/v1/orders/export?from=0000-01-01T00:00:00Z", {}, "from", 400],
      ["/v1/orders/export?to=9999-12-31T23:00:00-05:00", {}, "to", 400],
      // A body (422), checked before the endpoint is looked up.
      ["/v1/notifications/endpoints/ep_none/recover", { method: "POST", json: { since: "0000-01-01T00:00:00Z" } }, "since", 422],
    ] as const) {
      const res = await t.request(path, init);
      assert.equal(res.status, status, path);
      const body = await json<Err>(res);
      assert.deepEqual(body.error.issues!.map((i) => i.path), [field], path);
      assert.match(body.error.issues![0]!.message, /between years 0001 and 9999/, path);
    }
    // The edges themselves are fine.
    assert.equal((await t.request("/v1/orders?updated_after=9999-12-31T23:59:59Z")).status, 200);
    assert.equal((await t.request("/v1/orders?updated_after=0001-01-01T00:00:00Z")).status, 200);
  });

  it("400 for a timeline cursor whose instant is out of range, however it was forged", async () => {
    const [order] = await t.database.sql<{ id: string }[]>`select id::text as id from orders where client_order_id = 'API-0'`;
    const cursor = (m: string) => Buffer.from(JSON.stringify({ m, i: 1, o: order!.id })).toString("base64url");
    for (const m of ["99999999999999999999", "9223372036854775807", "-9223372036854775808", "253402300800000000"]) {
      const res = await t.request(`/v1/orders/API-0/events?cursor=${cursor(m)}`);
      assert.equal(res.status, 400, m);
      assert.equal((await json<Err>(res)).error.code, "invalid_parameter", m);
    }
    assert.equal((await t.request(`/v1/orders/API-0/events?cursor=${cursor("253402300799999999")}`)).status, 200);
  });

  it("404 JSON for unknown routes", async () => {
    const res = await t.request("/v2/whatever");
    assert.equal(res.status, 404);
    assert.equal((await json<Err>(res)).error.code, "not_found");
  });

  it("405 method_not_allowed with Allow for a /v1 path asked with a method it does not have", async () => {
    // These were 404 not_found "no route", as if the order or list did not exist.
    for (const [method, path, allow] of [
      ["DELETE", "/v1/orders/API-0", "GET, HEAD, PATCH"],
      ["PUT", "/v1/orders/by-svc-id/700", "GET, HEAD, PATCH"],
      ["GET", "/v1/orders/API-0/cancel", "POST"],
      ["DELETE", "/v1/commands", "GET, HEAD"],
      ["PUT", "/v1/notifications/endpoints/ep_nope", "DELETE, GET, HEAD, PATCH"],
    ] as const) {
      const res = await t.request(path, { method });
      assert.equal(res.status, 405, `${method} ${path}`);
      assert.equal(res.headers.get("allow"), allow, `${method} ${path}`);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "method_not_allowed");
      assert.ok(body.error.request_id);
    }
    // No token: 401 first, whatever the method.
    assert.equal((await t.request("/v1/orders/API-0", { method: "DELETE", token: null })).status, 401);
    assert.equal((await t.request("/v1/nothing-here", { method: "DELETE" })).status, 404);
  });
});

describe("security", () => {
  it("every /v1 route of the app answers 401 without the token, and with a wrong one", async () => {
    const routes = t.app.routes.filter((r) => r.path.startsWith("/v1/") && r.method !== "ALL");
    assert.ok(routes.length >= 5, `found ${routes.length} routes`);
    for (const route of routes) {
      const path = route.path.replace(/:[a-z_]+/g, "API-0");
      for (const token of [null, "wrong-token", `${API_TOKEN}x`, API_TOKEN.slice(0, -1)]) {
        const res = await t.request(path, { method: route.method, token, json: route.method === "GET" ? undefined : {} });
        assert.equal(res.status, 401, `${route.method} ${path} token=${token}`);
        assert.equal((await json<Err>(res)).error.code, "unauthorized");
      }
    }
  });

  it("accepts the bearer scheme case-insensitively and nothing else", async () => {
    assert.equal((await t.request("/v1/orders", { token: null, headers: { authorization: `bearer ${API_TOKEN}` } })).status, 200);
    assert.equal((await t.request("/v1/orders", { token: null, headers: { authorization: `Basic ${API_TOKEN}` } })).status, 401);
    assert.equal((await t.request("/v1/orders", { token: null, headers: { authorization: API_TOKEN } })).status, 401);
  });

  it("ops endpoints need no token", async () => {
    assert.deepEqual(await json(await t.request("/healthz", { token: null })), { ok: true });
    assert.deepEqual(await json(await t.request("/readyz", { token: null })), { ok: true });
    const metrics = await (await t.request("/metrics", { token: null })).text();
    assert.match(metrics, /tracklane_callbacks_total\{result="stored"\} \d+/);
    assert.match(metrics, /tracklane_projection_backlog \d+/);
  });

  it("the OpenAPI document declares what a sandbox call really answers", async () => {
    type Doc = { paths: Record<string, { post?: { responses: Record<string, unknown> } }> };
    const doc = await json<Doc>(await t.request("/openapi.json", { token: null }));
    // This app has no provider: 503 provider_unavailable, which the document left out (with 409, 422 and 502).
    const res = await t.request("/v1/sandbox/orders/API-0/allot", { method: "POST", json: { rider_id: 1 } });
    assert.equal(res.status, 503);
    assert.equal((await json<Err>(res)).error.code, "provider_unavailable");
    for (const path of ["/v1/sandbox/orders/{order}/{action}", "/v1/sandbox/orders/by-svc-id/{svc_order_id}/{action}"]) {
      const declared = Object.keys(doc.paths[path]?.post?.responses ?? {});
      for (const status of ["200", "403", "404", "409", "422", "502", "503"]) assert.ok(declared.includes(status), `${path} ${status}`);
    }
  });

  it("the OpenAPI document declares the 400 invalid_json that every route taking a body answers to malformed JSON", async () => {
    type Op = { requestBody?: unknown; responses: Record<string, unknown> };
    const doc = await json<{ paths: Record<string, Record<string, Op>> }>(await t.request("/openapi.json", { token: null }));
    let checked = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        if (!op.requestBody) continue;
        const res = await t.request(path.replace(/\{action\}/, "allot").replace(/\{[a-z_]+\}/g, "API-0"), {
          method: method.toUpperCase(),
          body: "{",
          headers: { "content-type": "application/json" },
        });
        assert.equal(res.status, 400, `${method} ${path}`);
        assert.equal((await json<Err>(res)).error.code, "invalid_json", `${method} ${path}`);
        assert.ok(Object.keys(op.responses).includes("400"), `${method} ${path} does not declare 400`);
        checked++;
      }
    }
    assert.ok(checked >= 10, `checked ${checked}`);
  });

  it("serves the OpenAPI document listing every /v1 route, and the docs page", async () => {
    const doc = await json<{ paths: Record<string, unknown>; components: { securitySchemes: Record<string, unknown> } }>(await t.request("/openapi.json", { token: null }));
    assert.ok(doc.paths["/v1/orders/{order}"]);
    assert.ok(doc.paths["/v1/orders/by-svc-id/{svc_order_id}/events"]);
    assert.ok(doc.components.securitySchemes.Bearer);
    const docs = await t.request("/docs", { token: null });
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /openapi\.json/);
  });
});
