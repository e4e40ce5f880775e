import type { Sql } from "postgres";
import { eventIdRange, firstEventReceivedSince, identitiesIn, orderKeyCount, orderKeyPage } from "../events/log.ts";
import { maxOrderId, orderIdentityPage, withoutOrder } from "../orders/read.ts";
import { identitiesOfRow, isConflict, projectOrders } from "./project.ts";
import type { OrderIds, ProjectResult } from "./project.ts";

/** Attempts of one page before the rebuild gives up (conflicts with running drains). */
const MAX_ATTEMPTS = 10;
/** Orders re-derived per transaction. */
const ORDER_PAGE = 500;
/** Events read per slice of the log (since): the most a rebuild holds in memory at once. */
const LOG_SLICE = 50_000;
/** Orders a `since` rebuild remembers as done (some 100 bytes each) before it forgets them all. */
const DONE_MAX = 500_000;
/** Order keys read per page (every order). */
const KEY_PAGE = 5_000;
/**
 * Pages projected at once: while Node folds one page, PostgreSQL reads the next, so the
 * two processors are busy together rather than in turn.
 */
const IN_FLIGHT = 2;

/** What to re-derive: every order (the default), an id range of orders, or the orders of events received since a time. */
export interface RebuildScope {
  fromOrderId?: number | undefined;
  toOrderId?: number | undefined;
  since?: Date | undefined;
}

export interface RebuildProgress {
  /**
   * `orders`: the order rows; `keys`: the log's order keys, for orders no row knows (every
   * order); `log`: the events received since the scope's time.
   */
  phase: "orders" | "keys" | "log";
  /** Orders re-derived so far, and changed. */
  orders: number;
  changed: number;
  /**
   * How far the phase is: of the orders phase, the order ids covered so far of its id
   * range; of the keys and log phases, keys or events read so far, and of how many.
   */
  read: number;
  total: number;
}

export interface RebuildResult {
  orders: number;
  changed: number;
  /** Order keys (every order) or events (since) read from the log. */
  read: number;
  /**
   * Stopped by the signal before the end: in this phase, with every page begun committed.
   * `throughOrderId`: in the orders phase, the order rows up to this id are done.
   */
  stopped?: { phase: RebuildProgress["phase"]; throughOrderId: number | null };
}

/**
 * Re-derives orders from the log in bounded memory, page by page, each page in its own
 * transaction (the worker's own projection), leaving rows that are already right untouched.
 * Safe while workers run: a page that meets a drain in a deadlock is rolled back by
 * PostgreSQL and projected again. Two pages are in flight at once.
 *
 * - Every order (no scope): each order row, by id, with every id it carries; then the
 *   log's order keys (order_periods: one row per order, not per event), a page at a time,
 *   for orders no row knows yet (a row deleted, or a log restored without its orders):
 *   those orders are made. Nothing holds the whole log's identities at once.
 * - `fromOrderId`/`toOrderId`: the order rows in that id range only.
 * - `since`: the orders of events received since then: the log from the first such event
 *   (found by a binary search of the event ids), a slice at a time.
 *
 * `signal` (SIGINT, SIGTERM) stops it between pages: no page is begun after it, and the
 * pages in flight commit before it returns (`stopped` says how far it got).
 */
