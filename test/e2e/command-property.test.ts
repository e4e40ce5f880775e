/**
 * A seeded, model-based random test of provider commands, end to end: a real worker
 * process (stopped, killed and started again at random), tracklane's API and callback
 * receiver on real sockets, real PostgreSQL, and the project's provider emulator over
 * loopback HTTP, in its strict and its realistic mode. Each run draws a random interleaving
 * of: places (retried with the same body, sent twice at once), edits, cancels, one-shot
 * provider faults on the place/edit/cancel paths (5xx before or after acting, timeouts,
 * connection resets, malformed answers), callbacks dropped/duplicated/held back, the
 * rider's progress at the provider (sandbox), the worker killed while a place is at the
 * provider, reconciliation runs, and a person settling unconfirmed placements the way the
 * docs tell them to (confirm the order found at the provider, else retry).
 *
 * Then, against the emulator's own state (the truth about money):
 * - the provider holds at most one order per client order;
 * - no command is left pending: each is succeeded or failed, and a place whose outcome is
 *   unknown leaves its order `unconfirmed` (person-visible) until settled;
 * - an order the provider holds is `placed` with that provider id; one it does not hold is
 *   never `placed`;
 * - a cancel that succeeded left the provider's order cancelled;
 * - each order's projected status is the provider's (after a reconciliation run repairs
 *   callbacks that were lost).
 *
 * In the suite: one fixed seed per mode. Many seeds locally:
 *   MONEYPROP_SEEDS=1-40 MONEYPROP_OPS=40 TEST_DATABASE_URL=… node test/run.ts test/e2e/command-property.test.ts
 * (`MONEYPROP_SEEDS` is a range `a-b` or a list `3,17`; MONEYPROP_MODES=strict or realistic
 * runs one mode; MONEYPROP_VERBOSE=1 prints each run's operations.) A failure names the
 * seed and the operations drawn so far.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { canonicalStatus } from "../../src/domain/statuses.ts";
import type { Command, Order } from "../helpers/api.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";
import { waitUntil } from "../helpers/load.ts";
import { cleanupsAfterAll, startService } from "../helpers/process.ts";
import type { Proc } from "../helpers/process.ts";

const cleanups = cleanupsAfterAll();

const PLACE_PATH = "/api/v2/stores/orders/";
const EDIT_PATH = "/api/v1/stores/edit-order/";
/** The worker's provider timeout; the emulator's hangs end after HANG_MS. */
const PROVIDER_TIMEOUT_MS = 700;
const HANG_MS = 1500;
const KILL_DELAY_MS = 600;

function seedsFromEnv(): number[] {
  const spec = process.env.MONEYPROP_SEEDS;
  if (spec === undefined || spec === "") return [1];
  const range = /^(\d+)-(\d+)$/.exec(spec);
  if (range) {
    const out: number[] = [];
    for (let s = Number(range[1]); s <= Number(range[2]); s++) out.push(s);
    return out;
  }
  return spec.split(",").map((s) => Number(s.trim()));
}
const SEEDS = seedsFromEnv();
const OPS = Number(process.env.MONEYPROP_OPS ?? "35");
const MODES = (process.env.MONEYPROP_MODES ?? "strict,realistic").split(",") as ("strict" | "realistic")[];

/** mulberry32 */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick<T>(items: readonly T[]): T {
      return items[Math.floor(next() * items.length)]!;
    },
    chance: (p: number) => next() < p,
  };
}
type Rng = ReturnType<typeof rng>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

interface World {
  seed: number;
  mode: "strict" | "realistic";
  pair: EmulatorPair;
  t: TestApp;
  workerEnv: Record<string, string>;
  worker: Proc;
  bodies: Map<string, ReturnType<typeof placeOrderBody>>;
  log: string[];
}

function startWorker(w: Pick<World, "workerEnv">): Proc {
  return startService(cleanups, "worker", w.workerEnv);
}

async function restartWorker(w: World, signal: NodeJS.Signals): Promise<void> {
  await w.worker.kill(signal);
  w.worker = startWorker(w);
  await w.worker.waitFor(/worker running/, 30_000);
}

/** The API answered without a server error: a 5xx is a defect whatever the state. */
async function api(w: World, path: string, init: RequestInit & { json?: unknown } = {}): Promise<Response> {
  const res = await w.t.request(path, init);
  assert.ok(res.status < 500, `${init.method ?? "GET"} ${path}: ${res.status} ${await res.clone().text()}`);
  return res;
}

