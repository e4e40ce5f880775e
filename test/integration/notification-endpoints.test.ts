/**
 * /v1/notifications/endpoints through the HTTP app on real PostgreSQL. Every URL is an IP
 * literal, so the URL check needs no DNS; nothing is ever sent to any of them.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createEndpoint, disableEndpoint, enabledEndpoints, getEndpoint, signingSecrets } from "../../src/notify/endpoints.ts";
import { subscribes } from "../../src/notify/outbox.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const BASE = "/v1/notifications/endpoints";
const ID = /^ep_[0-9A-Za-z]{26}$/;
const UNKNOWN_ID = "ep_00000000000000000000000000";
const HOUR_MS = 3_600_000;

interface Endpoint {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  created_at: string;
  updated_at: string;
}
type Created = Endpoint & { secret: string };
type Err = { error: { code: string; message: string; request_id: string; issues?: { path: string; message: string }[] } };

const json = async <T>(res: Response) => (await res.json()) as T;

/** Private addresses allowed: the CRUD tests use loopback URLs. */
let t: TestApp;
/** The default: private addresses refused. */
let strict: TestApp;
before(async () => {
  [t, strict] = await Promise.all([createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true" }), createTestApp()]);
});
after(async () => {
  await Promise.all([t.close(), strict.close()]);
});

async function create(app: TestApp, body: Record<string, unknown>): Promise<Created> {
  const res = await app.request(BASE, { method: "POST", json: body });
  assert.equal(res.status, 201, await res.clone().text());
  return await json<Created>(res);
}

describe("POST /v1/notifications/endpoints", () => {
  it("creates an endpoint for every type, with a whsec_ secret shown once", async () => {
    const ep = await create(t, { url: "http://127.0.0.1:9/hook" });
    assert.deepEqual(Object.keys(ep).sort(), ["created_at", "description", "disabled_reason", "enabled", "events", "id", "secret", "updated_at", "url"]);
    assert.match(ep.id, ID);
    assert.equal(ep.url, "http://127.0.0.1:9/hook");
    assert.deepEqual(ep.events, []);
    assert.equal(ep.description, null);
    assert.equal(ep.enabled, true);
    assert.equal(ep.disabled_reason, null);
    assert.match(ep.secret, /^whsec_[A-Za-z0-9+/]+={0,2}$/);
    assert.equal(Buffer.from(ep.secret.slice("whsec_".length), "base64").length, 24);
    assert.ok(Math.abs(Date.parse(ep.created_at) - Date.now()) < 60_000);
  });

  it("keeps the events (each once) and the description; two endpoints never share an id or a secret", async () => {
    const a = await create(t, { url: "https://127.0.0.1/a", events: ["order.status_changed", "command.failed", "order.status_changed"], description: "ops" });
    const b = await create(t, { url: "https://127.0.0.1/b", events: [], description: null });
    assert.deepEqual(a.events, ["order.status_changed", "command.failed"]);
    assert.equal(a.description, "ops");
    assert.deepEqual(b.events, []);
    assert.notEqual(a.id, b.id);
    assert.notEqual(a.secret, b.secret);
  });

  it("refuses an unknown event type, naming it", async () => {
    const res = await t.request(BASE, { method: "POST", json: { url: "http://127.0.0.1/x", events: ["order.status_changed", "order.teleported"] } });
    assert.equal(res.status, 422);
    const body = await json<Err>(res);
    assert.equal(body.error.code, "validation_failed");
    assert.match(body.error.message, /order\.teleported/);
    assert.deepEqual(body.error.issues?.map((i) => i.path), ["events.1"]);
  });

  it("refuses a missing, non-http or too long url and a too long description, naming each field", async () => {
    for (const [payload, field] of [
      [{}, "url"],
      [{ url: "ftp://127.0.0.1/file" }, "url"],
      [{ url: "not a url" }, "url"],
      [{ url: `http://127.0.0.1/${"a".repeat(2048)}` }, "url"],
      [{ url: "http://127.0.0.1/x", description: "d".repeat(501) }, "description"],
      [{ url: "http://127.0.0.1/x", events: "order.status_changed" }, "events"],
    ] as const) {
      const res = await t.request(BASE, { method: "POST", json: payload });
      assert.equal(res.status, 422, JSON.stringify(payload));
      const body = await json<Err>(res);
      assert.equal(body.error.code, "validation_failed");
      assert.deepEqual(body.error.issues?.map((i) => i.path), [field], JSON.stringify(payload));
    }
  });
});

describe("reading, changing and deleting", () => {
  let ep: Created;
  before(async () => {
    ep = await create(t, { url: "http://127.0.0.1:8080/read", events: ["awb.pool_low"], description: "to read" });
  });

  it("lists endpoints oldest first, without secrets", async () => {
    const res = await t.request(BASE);
    assert.equal(res.status, 200);
    const text = await res.text();
    const { items } = JSON.parse(text) as { items: Endpoint[] };
    assert.ok(items.some((i) => i.id === ep.id));
    assert.deepEqual([...items].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id)), items);
    for (const item of items) assert.ok(!("secret" in item) && !("previous_secret" in item), JSON.stringify(item));
    assert.ok(!text.includes("whsec_"));
  });

  it("reads one endpoint as created, without its secret", async () => {
    const res = await t.request(`${BASE}/${ep.id}`);
    assert.equal(res.status, 200);
    const { secret: _secret, ...shown } = ep;
    assert.deepEqual(await json(res), shown);
  });

  it("changes each field alone, leaving the others", async () => {
    const patch = async (body: Record<string, unknown>) => {
      const res = await t.request(`${BASE}/${ep.id}`, { method: "PATCH", json: body });
      assert.equal(res.status, 200, await res.clone().text());
      return await json<Endpoint>(res);
    };
    const url = await patch({ url: "https://127.0.0.1:8443/moved" });
    assert.deepEqual([url.url, url.events, url.description, url.enabled], ["https://127.0.0.1:8443/moved", ["awb.pool_low"], "to read", true]);
    assert.ok(Date.parse(url.updated_at) >= Date.parse(ep.updated_at));
    assert.equal(url.created_at, ep.created_at);

    const events = await patch({ events: ["test.ping", "order.rider_location"] });
    assert.deepEqual([events.url, events.events], ["https://127.0.0.1:8443/moved", ["test.ping", "order.rider_location"]]);
    assert.deepEqual((await patch({ events: [] })).events, []);

    assert.equal((await patch({ description: "renamed" })).description, "renamed");
    assert.equal((await patch({ description: null })).description, null);

    const off = await patch({ enabled: false });
    assert.deepEqual([off.enabled, off.disabled_reason, off.url], [false, null, "https://127.0.0.1:8443/moved"]);
    assert.equal((await patch({ enabled: true })).enabled, true);

    const shown = await json<Endpoint>(await t.request(`${BASE}/${ep.id}`));
    assert.deepEqual([shown.url, shown.events, shown.description, shown.enabled], ["https://127.0.0.1:8443/moved", [], null, true]);
    // The secret is not something a PATCH changes.
    assert.equal((await json<{ secret: string }>(await t.request(`${BASE}/${ep.id}/secret`))).secret, ep.secret);
  });

  it("refuses an empty change, an unknown type and a non-http url", async () => {
    for (const [payload, pattern] of [
      [{}, /nothing to change/],
      [{ events: ["order.exploded"] }, /order\.exploded/],
      [{ url: "ftp://127.0.0.1/" }, /url/],
      [{ enabled: "yes" }, /enabled/],
    ] as const) {
      const res = await t.request(`${BASE}/${ep.id}`, { method: "PATCH", json: payload });
      assert.equal(res.status, 422, JSON.stringify(payload));
      const body = await json<Err>(res);
      assert.equal(body.error.code, "validation_failed");
      assert.match(body.error.message, pattern);
    }
  });

  it("deletes (204), then the endpoint is gone everywhere (404)", async () => {
    const doomed = await create(t, { url: "http://127.0.0.1/doomed" });
    const res = await t.request(`${BASE}/${doomed.id}`, { method: "DELETE" });
    assert.equal(res.status, 204);
    assert.equal(await res.text(), "");
    for (const [method, path] of [
      ["GET", ""],
      ["DELETE", ""],
      ["PATCH", ""],
      ["GET", "/secret"],
      ["POST", "/secret/rotate"],
    ] as const) {
      const gone = await t.request(`${BASE}/${doomed.id}${path}`, { method, ...(method === "PATCH" ? { json: { enabled: false } } : {}) });
      assert.equal(gone.status, 404, `${method} ${path}`);
      assert.equal((await json<Err>(gone)).error.code, "notification_endpoint_not_found");
    }
    const { items } = await json<{ items: Endpoint[] }>(await t.request(BASE));
    assert.ok(!items.some((i) => i.id === doomed.id));
  });

  it("answers 404 for an id it never gave, well-formed or not", async () => {
    for (const id of [UNKNOWN_ID, "nope", "ep_short", "1", `ep_${"x".repeat(200)}`]) {
      const res = await t.request(`${BASE}/${id}`);
      assert.equal(res.status, 404, id);
      assert.equal((await json<Err>(res)).error.code, "notification_endpoint_not_found");
    }
  });

  it("the message and recovery routes answer 404 too for any id they never gave, however long (docs/api.md)", async () => {
    const long = "x".repeat(200);
    for (const [method, path, code] of [
      ["GET", `/v1/notifications/messages/msg_${long}`, "notification_message_not_found"],
      ["GET", "/v1/notifications/messages/nope", "notification_message_not_found"],
      ["POST", `/v1/notifications/messages/msg_${long}/resend`, "notification_message_not_found"],
      ["POST", `${BASE}/ep_${long}/test`, "notification_endpoint_not_found"],
      ["POST", `${BASE}/ep_${long}/recover`, "notification_endpoint_not_found"],
    ] as const) {
      const res = await t.request(path, { method, ...(path.endsWith("/recover") ? { json: { since: "2026-01-01T00:00:00Z" } } : {}) });
      assert.equal(res.status, 404, `${method} ${path.slice(0, 60)}: ${await res.clone().text()}`);
      const body = await json<Err>(res);
      assert.equal(body.error.code, code);
      assert.ok(body.error.message.length < 120, body.error.message);
    }
  });
});

