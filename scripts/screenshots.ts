/**
 * `npm run screenshots`: pictures of the console for the docs. Starts tracklane (web and
 * worker, with the built-in provider emulator on 127.0.0.1) on a scratch database, makes
 * demo data through the API and the emulator's sandbox (orders in several statuses with
 * rider paths, a cancelled one, an unconfirmed placement, a refused place, a rejected
 * callback, notification endpoints), signs in through the console's form in headless
 * Chromium and writes every console page at 390 and 1280 px wide to docs/screenshots/.
 *
 * The scratch database is created on DATABASE_URL's server (or TEST_DATABASE_URL's, or the
 * embedded PostgreSQL `npm test` uses, under .data/test) and dropped afterwards; nothing
 * else in that server is touched. Chromium as for the browser tests (CHROMIUM_PATH, else
 * /usr/bin/chromium, else chromium on PATH).
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, relative, resolve } from "node:path";
import type { Page } from "playwright-core";
import { loadConfig } from "../src/config.ts";
import { driverSql } from "../src/db/client.ts";
import { runMigrations } from "../src/db/migrate.ts";
import { withDatabase } from "../src/db/url.ts";
import { createLogger } from "../src/logger.ts";
import { resolveDatabase } from "../src/runtime/database.ts";
import { startBuiltInEmulator } from "../src/runtime/provider.ts";
import { commandLine } from "../src/runtime/cli.ts";
import { startServices } from "../src/runtime/services.ts";
import { launchBrowser, signIn } from "../test/helpers/browser.ts";

const root = resolve(import.meta.dirname, "..");
const outDir = join(root, "docs/screenshots");
const WIDTHS = [390, 1280] as const;
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A local webhook receiver: /ok answers 204, /broken 503 (so the notifications page has both). */
async function startReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => res.writeHead(req.url?.startsWith("/broken") ? 503 : 204).end());
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        server.closeAllConnections();
      }),
  };
}