const orderOf = async (w: World, coid: string) => json<Order>(await api(w, `/v1/orders/${encodeURIComponent(coid)}`));
const providerOrders = async (w: World, coid: string) => w.pair.control.orders(coid);

async function allCommands(w: World): Promise<Command[]> {
  const items: Command[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor === null ? "" : `&cursor=${encodeURIComponent(cursor)}`;
    const page: { items: Command[]; next_cursor: string | null } = await json(await api(w, `/v1/commands?limit=500${q}`));
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor !== null);
  return items;
}

const FAULTS: readonly Record<string, unknown>[] = [
  { action: "status", status: 503 },
  { action: "status", status: 429 },
  { action: "status", status: 500 },
  { action: "status", status: 500, process: true },
  { action: "status", status: 502, process: true },
  { action: "status", status: 504 },
  { action: "timeout_before" },
  { action: "timeout_after" },
  { action: "close_before" },
  { action: "close_after" },
  { action: "malformed", process: true },
  { action: "status", status: 400, body: { message: "Failure", errors: { store_code: ["refused for the test"] } } },
  // A 2xx that names no order: a refusal when it says so, ambiguous when it says it acted.
  { action: "status", status: 200, body: { message: "Failure", errors: { store_code: ["refused for the test"] } } },
  { action: "status", status: 200, body: { message: "Success" }, process: true },
  { action: "status", status: 202, body: {}, process: true },
  { action: "status", status: 303, body: "", headers: { location: "/elsewhere/" }, process: true },
];

type Op = (w: World, r: Rng) => Promise<string>;

/** Every edit asks for a value of its own, so the provider's value names the edit that set it. */
const nextValue = (w: World) => 1000 + w.log.length * 10 + (w.bodies.size % 10);

const coids = (w: World) => [...w.bodies.keys()];

