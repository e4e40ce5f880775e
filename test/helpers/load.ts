/**
 * Callback load for reliability tests: a deterministic plan of provider callbacks (many
 * orders, status and rider-location bodies, duplicates) with the state each order must
 * end in, a sender that behaves like the provider (bounded rate and time, every callback
 * retried until it gets a 200), and the checks that tie what was acknowledged to what is
 * stored and what is projected.
 */
import assert from "node:assert/strict";
import type { Sql } from "postgres";
import { isJsonObject } from "../../src/domain/normalise.ts";
import { fold } from "../../src/domain/projection.ts";
import { toStored } from "../../src/projection/project.ts";
import { assertOrdersEqualLog, projectedColumns } from "./oracle.ts";

export type CallbackBody = Record<string, unknown>;

export interface PlannedCallback {
  /** "" for `/callbacks/{secret}` (kind from the body), "/location" for the location route. */
  path: "" | "/location";
  body: CallbackBody;
}

/** What an order's row must say once every callback is in and projected. */
export interface ExpectedOrder {
  clientOrderId: string;
  svcOrderId: string;
  status: string;
  providerStatus: string;
  eventCount: number;
  latitude: number;
  longitude: number;
}

export interface LoadPlan {
  /** Shuffled, duplicates included. */
  callbacks: PlannedCallback[];
  /** Distinct events (what order_events must hold at the end). */
  unique: number;
  orders: Map<string, ExpectedOrder>;
}

/** A small deterministic PRNG (LCG): the same seed gives the same plan and order. */
export function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
}