describe("secrets", () => {
  it("GET …/secret answers the secret given at creation", async () => {
    const ep = await create(t, { url: "http://127.0.0.1/secret" });
    const res = await t.request(`${BASE}/${ep.id}/secret`);
    assert.equal(res.status, 200);
    assert.deepEqual(await json(res), { secret: ep.secret });
  });

  it("rotation gives a new secret; the old one keeps signing for 24 hours", async () => {
    const ep = await create(t, { url: "http://127.0.0.1/rotate" });
    const res = await t.request(`${BASE}/${ep.id}/secret/rotate`, { method: "POST" });
    assert.equal(res.status, 200);
    const { secret } = await json<{ secret: string }>(res);
    assert.match(secret, /^whsec_/);
    assert.notEqual(secret, ep.secret);
    assert.deepEqual(await json(await t.request(`${BASE}/${ep.id}/secret`)), { secret });

    const row = (await getEndpoint(t.database.sql, ep.id))!;
    assert.equal(row.secret, secret);
    assert.equal(row.previous_secret, ep.secret);
    const until = row.previous_secret_until!.getTime();
    assert.ok(Math.abs(until - (Date.now() + 24 * HOUR_MS)) < 60_000, row.previous_secret_until!.toISOString());
    assert.deepEqual(signingSecrets(row, new Date()), [secret, ep.secret]);
    assert.deepEqual(signingSecrets(row, new Date(until + 1)), [secret]);

    // A second rotation: the secret of the first becomes the previous one.
    const again = await json<{ secret: string }>(await t.request(`${BASE}/${ep.id}/secret/rotate`, { method: "POST" }));
    const row2 = (await getEndpoint(t.database.sql, ep.id))!;
    assert.deepEqual([row2.secret, row2.previous_secret], [again.secret, secret]);
  });

  it("signingSecrets (pure): only the current secret without a previous one or once its time is up", () => {
    const now = new Date("2026-11-23T12:00:00Z");
    const base = { secret: "whsec_new", previous_secret: null, previous_secret_until: null };
    assert.deepEqual(signingSecrets(base, now), ["whsec_new"]);
    const rotated = { secret: "whsec_new", previous_secret: "whsec_old", previous_secret_until: new Date(now.getTime() + 24 * HOUR_MS) };
    assert.deepEqual(signingSecrets(rotated, now), ["whsec_new", "whsec_old"]);
    assert.deepEqual(signingSecrets(rotated, new Date(now.getTime() + 24 * HOUR_MS - 1)), ["whsec_new", "whsec_old"]);
    assert.deepEqual(signingSecrets(rotated, new Date(now.getTime() + 24 * HOUR_MS)), ["whsec_new"]);
    assert.deepEqual(signingSecrets({ ...rotated, previous_secret_until: null }, now), ["whsec_new"]);
  });
});