export async function rebuild(sql: Sql, scope: RebuildScope = {}, progress?: (p: RebuildProgress) => void, signal?: AbortSignal): Promise<RebuildResult> {
  const state: RebuildResult = { orders: 0, changed: 0, read: 0 };
  const stop = async (phase: RebuildProgress["phase"], throughOrderId: number | null = null): Promise<RebuildResult> => {
    await settled(0);
    return { ...state, stopped: { phase, throughOrderId } };
  };
  const report = (phase: RebuildProgress["phase"], total = 0, read = state.read) => progress?.({ phase, ...state, read, total });
  // Pages in flight, and the first failure among them: it fails the rebuild.
  const running = new Set<Promise<void>>();
  let failure: { error: unknown } | null = null;
  const settled = async (most: number) => {
    while (running.size > most) await Promise.race(running);
    if (failure) throw failure.error;
  };
  const project = async (starts: readonly OrderIds[]) => {
    if (starts.length === 0) return;
    await settled(IN_FLIGHT - 1);
    const page: Promise<void> = withRetry(() => projectOrders(sql, starts))
      .then(
        (results) => {
          // Identities of one order share its result: count each order once.
          state.orders += new Set(results.filter((r) => r !== null).map((r) => r!.orderId)).size;
          state.changed += new Set(results.filter((r) => r?.changed).map((r) => r!.orderId)).size;
        },
        (error: unknown) => {
          failure ??= { error };
        },
      )
      .finally(() => running.delete(page));
    running.add(page);
  };

  const since = scope.since;
  if (since === undefined) {
    const first = (scope.fromOrderId ?? 1) - 1;
    // The id range to cover, for progress: rows made meanwhile may go past it.
    const span = Math.max(0, Math.min(scope.toOrderId ?? Number.POSITIVE_INFINITY, await maxOrderId(sql)) - first);
    for (let afterId = first; ; ) {
      if (signal?.aborted) return await stop("orders", afterId > first ? afterId : null);
      const page = await orderIdentityPage(sql, { afterId, upToId: scope.toOrderId, limit: ORDER_PAGE });
      if (page.length === 0) break;
      afterId = page[page.length - 1]!.id;
      await project(page.flatMap(identitiesOfRow));
      report("orders", span, Math.min(span, afterId - first));
    }
    // The keys phase below asks which orders have rows: every page's rows first.
    await settled(0);
    if (scope.fromOrderId !== undefined || scope.toOrderId !== undefined) return state;

    const total = await orderKeyCount(sql);
    for (let afterKey: string | null = null; ; ) {
      if (signal?.aborted) return await stop("keys");
      const keys = await orderKeyPage(sql, afterKey, KEY_PAGE);
      if (keys.length === 0) break;
      afterKey = keys[keys.length - 1]!;
      // A key is its order's provider id, or its merchant's id when it has none: unknown to
      // every row under either, it is started as both (an id naming nothing projects nothing).
      const unknown = await withoutOrder(sql, keys.map((k) => ({ svc_order_id: k, client_order_id: k })));
      const starts = unknown.flatMap((k): OrderIds[] => [
        { svcOrderId: k.svc_order_id, clientOrderId: null },
        { svcOrderId: null, clientOrderId: k.client_order_id },
      ]);
      for (let i = 0; i < starts.length; i += 2 * ORDER_PAGE) await project(starts.slice(i, i + 2 * ORDER_PAGE));
      state.read += keys.length;
      report("keys", total);
    }
    await settled(0);
    return state;
  }

  const { last } = await eventIdRange(sql);
  const start = ((await firstEventReceivedSince(sql, since)) ?? last + 1) - 1;
  // Orders already re-derived in this run: an order's events span slices. Forgotten in
  // bulk past DONE_MAX, so memory stays bounded over any range; an order met again after
  // that is derived a second time, which costs time only (a row already right is left
  // untouched).
  const done = new Set<string>();
  for (let afterId = start; afterId < last; afterId += LOG_SLICE) {
    if (signal?.aborted) return await stop("log");
    const upTo = Math.min(last, afterId + LOG_SLICE);
    if (done.size > DONE_MAX) done.clear();
    const fresh = (await identitiesIn(sql, afterId, upTo)).filter((i) => !done.has(key(i)));
    for (const i of fresh) done.add(key(i));
    for (let i = 0; i < fresh.length; i += ORDER_PAGE) {
      await project(fresh.slice(i, i + ORDER_PAGE).map((ids) => ({ svcOrderId: ids.svc_order_id, clientOrderId: ids.client_order_id })));
    }
    state.read += upTo - afterId;
    report("log", last - start);
  }
  await settled(0);
  return state;
}

const key = (i: { svc_order_id: string | null; client_order_id: string | null }) => `${i.svc_order_id ?? ""}\u0000${i.client_order_id ?? ""}`;

async function withRetry(project: () => Promise<(ProjectResult | null)[]>): Promise<(ProjectResult | null)[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await project();
    } catch (err) {
      if (!isConflict(err) || attempt >= MAX_ATTEMPTS) throw err;
      await new Promise((r) => setTimeout(r, 10 * attempt));
    }
  }
}
