/**
 * DATABASE_READ_URL: the API's GETs and the console's pages read a second pool, everything
 * else the primary. The read database here is a second database on the same server, filled
 * with other orders than the primary (a physical replica would hold the same rows, and
 * could not show which pool a page read): each answer says which one it came from.
 * Without DATABASE_READ_URL everything uses the one pool.
 */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { POOL_NAMES } from "../../src/db/client.ts";
import { driverSql } from "../../src/db/client.ts";
import { createLogger } from "../../src/logger.ts";
import { listEndpoints } from "../../src/notify/endpoints.ts";
import { findOrder } from "../../src/orders/read.ts";
import { startServices } from "../../src/runtime/services.ts";
import { API_TOKEN, CALLBACK_SECRET, TEST_READ_POOL, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { serverUrl } from "../helpers/db.ts";
import { consoleSignIn } from "../helpers/console.ts";

type Order = { client_order_id: string; status: string; rider: { name: string | null } };
type Page<T> = { items: T[]; next_cursor: string | null };

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

const status = (client: string, svc: number, s: string, minute: number, rider = "Meera") => ({
  sfx_order_id: svc,
  client_order_id: client,
  order_status: s,
  event_time: `2026-11-22T11:${String(minute).padStart(2, "0")}:00Z`,
  rider_id: 7,
  rider_name: rider,
});

/** Connections to `database` with this application_name, as the server counts them. */
async function connections(database: string, application: string): Promise<number> {
  const admin = driverSql(serverUrl("postgres"), { max: 1 });
  try {
    const [row] = await admin<{ n: number }[]>`
      select count(*)::int as n from pg_stat_activity where datname = ${database} and application_name = ${application}`;
    return row!.n;
  } finally {
    await admin.end();
  }
}

/** A closed connection leaves pg_stat_activity when its backend has exited: wait for that. */
async function connectionsGone(database: string, application: string): Promise<number> {
  let n = await connections(database, application);
  for (let i = 0; i < 50 && n > 0; i++) {
    await new Promise((r) => setTimeout(r, 100));
    n = await connections(database, application);
  }
  return n;
}

const signIn = (base: string) => consoleSignIn(base);

function webConfig(env: Record<string, string>) {
  return loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-read-")), API_TOKEN, CALLBACK_SECRET, HOST: "127.0.0.1", LOG_LEVEL: "silent", ...env });
}

describe("DATABASE_READ_URL set: GETs and pages read the read database, writes go to DATABASE_URL", () => {
  /** The read database, filled through an app of its own. */
  let r: TestApp;
  /** The app under test: DATABASE_URL its own database, DATABASE_READ_URL r's. */
  let p: TestApp;
  let server: { url: string; close(): Promise<void> };
  let session: { cookie: string; csrf: string };
  const ids = { readOrder: 0, readCommand: 0, readEndpoint: "", readMessage: "", primaryOrder: 0 };

  before(async () => {
    r = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0", NOTIFY_TIMEOUT_MS: "500" });
    const endpoint = await r.request("/v1/notifications/endpoints", { method: "POST", json: { url: "http://127.0.0.1:9/hook" } });
    assert.equal(endpoint.status, 201);
    ids.readEndpoint = (await json<{ id: string }>(endpoint)).id;
    for (const body of [status("R-1", 9101, "ALLOTTED", 1, "Ravi"), status("BOTH-1", 9200, "ALLOTTED", 2)]) assert.equal((await r.callback(body)).status, 200);
    assert.equal((await r.callback("not json {")).status, 400); // a rejected callback
    await r.runJobs();
    const command = await r.request("/v1/orders/R-1/stop-reattempt", { method: "POST" });
    assert.equal(command.status, 202);
    ids.readCommand = Number((await json<{ id: string | number }>(command)).id);
    ids.readOrder = (await findOrder(r.database.sql, { by: "client", id: "R-1" }))!.id;
    const [message] = await r.database.sql<{ id: string }[]>`select id from notification_messages order by id limit 1`;
    ids.readMessage = message!.id;

    p = await createTestApp({ DATABASE_READ_URL: r.testDb.url, NOTIFY_ALLOW_PRIVATE_URLS: "true" });
    for (const body of [status("P-1", 9001, "ALLOTTED", 3), status("BOTH-1", 9200, "ALLOTTED", 2), status("BOTH-1", 9200, "DELIVERED", 4)]) {
      assert.equal((await p.callback(body)).status, 200);
    }
    await p.runJobs();
    ids.primaryOrder = (await findOrder(p.database.sql, { by: "client", id: "P-1" }))!.id;
    server = await p.listen();
    session = await signIn(server.url);
  });
  after(async () => {
    await server?.close();
    await p?.close();
    await r?.close();
  });

  const get = (path: string) => fetch(`${server.url}${path}`, { headers: { cookie: session.cookie, authorization: `Bearer ${API_TOKEN}` }, redirect: "manual" });
  const post = (path: string, fields: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie: session.cookie, origin: server.url },
      body: new URLSearchParams({ _csrf: session.csrf, ...fields }),
    });

  it("the read pool is a second pool, on the read database, read-only", async () => {
    assert.notEqual(p.database.readSql, p.database.sql);
    const [where] = await p.database.readSql<{ db: string; ro: string }[]>`select current_database() as db, current_setting('default_transaction_read_only') as ro`;
    assert.deepEqual(where, { db: r.testDb.name, ro: "on" });
    // A write sent to the read pool by mistake is refused, not stored where nothing reads it.
    await assert.rejects(p.database.readSql`insert into console_marks (name, value) values ('rejected_seen', 1)`, (err: { code?: string }) => err.code === "25006");
  });

  it("API GETs answer from the read database; a callback and a POST land in the primary", async () => {
    const both = await json<Order>(await p.request("/v1/orders/BOTH-1"));
    assert.equal(both.status, "ALLOTTED", "the read database's BOTH-1 (DELIVERED in the primary)");
    assert.equal((await json<Order>(await p.request("/v1/orders/by-svc-id/9101"))).rider.name, "Ravi");
    assert.equal((await json<Page<unknown>>(await p.request("/v1/orders/BOTH-1/events"))).items.length, 1, "the read database holds one of BOTH-1's two events");
    const list = await json<Page<Order>>(await p.request("/v1/orders"));
    assert.deepEqual(list.items.map((o) => o.client_order_id).sort(), ["BOTH-1", "R-1"]);

    // The callback's order was acknowledged and stored in the primary: the read database has not got it.
    assert.equal((await p.request("/v1/orders/P-1")).status, 404);
    assert.equal((await findOrder(p.database.sql, { by: "client", id: "P-1" }))?.status, "ALLOTTED");
    assert.equal((await findOrder(p.database.sql, { by: "client", id: "BOTH-1" }))?.status, "DELIVERED");

    const created = await p.request("/v1/notifications/endpoints", { method: "POST", json: { url: "http://127.0.0.1:9/primary" } });
    assert.equal(created.status, 201);
    const { id } = await json<{ id: string }>(created);
    assert.deepEqual((await listEndpoints(p.database.sql)).map((e) => e.id), [id], "written to the primary");
    const listed = await json<{ items: { id: string }[] }>(await p.request("/v1/notifications/endpoints"));
    assert.deepEqual(listed.items.map((e) => e.id), [ids.readEndpoint], "listed from the read database");
    // The signing secret is the primary's: a replica behind a rotation would hand out the old one.
    const rotated = await p.request(`/v1/notifications/endpoints/${id}/secret/rotate`, { method: "POST" });
    assert.equal(rotated.status, 200);
    const secret = await p.request(`/v1/notifications/endpoints/${id}/secret`);
    assert.equal(secret.status, 200, "read from the primary, where the endpoint is");
    assert.deepEqual(await secret.json(), await rotated.json());
  });

  it("console pages read the read database; sessions and the page an action redirects to read the primary", async () => {
    // Signing in worked, so the session written at sign-in was found on the primary.
    const list = await (await get("/orders")).text();
    assert.match(list, />R-1</);
    assert.doesNotMatch(list, />P-1</);
    const page = await get(`/orders/${ids.readOrder}`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<h1>Order (?:<bdi>)?R-1(?:<\/bdi>)?<\/h1>[\s\S]*Ravi/);

    // An action on the primary's P-1: recorded there, and the page it redirects to shows it.
    const done = await post(`/orders/${ids.primaryOrder}/stop-reattempt`);
    assert.equal(done.status, 303);
    const location = done.headers.get("location")!;
    const command = /command=(\d+)/.exec(location)?.[1];
    assert.match(location, new RegExp(`^/orders/${ids.primaryOrder}\\?done=stop-reattempt&command=\\d+$`));
    const after = await (await get(location)).text();
    assert.match(after, /<h1>Order (?:<bdi>)?P-1(?:<\/bdi>)?<\/h1>/);
    assert.match(after, new RegExp(`<td>#${command} stop_<wbr/>reattempt</td>`), "the command, under Commands");
    // Without `done` the same URL is read on the read database again, where P-1 is not.
    assert.doesNotMatch(await (await get(`/orders/${ids.primaryOrder}`)).text(), /<h1>Order (?:<bdi>)?P-1(?:<\/bdi>)?<\/h1>/);
  });

  it("the System page shows the read pool's connections on the read database, and what that server is", async () => {
    const page = await (await get("/system")).text();
    const [primary, read] = page.split("<h2>Connected to the read database</h2>");
    assert.ok(read, "a section for the read database");
    assert.match(read, /<p id="read-server">DATABASE_READ_URL is a writable server, not a replica/);
    assert.match(read.split("<h2>")[0]!, new RegExp(`<td>${TEST_READ_POOL}</td>`));
    assert.doesNotMatch(primary!.split("<h2>Connected to the database</h2>")[1]!, new RegExp(TEST_READ_POOL), "the read pool is not connected to the primary");
  });

  it("as `npm run web` wires it: reads go out as tracklane-web-read, both pools are closed on stop", async () => {
    const config = webConfig({ DATABASE_URL: p.testDb.url, DATABASE_READ_URL: r.testDb.url });
    const log = createLogger({ level: "silent" });
    const services = await startServices({ config, databaseUrl: p.testDb.url, log, web: true, worker: false, port: 0 });
    try {
      const base = services.http!.url;
      const auth = { authorization: `Bearer ${API_TOKEN}` };
      assert.equal((await json<Order>(await fetch(`${base}/v1/orders/BOTH-1`, { headers: auth }))).status, "ALLOTTED");
      assert.equal((await fetch(`${base}/v1/orders/P-1`, { headers: auth })).status, 404);
      const ack = await fetch(`${base}/callbacks/${CALLBACK_SECRET}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(status("P-2", 9002, "ALLOTTED", 5)) });
      assert.equal(ack.status, 200);
      const stored = async (sql: typeof p.database.sql) => (await sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = 'P-2'`)[0]!.n;
      assert.deepEqual([await stored(p.database.sql), await stored(r.database.sql)], [1, 0], "the callback is stored in the primary only");
      assert.ok((await connections(r.testDb.name, POOL_NAMES.read)) >= 1, "the read pool is connected to the read database");
      assert.equal(await connections(p.testDb.name, POOL_NAMES.read), 0);
      assert.ok((await connections(p.testDb.name, POOL_NAMES.web)) >= 1);
    } finally {
      await services.stop();
    }
    assert.equal(await connectionsGone(r.testDb.name, POOL_NAMES.read), 0, "the read pool is closed");
    assert.equal(await connectionsGone(p.testDb.name, POOL_NAMES.web), 0, "the primary's pool is closed");
  });

  // Last: it hides the primary's tables.
  it("every GET route, API and console, reads only the read pool (the primary's tables hidden)", async () => {
    // What the primary must still answer for pages: the sessions and marks. Everything else
    // moves out of reach, so a GET that read it on the primary would fail with a 500.
    const admin = driverSql(p.testDb.url, { max: 1 });
    try {
      await admin.unsafe(`
        alter schema public rename to hidden_from_pages;
        create schema public;
        alter table hidden_from_pages.console_sessions set schema public;
        alter table hidden_from_pages.console_marks set schema public;
        alter schema graphile_worker rename to graphile_worker_hidden`);
    } finally {
      await admin.end();
    }
    await assert.rejects(p.database.sql`select 1 from orders`, (err: { code?: string }) => err.code === "42P01");

    // Readiness, metrics and an endpoint's signing secret are the primary's by design.
    const primaryOnly = new Set(["/readyz", "/metrics", "/v1/notifications/endpoints/:id/secret"]);
    const concrete = (path: string) =>
      path
        .replace(":order", "R-1")
        .replace(":svc_order_id", "9101")
        .replace(/^\/orders\/:id/, `/orders/${ids.readOrder}`)
        .replace(/^\/commands\/:id/, `/commands/${ids.readCommand}`)
        .replace(/^\/v1\/notifications\/endpoints\/:id/, `/v1/notifications/endpoints/${ids.readEndpoint}`)
        .replace(/messages\/:id/, `messages/${ids.readMessage}`);
    const paths = [...new Set(p.app.routes.filter((route) => route.method === "GET" && !route.path.includes("*")).map((route) => route.path))].filter((path) => !primaryOnly.has(path));
    assert.ok(paths.length >= 35, `the app's GET routes: ${paths.join(" ")}`);
    const failures: string[] = [];
    for (const path of paths.map(concrete)) {
      assert.ok(!path.includes(":"), `no value for a parameter of ${path}`);
      const res = await get(path);
      const body = await res.text();
      // Redirects: /attention to /, /sign-in (signed in already) to the page asked for.
      if (res.status !== 200 && res.status !== 303) failures.push(`GET ${path}: ${res.status} ${body.slice(0, 200)}`);
    }
    assert.deepEqual(failures, []);
  });
});