const ops: { weight: number; name: string; run: Op }[] = [
  {
    weight: 6,
    name: "place",
    async run(w, r) {
      const body = placeOrderBody({ clientOrderId: `MP-${w.mode[0]}${w.seed}-${w.bodies.size}-${r.int(1e6)}` });
      w.bodies.set(body.order_details.client_order_id, body);
      const copies = r.chance(0.3) ? 2 : 1;
      const answers = await Promise.all(Array.from({ length: copies }, () => api(w, "/v1/orders", { method: "POST", json: body })));
      for (const a of answers) assert.ok(a.status === 202 || a.status === 200, `place: ${a.status} ${await a.clone().text()}`);
      return `place ${body.order_details.client_order_id} x${copies}`;
    },
  },
  {
    weight: 2,
    name: "place again",
    async run(w, r) {
      if (w.bodies.size === 0) return "place again: none";
      const coid = r.pick(coids(w));
      const res = await api(w, "/v1/orders", { method: "POST", json: w.bodies.get(coid) });
      assert.ok(res.status === 200 || res.status === 202, `place again: ${res.status} ${await res.clone().text()}`);
      return `place again ${coid} -> ${res.status}`;
    },
  },
  {
    weight: 3,
    name: "edit",
    async run(w, r) {
      if (w.bodies.size === 0) return "edit: none";
      const coid = r.pick(coids(w));
      const res = await api(w, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: nextValue(w) } } });
      return `edit ${coid} -> ${res.status}`;
    },
  },
  {
    weight: 2,
    name: "cancel",
    async run(w, r) {
      if (w.bodies.size === 0) return "cancel: none";
      const coid = r.pick(coids(w));
      const res = await api(w, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "property test", user: "Seller" } });
      return `cancel ${coid} -> ${res.status}`;
    },
  },
  {
    weight: 5,
    name: "fault",
    async run(w, r) {
      const path = r.pick([PLACE_PATH, PLACE_PATH, EDIT_PATH, "/cancel/"]);
      const fault = r.pick(FAULTS);
      await w.pair.control.addFault({ ...fault, path, times: 1 + r.int(2) });
      return `fault ${path} ${JSON.stringify(fault)}`;
    },
  },
  {
    weight: 2,
    name: "callback fault",
    async run(w, r) {
      const action = r.pick(["drop", "duplicate", "reorder"] as const);
      await w.pair.control.addFault({ action, kind: "status", times: 1 + r.int(3) });
      return `callback ${action}`;
    },
  },
  {
    weight: 4,
    name: "rider",
    async run(w, r) {
      const held = [...w.pair.emulator.state.orders.values()].filter((o) => w.bodies.has(o.clientOrderId));
      if (held.length === 0) return "rider: none";
      const o = r.pick(held);
      const step = r.pick(["allot", "collect", "deliver", "customer-return"] as const);
      const c = w.pair.client;
      const call =
        step === "allot" ? c.allot(o.svcOrderId, { rider_id: 1 + r.int(50) })
        : step === "collect" ? c.collect(o.svcOrderId, { status: "COLLECTED" })
        : step === "deliver" ? c.deliver(o.svcOrderId, { status: "DELIVERED" })
        : c.customerReturn(o.svcOrderId);
      // Sandbox calls go through the same fault rules as tracklane's: one may be refused.
      const ok = await call.then(() => "ok", (err: unknown) => `refused (${(err as Error).message.slice(0, 60)})`);
      return `rider ${step} ${o.clientOrderId}/${o.svcOrderId}: ${ok}`;
    },
  },
  {
    weight: 1,
    name: "flush",
    async run(w) {
      return `flush held callbacks: ${w.pair.emulator.callbacks.releaseHeld()}`;
    },
  },
  {
    weight: 2,
    name: "late callback",
    async run(w, r) {
      // One the provider sent earlier (or dropped) arrives again, late: after later ones.
      const sent = w.pair.emulator.callbacks.deliveries().filter((d) => d.kind === "status");
      if (sent.length === 0) return "late callback: none";
      const d = r.pick(sent);
      const res = await w.t.callback(d.payload);
      assert.equal(res.status, 200, await res.clone().text());
      return `late callback #${d.id} ${JSON.stringify(d.payload).slice(0, 80)}`;
    },
  },
  {
    weight: 2,
    name: "restart",
    async run(w, r) {
      const signal = r.pick(["SIGTERM", "SIGKILL"] as const);
      await restartWorker(w, signal);
      return `worker restarted (${signal})`;
    },
  },
  {
    weight: 2,
    name: "kill mid-place",
    async run(w, r) {
      // The place is at the provider (delayed there) when the worker dies: the provider acts
      // after, and no answer reaches anyone.
      const rule = await w.pair.control.addFault({ action: "delay", delay_ms: KILL_DELAY_MS, path: PLACE_PATH, times: 1 });
      const body = placeOrderBody({ clientOrderId: `MP-${w.mode[0]}${w.seed}-${w.bodies.size}-k${r.int(1e6)}` });
      w.bodies.set(body.order_details.client_order_id, body);
      assert.equal((await api(w, "/v1/orders", { method: "POST", json: body })).status, 202);
      const applied = async () => ((await w.pair.control.get<{ rules: { id: number; applied: number }[] }>("/faults")).body.rules.find((x) => x.id === rule["id"])?.applied ?? 0) > 0;
      let reached = true;
      await waitUntil("the place at the provider", applied, 5000, 10).catch(() => (reached = false));
      await restartWorker(w, "SIGKILL");
      await sleep(KILL_DELAY_MS);
      return `kill mid-place ${body.order_details.client_order_id} (reached: ${reached})`;
    },
  },
  {
    weight: 1,
    name: "kill mid-command",
    async run(w, r) {
      // An edit or cancel at the provider (delayed there) when the worker dies.
      if (w.bodies.size === 0) return "kill mid-command: none";
      const coid = r.pick(coids(w));
      const cancel = r.chance(0.4);
      const rule = await w.pair.control.addFault({ action: "delay", delay_ms: KILL_DELAY_MS, path: cancel ? "/cancel/" : EDIT_PATH, times: 1 });
      const res = cancel
        ? await api(w, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "property test", user: "Seller" } })
        : await api(w, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: nextValue(w) } } });
      const applied = async () => ((await w.pair.control.get<{ rules: { id: number; applied: number }[] }>("/faults")).body.rules.find((x) => x.id === rule["id"])?.applied ?? 0) > 0;
      let reached = res.status === 202;
      if (reached) await waitUntil("the command at the provider", applied, 3000, 10).catch(() => (reached = false));
      await restartWorker(w, "SIGKILL");
      await sleep(KILL_DELAY_MS);
      return `kill mid-${cancel ? "cancel" : "edit"} ${coid} -> ${res.status} (reached: ${reached})`;
    },
  },
  {
    weight: 1,
    name: "status fault",
    async run(w, r) {
      const fault = r.pick(FAULTS.slice(0, 10));
      await w.pair.control.addFault({ ...fault, path: "/status/", times: 1 + r.int(3) });
      return `status fault ${JSON.stringify(fault)}`;
    },
  },
  {
    weight: 2,
    name: "reconcile",
    async run(w) {
      await w.t.database.sql`
        select graphile_worker.add_job('order__reconcile', '{}'::json, queue_name := 'reconcile', job_key := 'order_reconcile', max_attempts := 1)`;
      return "reconcile queued";
    },
  },
  {
    weight: 2,
    name: "person",
    async run(w, r) {
      // Sometimes two people at once (the console open twice).
      const people = r.chance(0.3) ? 2 : 1;
      const did = await Promise.all(Array.from({ length: people }, () => settleUnconfirmed(w)));
      return `person x${people}: ${did.flat().join(", ") || "nothing unconfirmed"}`;
    },
  },
  {
    weight: 3,
    name: "pause",
    async run(_w, r) {
      const ms = 50 + r.int(400);
      await sleep(ms);
      return `pause ${ms}`;
    },
  },
];