export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  const rand = random(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const LIFECYCLE = [
  ["ALLOTTED", "allot_time", 1],
  ["ARRIVED", "arrival_time", 2],
  ["DISPATCHED", "dispatch_time", 3],
  ["ARRIVED_CUSTOMER_DOORSTEP", "customer_doorstep_arrival_time", 4],
  ["DELIVERED", "delivery_time", 5],
] as const;

const CANONICAL: Record<string, string> = {
  CREATED: "CREATED",
  ALLOTTED: "ALLOTTED",
  ARRIVED: "ARRIVED",
  DISPATCHED: "COLLECTED",
  ARRIVED_CUSTOMER_DOORSTEP: "CUSTOMER_DOOR_STEP",
  DELIVERED: "DELIVERED",
  CANCELLED: "CANCELLED",
  RTS_INITIATED: "RETURNED_TO_SELLER",
};

const at = (minute: number, second = 0) => `2026-11-22T10:${String(minute).padStart(2, "0")}:${String(second).padStart(2, "0")}Z`;

/** The same object with its keys in reverse order: the same event to tracklane (canonical JSON). */
function reordered(body: CallbackBody): CallbackBody {
  return Object.fromEntries(Object.entries(body).reverse());
}

/**
 * Per order: CREATED, a prefix of the lifecycle (1-5 steps, rider details from the first),
 * sometimes a cancellation or a return after it, sometimes an unknown status string (kept
 * in the timeline, never changing the status), and three rider locations, which for odd
 * orders carry only the provider's id (the projection links them through the status
 * events). Every body carries its event time, so the final state does not depend on when
 * anything arrived. `duplicateRate` of the bodies are sent a second time, keys reordered.
 */
export function planCallbacks(options: { prefix: string; orders: number; svcBase: number; duplicateRate: number; seed: number }): LoadPlan {
  const distinct: PlannedCallback[] = [];
  const orders = new Map<string, ExpectedOrder>();
  for (let o = 0; o < options.orders; o++) {
    const coid = `${options.prefix}-${o}`;
    const svc = options.svcBase + o;
    const ids = { sfx_order_id: svc, client_order_id: coid };
    const rider = { rider_id: `R${o}`, rider_name: `Rider ${o}`, rider_contact: `98${String(o).padStart(8, "0")}` };
    const statuses: { status: string; rank: number; time: string; terminal: boolean }[] = [];
    const push = (body: CallbackBody, path: PlannedCallback["path"] = "") => distinct.push({ path, body });

    push({ ...ids, order_status: "CREATED", event_time: at(0) });
    statuses.push({ status: "CREATED", rank: 0, time: at(0), terminal: false });
    const steps = 1 + (o % 5);
    for (let s = 0; s < steps; s++) {
      const [status, field, rank] = LIFECYCLE[s]!;
      push({ ...ids, order_status: status, [field]: at(10 + s), ...rider, track_url: `https://track.example/${svc}` });
      statuses.push({ status, rank, time: at(10 + s), terminal: rank === 5 });
    }
    if (o % 6 === 2) {
      push({ ...ids, order_status: "CANCELLED", cancel_time: at(30), cancel_reason: "customer unreachable" });
      statuses.push({ status: "CANCELLED", rank: 5, time: at(30), terminal: true });
    } else if (o % 6 === 4) {
      push({ ...ids, order_status: "RTS_INITIATED", return_time: at(31) });
      statuses.push({ status: "RTS_INITIATED", rank: 5, time: at(31), terminal: true });
    }
    if (o % 4 === 1) push({ ...ids, order_status: "RIDER_REASSIGNED", event_time: at(45) });
    const locationIds = o % 2 === 1 ? { sfx_order_id: svc } : ids;
    let latitude = 0;
    let longitude = 0;
    for (let k = 0; k < 3; k++) {
      latitude = Number((12.9 + o / 1000 + k / 10_000).toFixed(6));
      longitude = Number((77.5 + o / 1000 + k / 10_000).toFixed(6));
      push({ ...locationIds, rider_latitude: latitude, rider_longitude: longitude, timestamp: at(11 + k, 30) }, k === 0 ? "/location" : "");
    }
    // Rank-maximal; among terminal statuses the first reached; otherwise the latest.
    const terminal = statuses.filter((s) => s.terminal).sort((a, b) => a.time.localeCompare(b.time))[0];
    const winner = terminal ?? statuses.reduce((best, s) => (s.rank > best.rank || (s.rank === best.rank && s.time > best.time) ? s : best));
    const eventCount = 1 + steps + (o % 6 === 2 || o % 6 === 4 ? 1 : 0) + (o % 4 === 1 ? 1 : 0) + 3;
    orders.set(coid, { clientOrderId: coid, svcOrderId: String(svc), status: CANONICAL[winner.status]!, providerStatus: winner.status, eventCount, latitude, longitude });
  }
  const rand = random(options.seed);
  const duplicates = distinct.filter(() => rand() < options.duplicateRate).map((c) => ({ path: c.path, body: reordered(c.body) }));
  return { callbacks: shuffled([...distinct, ...duplicates], options.seed + 1), unique: distinct.length, orders };
}

export interface LoadOptions {
  /** Base URLs of the web processes; read on every attempt, spread round-robin. */
  targets: () => readonly string[];
  secret: string;
  /** Concurrent senders. */
  concurrency: number;
  /** Attempts per second across all senders (retries included). */
  ratePerSecond: number;
  /** The load gives up after this long, acknowledged or not. */
  deadlineMs: number;
  /** More callbacks will come (add()); the load ends only after end() once all are acknowledged. */
  open?: boolean;
  /** Wait before retrying a callback that got no 200. */
  retryDelayMs?: number;
  requestTimeoutMs?: number;
}

export interface Acked {
  eventId: string;
  duplicate: boolean;
  callback: PlannedCallback;
  target: string;
  /** Date.now() when the 200 arrived. */
  at: number;
}

export interface LoadStats {
  attempts: number;
  /** 200s (first copies and duplicates). */
  ok: number;
  duplicates: number;
  /** 503s: the sender retries them, as the provider does. */
  unavailable: number;
  /** The longest a 503 took to come back (ms). */
  slowest503Ms: number;
  /** Refused, reset or timed-out connections (a process killed or not yet up). */
  connectionErrors: number;
  /** Anything else: never expected. */
  unexpected: { status: number; body: string }[];
  /** 200s by target. */
  okByTarget: Map<string, number>;
}

export interface RunningLoad {
  stats: LoadStats;
  acked: Acked[];
  /** Callbacks not acknowledged yet (queued or in flight). */
  remaining(): number;
  /** Resolves when every callback is acknowledged, the deadline passes or stop() is called. */
  done: Promise<void>;
  stop(): void;
  /** Open loads: queues more callbacks. */
  add(callbacks: readonly PlannedCallback[]): void;
  /** Open loads: no more callbacks will be added. */
  end(): void;
  /** Resolves once `n` more 200s have arrived than when it was called. */
  okGrowsBy(n: number, ms?: number): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends the callbacks like the provider does: each one again and again until it gets a 200. */
export function startLoad(callbacks: readonly PlannedCallback[], options: LoadOptions): RunningLoad {
  const queue = [...callbacks];
  const stats: LoadStats = { attempts: 0, ok: 0, duplicates: 0, unavailable: 0, slowest503Ms: 0, connectionErrors: 0, unexpected: [], okByTarget: new Map() };
  const acked: Acked[] = [];
  const deadline = Date.now() + options.deadlineMs;
  const retryDelay = options.retryDelayMs ?? 50;
  const timeout = options.requestTimeoutMs ?? 10_000;
  let holding = 0;
  let stopped = false;
  let open = options.open ?? false;
  let nextSlot = Date.now();
  let turn = 0;
  const waiters = new Set<() => void>();

  const pace = async () => {
    const now = Date.now();
    const slot = Math.max(now, nextSlot);
    nextSlot = slot + 1000 / options.ratePerSecond;
    if (slot > now) await sleep(slot - now);
  };

  const attempt = async (c: PlannedCallback): Promise<boolean> => {
    const targets = options.targets();
    const target = targets[turn++ % targets.length]!;
    stats.attempts++;
    const sentAt = Date.now();
    let res: Response;
    try {
      res = await fetch(`${target}/callbacks/${options.secret}${c.path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(c.body),
        signal: AbortSignal.timeout(timeout),
      });
    } catch {
      stats.connectionErrors++;
      return false;
    }
    const text = await res.text().catch(() => null);
    if (text === null) {
      stats.connectionErrors++; // the answer was cut off: as good as no answer
      return false;
    }
    if (res.status === 503) {
      stats.unavailable++;
      stats.slowest503Ms = Math.max(stats.slowest503Ms, Date.now() - sentAt);
      return false;
    }
    if (res.status !== 200) {
      stats.unexpected.push({ status: res.status, body: text.slice(0, 500) });
      return false;
    }
    const answer = JSON.parse(text) as { event_id: string; duplicate: boolean };
    stats.ok++;
    if (answer.duplicate) stats.duplicates++;
    stats.okByTarget.set(target, (stats.okByTarget.get(target) ?? 0) + 1);
    acked.push({ eventId: answer.event_id, duplicate: answer.duplicate, callback: c, target, at: Date.now() });
    waiters.forEach((w) => w());
    return true;
  };

  const sender = async () => {
    while (!stopped && Date.now() < deadline) {
      const c = queue.shift();
      if (c === undefined) {
        if (holding === 0 && !open) return;
        await sleep(10); // another sender may put a failed one back, or more may be added
        continue;
      }
      holding++;
      try {
        await pace();
        if (!(await attempt(c))) {
          await sleep(retryDelay * (0.5 + Math.random()));
          queue.push(c);
        }
      } finally {
        holding--;
      }
    }
  };

  const done = Promise.all(Array.from({ length: options.concurrency }, sender)).then(() => {
    waiters.forEach((w) => w());
  });
  return {
    stats,
    acked,
    remaining: () => queue.length + holding,
    done,
    stop: () => void (stopped = true),
    add: (more) => void queue.push(...more),
    end: () => void (open = false),
    okGrowsBy(n, ms = 20_000) {
      const target = stats.ok + n;
      return new Promise((resolve, reject) => {
        const check = () => {
          if (stats.ok >= target) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`fewer than ${n} acknowledgements in ${ms} ms (${JSON.stringify({ ...stats, okByTarget: undefined })})`));
        }, ms);
        waiters.add(check);
        check();
      });
    },
  };
}

/** Polls `fn` until it returns true; throws after `ms`. */
export async function waitUntil(what: string, fn: () => Promise<boolean>, ms: number, every = 50): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await fn().catch(() => false)) return;
    await sleep(every);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/** /readyz answers 200 (the process is up and its database reachable). */
export async function waitReady(baseUrl: string, ms = 30_000): Promise<void> {
  await waitUntil(`${baseUrl}/readyz`, async () => (await fetch(`${baseUrl}/readyz`)).status === 200, ms, 100);
}

/**
 * Projection work still to do: queued events (a drain's uncommitted take still counts)
 * and order__project jobs of orders whose projection failed in a batch.
 */
export async function projectionsLeft(sql: Sql): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select (select count(*) from projection_queue)::int
         + (select count(*) from graphile_worker.jobs where task_identifier = 'order__project' and attempts < max_attempts)::int as n`;
  return row!.n;
}

/** Waits until no projection work is left; on timeout says what is left. */
export async function waitProjectionsDrained(sql: Sql, ms: number, context: () => string = () => ""): Promise<void> {
  try {
    await waitUntil("every queued event projected", async () => (await projectionsLeft(sql)) === 0, ms, 100);
  } catch (err) {
    const [queue] = await sql`select count(*)::int as rows, min(enqueued_at) as oldest from projection_queue`;
    const jobs = await sql`
      select task_identifier, count(*)::int as jobs, count(locked_by)::int as locked, min(last_error) as an_error
      from graphile_worker.jobs where task_identifier in ('projection__drain', 'order__project') group by 1`;
    throw new Error(`${(err as Error).message}: queue ${JSON.stringify(queue)}, jobs ${JSON.stringify(jobs)}\n${context()}`, { cause: err });
  }
}

export interface EventRow {
  id: number;
  dedupe_key: string;
  kind: string;
  svc_order_id: string | null;
  client_order_id: string | null;
  provider_status: string | null;
  occurred_at: Date;
  received_at: Date;
  payload: unknown;
}

export async function readEvents(sql: Sql): Promise<EventRow[]> {
  return await sql<EventRow[]>`
    select id, dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload
    from order_events order by id`;
}

/**
 * Every acknowledged event is stored under the id its 200 named, with the content that
 * was sent, and nothing else is stored. Answers the counts (equal when it returns).
 */
export async function assertAcknowledgedStored(sql: Sql, acked: readonly Acked[], unique: number): Promise<{ acknowledged: number; stored: number }> {
  const rows = await readEvents(sql);
  const byId = new Map(rows.map((r) => [String(r.id), r]));
  const ackedIds = new Map<string, CallbackBody>();
  const problems: string[] = [];
  for (const a of acked) {
    const row = byId.get(a.eventId);
    if (!row) problems.push(`event ${a.eventId} acknowledged but not stored`);
    else if (!isDeepEqual(row.payload, a.callback.body)) problems.push(`event ${a.eventId} stored with other content: ${JSON.stringify(row.payload)} vs ${JSON.stringify(a.callback.body)}`);
    ackedIds.set(a.eventId, a.callback.body);
  }
  for (const r of rows) if (!ackedIds.has(String(r.id))) problems.push(`event ${r.id} stored but never acknowledged`);
  assert.deepEqual(problems.slice(0, 20), [], `${problems.length} problems`);
  assert.equal(ackedIds.size, unique, "every distinct callback acknowledged once as itself");
  assert.equal(rows.length, unique, "order_events holds each distinct callback exactly once");
  return { acknowledged: ackedIds.size, stored: rows.length };
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepStrictEqual(a, b);
    return true;
  } catch {
    return false;
  }
}

export interface OrderRow {
  client_order_id: string | null;
  svc_order_id: string | null;
  status: string | null;
  provider_status: string | null;
  status_at: Date | null;
  track_url: string | null;
  rider_id: string | null;
  rider_name: string | null;
  rider_contact: string | null;
  rider_latitude: number | null;
  rider_longitude: number | null;
  rider_location_at: Date | null;
  event_count: number;
  last_event_at: Date | null;
  placement_state: string;
}

/** Order rows without ids and wall-clock timestamps, sorted: comparable across databases. */
export async function readOrders(sql: Sql): Promise<OrderRow[]> {
  return await sql<OrderRow[]>`
    select client_order_id, svc_order_id, status, provider_status, status_at, track_url, rider_id, rider_name,
           rider_contact, rider_latitude, rider_longitude, rider_location_at, event_count, last_event_at, placement_state
    from orders order by client_order_id, svc_order_id`;
}

/**
 * Every order row equals fold() over the events read back from the log (its stored state
 * too), and the state the plan says it must reach; one row per planned order.
 */
export async function assertProjected(sql: Sql, plan: LoadPlan): Promise<number> {
  const events = (await readEvents(sql)).map((r) => toStored(r, isJsonObject(r.payload) ? r.payload : {}));
  const orders = await readOrders(sql);
  const problems: string[] = [];
  for (const row of orders) {
    const mine = events.filter((e) => (row.svc_order_id !== null && e.svcOrderId === row.svc_order_id) || (row.client_order_id !== null && e.clientOrderId === row.client_order_id));
    const p = fold(mine);
    const fromFold = { client_order_id: p.clientOrderId, svc_order_id: p.svcOrderId, ...projectedColumns(p), placement_state: "external" };
    if (!isDeepEqual(row, fromFold)) problems.push(`order ${row.client_order_id}/${row.svc_order_id}: row ${JSON.stringify(row)} but fold gives ${JSON.stringify(fromFold)}`);
    const want = row.client_order_id === null ? undefined : plan.orders.get(row.client_order_id);
    if (!want) {
      problems.push(`unexpected order row ${JSON.stringify(row)}`);
      continue;
    }
    const got = { svc: row.svc_order_id, status: row.status, providerStatus: row.provider_status, events: row.event_count, lat: row.rider_latitude, lng: row.rider_longitude };
    const expected = { svc: want.svcOrderId, status: want.status, providerStatus: want.providerStatus, events: want.eventCount, lat: want.latitude, lng: want.longitude };
    if (!isDeepEqual(got, expected)) problems.push(`order ${want.clientOrderId}: ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
  }
  assert.deepEqual(problems.slice(0, 10), [], `${problems.length} orders wrong`);
  assert.equal(orders.length, plan.orders.size, "one row per order");
  // And each row's stored fold state is exactly the fold of the log.
  assert.equal(await assertOrdersEqualLog(sql), orders.length);
  return orders.length;
}