describe("who gets what (owner functions)", () => {
  it("the enabled endpoints whose events are empty or name the type; disabling shows its reason until enabled again", async () => {
    const sql = strict.database.sql;
    const all = await createEndpoint(sql, { url: "https://192.0.2.1/all", events: [], description: null });
    const some = await createEndpoint(sql, { url: "https://192.0.2.1/some", events: ["command.failed"], description: null });
    const ids = async (type: string) => (await enabledEndpoints(sql)).filter((e) => subscribes(e, type)).map((e) => e.id).sort();
    assert.deepEqual(await ids("command.failed"), [all.id, some.id].sort());
    assert.deepEqual(await ids("order.status_changed"), [all.id]);

    await disableEndpoint(sql, some.id, "failing since yesterday");
    assert.deepEqual(await ids("command.failed"), [all.id]);
    const shown = await json<Endpoint>(await strict.request(`${BASE}/${some.id}`));
    assert.deepEqual([shown.enabled, shown.disabled_reason], [false, "failing since yesterday"]);

    const res = await strict.request(`${BASE}/${some.id}`, { method: "PATCH", json: { enabled: true } });
    assert.equal((await json<Endpoint>(res)).disabled_reason, null);
    assert.deepEqual(await ids("command.failed"), [all.id, some.id].sort());
  });
});