/**
 * What the docs tell a person to do with an unconfirmed placement: look the order up at
 * the provider; adopt it when it is there (confirm), else send it again (retry).
 */
async function settleUnconfirmed(w: World): Promise<string[]> {
  const page = await json<{ items: Order[] }>(await api(w, "/v1/orders?placement=unconfirmed&limit=500"));
  const done: string[] = [];
  for (const o of page.items) {
    const coid = o.client_order_id!;
    const held = await providerOrders(w, coid);
    if (held.length > 0) {
      const res = await api(w, `/v1/orders/${coid}/placement/confirm`, { method: "POST", json: { svc_order_id: String(held[0]!["svc_order_id"]) } });
      done.push(`confirm ${coid} -> ${res.status}`);
    } else {
      const res = await api(w, `/v1/orders/${coid}/placement/retry`, { method: "POST" });
      done.push(`retry ${coid} -> ${res.status}`);
    }
  }
  return done;
}

async function pendingCommands(w: World): Promise<number> {
  const [row] = await w.t.database.sql<{ n: number }[]>`select count(*)::int as n from commands where state = 'pending'`;
  return row!.n;
}

/** Faults off, callbacks released, every command ended, placements settled by a person, and a reconciliation. */
async function quiesce(w: World): Promise<void> {
  await w.pair.control.send("DELETE", "/faults");
  w.pair.emulator.callbacks.releaseHeld();
  await w.pair.emulator.callbacks.idle();
  // A retry's backoff is short (COMMAND_RETRY_BASE_MS), a job of a killed worker is freed
  // within seconds by the next one's sweep.
  await waitUntil("every command ended", async () => (await pendingCommands(w)) === 0, 30_000, 100);
  for (let round = 0; round < 3; round++) {
    const did = await settleUnconfirmed(w);
    w.log.push(`final person: ${did.join(", ") || "nothing"}`);
    if (did.length === 0) break;
    await waitUntil("every command ended after the person", async () => (await pendingCommands(w)) === 0, 30_000, 100);
  }
  await w.pair.emulator.callbacks.idle();
  // Callbacks that were dropped: a reconciliation run asks the provider about every active
  // order. First no job may be held by a killed worker (the next one's sweep frees it), as
  // the cron's last job may be: one allowed a single attempt is not run again.
  const jobsLeft = async (extra: string) => {
    const [row] = await w.t.database.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker.jobs
      where locked_at is not null or (attempts < max_attempts and run_at <= now() + interval '1 second') or (task_identifier = ${extra} and attempts < max_attempts)`;
    return row!.n === 0;
  };
  await waitUntil("no job running or due", () => jobsLeft("-"), 30_000, 100);
  await sleep(200);
  await w.t.database.sql`
    select graphile_worker.add_job('order__reconcile', '{}'::json, queue_name := 'reconcile', job_key := 'order_reconcile', max_attempts := 1)`;
  await waitUntil("the reconciliation and projection done", () => jobsLeft("order__reconcile"), 30_000, 100).catch(async (err: unknown) => {
    const jobs = await w.t.database.sql`select task_identifier, key, attempts, max_attempts, run_at, locked_at, last_error from graphile_worker.jobs`;
    throw new Error(`${(err as Error).message}: ${JSON.stringify(jobs).slice(0, 2000)}`);
  });
  await sleep(300);
}

/** The invariants, against the emulator's state. Answers the problems found. */
async function check(w: World): Promise<string[]> {
  const problems: string[] = [];
  const commands = await allCommands(w);
  for (const c of commands) {
    if (c.state !== "succeeded" && c.state !== "failed") problems.push(`command ${c.id} (${c.kind} of ${c.order?.client_order_id}) is ${c.state} after ${c.attempts} attempts: ${c.last_error}`);
  }
  for (const coid of w.bodies.keys()) {
    const held = await providerOrders(w, coid);
    const o = await orderOf(w, coid);
    const heldIds = held.map((h) => String(h["svc_order_id"]));
    if (held.length > 1) problems.push(`${coid}: the provider holds ${held.length} orders (${heldIds.join(", ")}); tracklane shows ${JSON.stringify(o.svc_order_ids)}`);
    const state = o.placement.state;
    if (state === "pending") problems.push(`${coid}: placement still pending`);
    if (state === "unconfirmed") problems.push(`${coid}: placement unconfirmed after a person settled every one`);
    if (held.length >= 1 && state !== "placed") problems.push(`${coid}: the provider holds ${heldIds.join(", ")} but placement is ${state} (${o.placement.error})`);
    if (held.length >= 1 && !heldIds.includes(String(o.svc_order_id))) problems.push(`${coid}: svc_order_id ${o.svc_order_id} is not the provider's ${heldIds.join(", ")}`);
    if (held.length === 0 && state === "placed") problems.push(`${coid}: placed, but the provider holds no order`);
    if (held.length === 1 && state === "placed") {
      const theirs = canonicalStatus(String(held[0]!["status"]));
      if (o.status !== theirs) {
        const events = (await json<{ items: { status: string | null; provider_status: string | null; payload: Record<string, unknown> }[] }>(await api(w, `/v1/orders/${coid}/events`))).items;
        const seen = events.map((e) => `${e.provider_status ?? e.status}[${String(e.payload["svc_order_id"] ?? e.payload["sfx_order_id"] ?? "")}${e.payload["tracklane"] ? `, ${String(e.payload["tracklane"])}` : ""}]`);
        problems.push(`${coid}: status ${o.status} (${o.provider_status}), the provider's ${String(held[0]!["status"])}; svc ${o.svc_order_id} ${JSON.stringify(o.svc_order_ids)}; events: ${seen.join(" ")}`);
      }
    }
    const mine = commands.filter((c) => c.order?.client_order_id === coid);
    // Commands of an order take effect in the order accepted: when its last edit succeeded,
    // the provider's order carries that edit's value.
    const [lastEdit] = await w.t.database.sql<{ id: number; state: string; request: { order_details?: { order_value?: number } } }[]>`
      select c.id, c.state, c.request from commands c join orders o on o.id = c.order_id
      where o.client_order_id = ${coid} and c.kind = 'edit' order by c.id desc limit 1`;
    if (lastEdit?.state === "succeeded" && held.length === 1) {
      const wanted = lastEdit.request.order_details?.order_value;
      const theirs = (held[0]!["body"] as { order_details: { order_value: unknown } }).order_details.order_value;
      if (wanted !== undefined && Number(theirs) !== wanted) problems.push(`${coid}: last edit ${lastEdit.id} (value ${wanted}) succeeded, the provider's value is ${String(theirs)}`);
    }
    // A command that failed saying nothing of an unknown outcome did not take effect.
    const failedEdits = await w.t.database.sql<{ id: number; last_error: string; request: { order_details?: { order_value?: number } } }[]>`
      select c.id, c.last_error, c.request from commands c join orders o on o.id = c.order_id
      where o.client_order_id = ${coid} and c.kind = 'edit' and c.state = 'failed'`;
    for (const e of failedEdits) {
      const theirs = held.length === 1 ? Number((held[0]!["body"] as { order_details: { order_value: unknown } }).order_details.order_value) : NaN;
      if (theirs === e.request.order_details?.order_value && !/outcome unknown/i.test(e.last_error)) {
        problems.push(`${coid}: edit ${e.id} failed (${e.last_error}) but the provider holds its value ${theirs}`);
      }
    }
    const cancels = mine.filter((c) => c.kind === "cancel");
    if (held.some((h) => canonicalStatus(String(h["status"])) === "CANCELLED") && cancels.length > 0 && !cancels.some((c) => c.state === "succeeded" || /outcome unknown/i.test(c.last_error ?? ""))) {
      problems.push(`${coid}: the provider cancelled the order, but every cancel failed without saying its outcome is unknown: ${cancels.map((c) => `${c.id}: ${c.last_error}`).join("; ")}`);
    }
    for (const c of mine) {
      if (c.kind === "cancel" && c.state === "succeeded" && held.some((h) => !/cancel/i.test(String(h["status"])))) {
        problems.push(`${coid}: cancel ${c.id} succeeded but the provider's order is ${held.map((h) => String(h["status"])).join(", ")}`);
      }
    }
  }
  return problems;
}