describe("DATABASE_READ_URL unset: everything reads and writes the one pool", () => {
  let q: TestApp;
  before(async () => {
    q = await createTestApp();
    assert.equal((await q.callback(status("Q-1", 9301, "ARRIVED", 1))).status, 200);
    await q.runJobs();
  });
  after(async () => {
    await q?.close();
  });

  it("reads are the primary's: the read pool is the pool", async () => {
    assert.equal(q.database.readSql, q.database.sql);
    assert.equal((await json<Order>(await q.request("/v1/orders/Q-1"))).status, "ARRIVED");
  });

  it("as `npm run web` wires it: one pool, no tracklane-web-read connection", async () => {
    const services = await startServices({ config: webConfig({ DATABASE_URL: q.testDb.url }), databaseUrl: q.testDb.url, log: createLogger({ level: "silent" }), web: true, worker: false, port: 0 });
    try {
      assert.equal(services.database.readSql, services.database.sql);
      const res = await fetch(`${services.http!.url}/v1/orders/Q-1`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
      assert.equal((await json<Order>(res)).status, "ARRIVED");
      assert.ok((await connections(q.testDb.name, POOL_NAMES.web)) >= 1);
      assert.equal(await connections(q.testDb.name, POOL_NAMES.read), 0);
    } finally {
      await services.stop();
    }
  });
});