describe("URLs tracklane will not send to (NOTIFY_ALLOW_PRIVATE_URLS unset)", () => {
  const forbidden = ["http://127.0.0.1/", "http://10.0.0.1/", "https://192.168.1.20:8443/hook", "http://169.254.169.254/latest/meta-data", "http://[::1]/"];

  it("refuses loopback, private, link-local and metadata addresses at creation with 422 endpoint_url_forbidden", async () => {
    for (const url of forbidden) {
      const res = await strict.request(BASE, { method: "POST", json: { url } });
      assert.equal(res.status, 422, url);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "endpoint_url_forbidden", url);
      assert.ok(body.error.message.length > 0);
    }
    const { items } = await json<{ items: Endpoint[] }>(await strict.request(BASE));
    assert.ok(!items.some((i) => forbidden.includes(i.url)));
  });

  it("refuses ftp: as an invalid body", async () => {
    const res = await strict.request(BASE, { method: "POST", json: { url: "ftp://10.0.0.1/" } });
    assert.equal(res.status, 422);
    assert.equal((await json<Err>(res)).error.code, "validation_failed");
  });

  it("checks a changed url the same way, and leaves the endpoint as it was", async () => {
    const ep = await createEndpoint(strict.database.sql, { url: "https://192.0.2.10/hook", events: [], description: null });
    const res = await strict.request(`${BASE}/${ep.id}`, { method: "PATCH", json: { url: "http://10.0.0.1/" } });
    assert.equal(res.status, 422);
    assert.equal((await json<Err>(res)).error.code, "endpoint_url_forbidden");
    assert.equal((await json<Endpoint>(await strict.request(`${BASE}/${ep.id}`))).url, "https://192.0.2.10/hook");
    // A change that leaves the url alone is not checked again.
    assert.equal((await strict.request(`${BASE}/${ep.id}`, { method: "PATCH", json: { description: "kept" } })).status, 200);
  });
});

describe("auth and the OpenAPI document", () => {
  it("every route needs the bearer token", async () => {
    for (const [method, path] of [
      ["POST", BASE],
      ["GET", BASE],
      ["GET", `${BASE}/${UNKNOWN_ID}`],
      ["PATCH", `${BASE}/${UNKNOWN_ID}`],
      ["DELETE", `${BASE}/${UNKNOWN_ID}`],
      ["GET", `${BASE}/${UNKNOWN_ID}/secret`],
      ["POST", `${BASE}/${UNKNOWN_ID}/secret/rotate`],
    ] as const) {
      const res = await t.request(path, { method, token: null, ...(method === "POST" || method === "PATCH" ? { json: { url: "http://127.0.0.1/" } } : {}) });
      assert.equal(res.status, 401, `${method} ${path}`);
      assert.equal((await json<Err>(res)).error.code, "unauthorized");
    }
  });

  it("/openapi.json documents every route, tagged notifications, with bearer security", async () => {
    type Op = { tags?: string[]; security?: unknown[]; responses: Record<string, unknown> };
    const doc = await json<{ paths: Record<string, Record<string, Op>> }>(await t.request("/openapi.json", { token: null }));
    const expected: Record<string, string[]> = {
      [BASE]: ["get", "post"],
      [`${BASE}/{id}`]: ["delete", "get", "patch"],
      [`${BASE}/{id}/secret`]: ["get"],
      [`${BASE}/{id}/secret/rotate`]: ["post"],
    };
    for (const [path, methods] of Object.entries(expected)) {
      const item = doc.paths[path];
      assert.ok(item, `${path} is missing`);
      for (const m of methods) {
        const op: Op | undefined = item[m];
        assert.ok(op, `${m} ${path} is missing`);
        assert.deepEqual(op.tags, ["notifications"]);
        assert.deepEqual(op.security, [{ Bearer: [] }]);
      }
    }
    assert.ok(doc.paths[BASE]!.post!.responses["201"]);
    assert.ok(doc.paths[`${BASE}/{id}`]!.delete!.responses["204"]);
  });
});