async function runSeed(seed: number, mode: "strict" | "realistic"): Promise<void> {
  const local: (() => Promise<void>)[] = [];
  try {
    const pair = await startEmulatorPair({ emulator: { maxHangMs: HANG_MS, seed } });
    local.push(() => pair.close());
    const behaviour = await pair.control.send("PUT", "/behaviour", { realistic: mode === "realistic" });
    assert.equal(behaviour.status, 200);
    const timezone = mode === "realistic" ? "Asia/Kolkata" : "UTC";
    // The strict provider refuses a repeated client_order_id: for it, odd seeds run as told
    // so (PROVIDER_DEDUPES_ORDERS, an ambiguous place is sent again), even ones as not.
    const dedupes = mode === "strict" && seed % 2 === 1;
    const t = await createTestApp({ PROVIDER_TIMEZONE: timezone, PROVIDER_DEDUPES_ORDERS: String(dedupes) }, { provider: pair.client });
    local.push(() => t.close());
    const server = await t.listen();
    local.push(() => server.close());
    pair.emulator.state.callbackUrls = [`${server.url}/callbacks/${CALLBACK_SECRET}`];
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-moneyprop-"));
    local.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const workerEnv = {
      DATABASE_URL: t.testDb.url,
      API_TOKEN,
      CALLBACK_SECRET,
      LOG_LEVEL: "info",
      LOG_FORMAT: "json",
      DATA_DIR: dataDir,
      DB_POOL_MAX: "3",
      WORKER_CONCURRENCY: "3",
      PROVIDER_BASE_URL: pair.url,
      PROVIDER_TOKEN: TEST_TOKEN,
      PROVIDER_PRODUCT: "hyperlocal_dedicated_store",
      PROVIDER_TIMEOUT_MS: String(PROVIDER_TIMEOUT_MS),
      PROVIDER_TIMEZONE: timezone,
      COMMAND_RETRY_BASE_MS: "40",
      COMMAND_MAX_ATTEMPTS: "4",
      RECONCILE_AFTER_MIN: "0.001",
      PROVIDER_DEDUPES_ORDERS: String(dedupes),
    };
    const w: World = { seed, mode, pair, t, workerEnv, worker: startWorker({ workerEnv }), bodies: new Map(), log: [] };
    local.push(async () => void (await w.worker.kill("SIGKILL")));
    await w.worker.waitFor(/worker running/, 30_000);

    const r = rng(seed * 7919 + (mode === "realistic" ? 1 : 0));
    const total = ops.reduce((n, o) => n + o.weight, 0);
    const draw = () => {
      let x = r.int(total);
      for (const o of ops) {
        if ((x -= o.weight) < 0) return o;
      }
      return ops[0]!;
    };
    let problems: string[] = [];
    try {
      for (let i = 0; i < OPS; i++) w.log.push(await draw().run(w, r));
      // What did not settle is reported beside what the checks find.
      const unsettled = await quiesce(w).then(() => [], (err: unknown) => [`did not settle: ${(err as Error).message}`]);
      problems = [...unsettled, ...(await check(w))];
    } catch (err) {
      problems = [`error: ${(err as Error).stack ?? String(err)}`];
    }
    if (process.env.MONEYPROP_VERBOSE) console.log(`seed ${seed} (${mode}):\n${w.log.join("\n")}`);
    if (problems.length > 0) {
      const tail = w.worker.output().split("\n").filter((l) => /"level":(40|50|60)/.test(l)).slice(-15).join("\n");
      assert.fail(`seed ${seed} (${mode}${dedupes ? ", PROVIDER_DEDUPES_ORDERS" : ""}): ${problems.length} problems\n${problems.slice(0, 10).join("\n")}\n--- operations:\n${w.log.join("\n")}\n--- worker warnings:\n${tail}`);
    }
  } finally {
    for (const c of local.reverse()) await c().catch(() => {});
  }
}

// Two runs at once (each its own database, emulator and worker): the suite's two modes in the time of one.
describe("provider commands under random interleavings (model-based, seeded)", { concurrency: 2 }, () => {
  for (const mode of MODES) {
    for (const seed of SEEDS) {
      it(`${mode} emulator, seed ${seed}: one provider order per client order, every command ended or person-visible, statuses match the provider's`, async () => {
        await runSeed(seed, mode);
      });
    }
  }
});