async function main(): Promise<number> {
  // The demo's refused and lost places are logged as warnings on purpose: errors only, unless LOG_LEVEL says otherwise.
  const log = createLogger({ level: process.env.LOG_LEVEL ?? "error" });
  const server = await resolveDatabase({
    databaseUrl: process.env.DATABASE_URL || process.env.TEST_DATABASE_URL || undefined,
    dataDir: join(root, ".data/test"),
    log,
  });
  const scratch = `tracklane_screenshots_${randomBytes(4).toString("hex")}`;
  const admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-screenshots-"));
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    await admin.unsafe(`create database ${scratch}`);
    cleanups.push(() => admin.unsafe(`drop database if exists ${scratch} with (force)`));
    const databaseUrl = withDatabase(server.url, scratch);
    await runMigrations(databaseUrl, log);
    const where = process.env.DATABASE_URL ? "DATABASE_URL's server" : process.env.TEST_DATABASE_URL ? "TEST_DATABASE_URL's server" : server.description;
    say(`screenshots: scratch database ${scratch} on ${where} (dropped at the end)`);

    const apiToken = randomBytes(18).toString("hex");
    const callbackSecret = randomBytes(18).toString("hex");
    const config = loadConfig({
      DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      HOST: "127.0.0.1",
      PORT: "0",
      EMULATOR_PORT: "0",
      API_TOKEN: apiToken,
      CALLBACK_SECRET: callbackSecret,
      LOG_LEVEL: process.env.LOG_LEVEL ?? "error",
      PROVIDER_TIMEZONE: "Asia/Kolkata",
      PROVIDER_TIMEOUT_MS: "1500",
      COMMAND_MAX_ATTEMPTS: "3",
      COMMAND_RETRY_BASE_MS: "200",
      AWB_POOL_TARGET: "60",
      AWB_POOL_LOW_WATERMARK: "20",
      NOTIFY_ALLOW_PRIVATE_URLS: "true",
      NOTIFY_RETRY_SCHEDULE: "0,1,300",
      NOTIFY_TIMEOUT_MS: "1000",
    });
    const builtIn = await startBuiltInEmulator(config, log);
    cleanups.push(() => builtIn.emulator.close());
    const services = await startServices({ config, databaseUrl, log, web: true, worker: true, provider: builtIn.client, port: 0 });
    cleanups.push(() => services.stop());
    const base = services.http!.url;
    builtIn.register(`${base}/callbacks/${callbackSecret}`);
    const receiver = await startReceiver();
    cleanups.push(() => receiver.close());
    say(`screenshots: tracklane at ${base}, emulator at ${builtIn.emulator.url}`);

    const ids = await demoData({ base, apiToken, callbackSecret, emulatorUrl: builtIn.emulator.url, receiverUrl: receiver.url });
    return await shoot(base, apiToken, ids);
  } finally {
    for (const undo of cleanups.reverse()) await undo().catch((err: unknown) => console.error("screenshots: cleanup:", err));
    await admin.end();
    await server.release();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface DemoIds {
  delivered: string;
  unconfirmed: string;
}

async function demoData(o: { base: string; apiToken: string; callbackSecret: string; emulatorUrl: string; receiverUrl: string }): Promise<DemoIds> {
  const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await fetch(`${o.base}${path}`, {
      method,
      headers: { authorization: `Bearer ${o.apiToken}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
  const must = async (method: string, path: string, body: unknown, ...ok: number[]) => {
    const res = await api(method, path, body);
    if (!ok.includes(res.status)) throw new Error(`${method} ${path}: HTTP ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const waitFor = async (coid: string, what: string, ok: (order: Record<string, unknown>) => boolean, timeoutMs = 30_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { status, body } = await api("GET", `/v1/orders/${encodeURIComponent(coid)}`);
      if (status === 200 && ok(body)) return body;
      if (Date.now() > deadline) throw new Error(`order ${coid}: no ${what} after ${timeoutMs / 1000} s: ${JSON.stringify(body)}`);
      await sleep(150);
    }
  };
  const placement = (coid: string, state: string) => waitFor(coid, `placement ${state}`, (b) => (b.placement as { state: string }).state === state);
  const status = (coid: string, s: string) => waitFor(coid, `status ${s}`, (b) => b.status === s);
  const fault = async (rule: Record<string, unknown>) => {
    const res = await fetch(`${o.emulatorUrl}/__emulator/faults`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(rule) });
    if (res.status !== 201) throw new Error(`emulator fault: HTTP ${res.status} ${await res.text()}`);
  };

  const stamp = Date.now().toString(36).toUpperCase().slice(-5);
  const customers = [
    { name: "Asha Rao", line1: "12 MG Road", line2: "Flat 4B", lat: 12.9756, lng: 77.6066 },
    { name: "Vikram Shetty", line1: "88 100 Feet Road, Indiranagar", line2: "", lat: 12.9719, lng: 77.6412 },
    { name: "Meera Iyer", line1: "5th Cross, Malleshwaram", line2: "2nd floor", lat: 13.0035, lng: 77.5709 },
    { name: "Rahul Menon", line1: "27 Church Street", line2: "", lat: 12.9752, lng: 77.6046 },
    { name: "Fatima Khan", line1: "14 Brigade Road", line2: "Shop 3", lat: 12.9716, lng: 77.6070 },
    { name: "Arjun Nair", line1: "3 Koramangala 5th Block", line2: "", lat: 12.9352, lng: 77.6245 },
    { name: "Divya Pillai", line1: "61 Jayanagar 4th Block", line2: "", lat: 12.9250, lng: 77.5838 },
    { name: "Karan Gupta", line1: "9 HSR Layout Sector 2", line2: "", lat: 12.9116, lng: 77.6474 },
    { name: "Sneha Kulkarni", line1: "44 Whitefield Main Road", line2: "", lat: 12.9698, lng: 77.7500 },
  ];
  const stores = ["BLR-INDIRANAGAR", "BLR-KORAMANGALA", "BLR-JAYANAGAR"];
  let n = 0;
  const place = async (store = stores[n % stores.length]!) => {
    const c = customers[n % customers.length]!;
    n += 1;
    const coid = `SO-${stamp}-${String(1000 + n)}`;
    await must(
      "POST",
      "/v1/orders",
      {
        store_code: store,
        order_details: { client_order_id: coid, order_value: 180 + n * 65, paid: n % 2 === 0, payment_mode: n % 2 === 0 ? "prepaid" : "COD" },
        customer_details: { name: c.name, contact_number: `98${String(45000000 + n * 1117).padStart(8, "0")}`, address_line_1: c.line1, ...(c.line2 ? { address_line_2: c.line2 } : {}), city: "Bengaluru", latitude: c.lat, longitude: c.lng },
        product_details: [
          { id: "SKU-TEA", name: "Masala chai 250 g", price: 120, quantity: 1 + (n % 3) },
          { id: "SKU-IDLI", name: "Idli batter 1 kg", price: 90, quantity: 1 },
        ],
        pickup_contact_number: "9000000000",
      },
      202,
    );
    return coid;
  };
  const step = async (coid: string, action: string, body: unknown = {}) => {
    await must("POST", `/v1/sandbox/orders/${encodeURIComponent(coid)}/${action}`, body, 200);
  };
  /** The rider from `from` to `to` in `count` location updates. */
  const ride = async (coid: string, from: [number, number], to: [number, number], count: number) => {
    for (let i = 1; i <= count; i++) {
      const f = i / count;
      const wobble = Math.sin(i * 1.7) * 0.0012;
      await step(coid, "rider-location", { latitude: from[0] + (to[0] - from[0]) * f + wobble, longitude: from[1] + (to[1] - from[1]) * f - wobble, accuracy: 6 });
      await sleep(60);
    }
  };
  const storeAt: [number, number] = [12.9784, 77.6408];

  say("screenshots: demo data");
  // A filled AWB pool (a top-up from the emulator), and an AWB for the first order.
  await must("POST", "/v1/awb/replenish", {}, 202);
  for (let i = 0; ; i++) {
    const pool = await must("GET", "/v1/awb/pool", undefined, 200);
    if (Number(pool.available) > 0) break;
    if (i > 120) throw new Error(`the AWB pool stayed empty: ${JSON.stringify(pool)}`);
    await sleep(250);
  }
  await must("POST", "/v1/awb/allocate", { client_order_id: `SO-${stamp}-${String(1001)}` }, 200);

  // Delivered, with the whole ride.
  const delivered = await place(stores[0]);
  await placement(delivered, "placed");
  await step(delivered, "allot", { rider_id: 7731 });
  await status(delivered, "ALLOTTED");
  await ride(delivered, [12.9701, 77.6352], storeAt, 3);
  await step(delivered, "rider-arrival");
  await status(delivered, "ARRIVED");
  await step(delivered, "collect", { status: "COLLECTED", pickup_lat: storeAt[0], pickup_lng: storeAt[1] });
  await status(delivered, "COLLECTED");
  await ride(delivered, storeAt, [12.9762, 77.6079], 7);
  await step(delivered, "doorstep-arrival", { time_arrival: new Date().toISOString(), arrival_lat: 12.9757, arrival_lng: 77.6068, arrival_accuracy: 8 });
  await status(delivered, "CUSTOMER_DOOR_STEP");
  await step(delivered, "deliver", { status: "DELIVERED", delivery_latitude: 12.9756, delivery_longitude: 77.6066, is_partial_delivery: false });
  await status(delivered, "DELIVERED");

  // Out for delivery, half way.
  const onTheWay = await place();
  await placement(onTheWay, "placed");
  await step(onTheWay, "allot", { rider_id: 7740 });
  await status(onTheWay, "ALLOTTED");
  await step(onTheWay, "collect", { status: "COLLECTED", pickup_lat: 12.9345, pickup_lng: 77.6101 });
  await status(onTheWay, "COLLECTED");
  await ride(onTheWay, [12.9345, 77.6101], [12.9719, 77.6412], 4);

  // A rider on the way to the store; one waiting for a rider.
  const allotted = await place();
  await placement(allotted, "placed");
  await step(allotted, "allot", { rider_id: 7752 });
  await status(allotted, "ALLOTTED");
  await ride(allotted, [12.9302, 77.5801], [12.9250, 77.5838], 2);
  const waiting = await place();
  await placement(waiting, "placed");

  // Cancelled through tracklane: a cancel command and the provider's answer.
  const cancelled = await place();
  await placement(cancelled, "placed");
  await must("POST", `/v1/orders/${cancelled}/cancel`, { reason: "customer asked to cancel", user: "Customer" }, 202);
  await status(cancelled, "CANCELLED");

  // The provider refuses a place: a failed command.
  await fault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 400, body: { message: "Failure", errors: { store_code: ["unknown store BLR-HEBBAL"] } } });
  const refused = await place("BLR-HEBBAL");
  await placement(refused, "failed");

  // The provider creates one but its answer is lost: an unconfirmed placement.
  await fault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "timeout_after" });
  const unconfirmed = await place();
  await placement(unconfirmed, "unconfirmed");

  // Two more delivered, a quick ride each.
  for (const rider of [7760, 7761]) {
    const coid = await place();
    await placement(coid, "placed");
    await step(coid, "allot", { rider_id: rider });
    await step(coid, "collect", { status: "COLLECTED", pickup_lat: 12.9352, pickup_lng: 77.6245 });
    await ride(coid, [12.9352, 77.6245], [12.9116, 77.6474], 3);
    await step(coid, "deliver", { status: "DELIVERED", delivery_latitude: 12.9116, delivery_longitude: 77.6474, is_partial_delivery: false });
    await status(coid, "DELIVERED");
  }

  // A callback tracklane could not use: rejected, kept for a look.
  const rejected = await fetch(`${o.base}/callbacks/${o.callbackSecret}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ event: "status_update", status: "ALLOTTED", rider_id: 7731 }) });
  if (rejected.status >= 500) throw new Error(`rejected callback: HTTP ${rejected.status}`);

  // Notification endpoints: one that takes the messages, one that is down.
  await must("POST", "/v1/notifications/endpoints", { url: `${o.receiverUrl}/ok/orders`, description: "The shop's order service" }, 201);
  await must("POST", "/v1/notifications/endpoints", { url: `${o.receiverUrl}/broken/hook`, events: ["order.status_changed"], description: "Customer SMS gateway (down)" }, 201);
  // Something for them to carry.
  await step(onTheWay, "doorstep-arrival", { time_arrival: new Date().toISOString(), arrival_lat: 12.9719, arrival_lng: 77.6412, arrival_accuracy: 10 });
  await status(onTheWay, "CUSTOMER_DOOR_STEP");
  await sleep(2500);
  return { delivered, unconfirmed };
}

async function shoot(base: string, apiToken: string, ids: DemoIds): Promise<number> {
  mkdirSync(outDir, { recursive: true });
  const browser = await launchBrowser();
  const missing: string[] = [];
  try {
    const idOf = async (page: Page, coid: string) => {
      await page.goto(`${base}/orders?q=${encodeURIComponent(coid)}`);
      const id = /^\/orders\/(\d+)$/.exec(new URL(page.url()).pathname)?.[1];
      if (!id) throw new Error(`order ${coid} not found in the console`);
      return id;
    };
    for (const width of WIDTHS) {
      const viewport = { width, height: width < 600 ? 844 : 900 };
      const signedOut = await (await browser.newContext({ viewport })).newPage();
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      await signIn(page, base, apiToken, "/orders");
      const pages: [string, string][] = [
        ["signin", "/sign-in"],
        ["attention", "/"],
        ["orders", "/orders"],
        ["order", `/orders/${await idOf(page, ids.delivered)}`],
        ["order-unconfirmed", `/orders/${await idOf(page, ids.unconfirmed)}`],
        ["awb", "/awb"],
        ["notifications", "/notifications"],
        ["system", "/system"],
      ];
      for (const [name, path] of pages) {
        const p = name === "signin" ? signedOut : page;
        const res = await p.goto(`${base}${path}`, { waitUntil: "load" });
        if (res?.status() !== 200) {
          missing.push(`${path} (HTTP ${res?.status()})`);
          continue;
        }
        const file = join(outDir, `${name}-${width}.png`);
        await p.screenshot({ path: file, fullPage: true });
        say(`screenshots: ${relative(root, file)}`);
      }
      await context.close();
      await signedOut.context().close();
    }
  } finally {
    await browser.close();
  }
  if (missing.length > 0) {
    console.error(`screenshots: these pages did not answer 200, so they have no screenshot: ${[...new Set(missing)].join(", ")}`);
    return 1;
  }
  return 0;
}

commandLine(`usage: npm run screenshots
  Draws every console page at 390 and 1280 px wide into docs/screenshots/, from demo data on
  a scratch database (on DATABASE_URL's server, or TEST_DATABASE_URL's, or an embedded one),
  dropped afterwards. Needs Chromium (CHROMIUM_PATH). It takes no arguments.`);
main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error("screenshots:", err);
    process.exit(1);
  },
);
