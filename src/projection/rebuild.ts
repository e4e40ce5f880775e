import type { Sql } from "postgres";
import { eventIdRange, firstEventReceivedSince, identitiesIn } from "../events/log.ts";
import { orderIdentityPage, withoutOrder } from "../orders/read.ts";
import { identitiesOfRow, isConflict, projectOrders } from "./project.ts";
import type { OrderIds, ProjectResult } from "./project.ts";

/** Attempts of one page before the rebuild gives up (conflicts with running drains). */
const MAX_ATTEMPTS = 10;
/** Orders re-derived per transaction. */
const ORDER_PAGE = 500;
/** Events read per slice of the log: the most a rebuild holds in memory at once. */
const LOG_SLICE = 50_000;

/** What to re-derive: every order (the default), an id range of orders, or the orders of events received since a time. */
export interface RebuildScope {
  fromOrderId?: number | undefined;
  toOrderId?: number | undefined;
  since?: Date | undefined;
}

export interface RebuildProgress {
  phase: "orders" | "log";
  /** Orders re-derived so far, and changed. */
  orders: number;
  changed: number;
  /** Of the log phase: events read so far and the slice's end. */
  eventsRead: number;
  eventsTotal: number;
}

export interface RebuildResult {
  orders: number;
  changed: number;
  eventsRead: number;
}

/**
 * Re-derives orders from the log in bounded memory, page by page, each page in its own
 * transaction (the worker's own projection), leaving rows that are already right untouched.
 * Safe while workers run: a page that meets a drain in a deadlock is rolled back by
 * PostgreSQL and projected again.
 *
 * - Every order (no scope): each order row, by id, with every id it carries; then the log,
 *   a slice of ids at a time, for events no order row knows yet (a row deleted, or a log
 *   restored without its orders): those orders are made. Nothing holds the whole log's
 *   identities at once.
 * - `fromOrderId`/`toOrderId`: the order rows in that id range only.
 * - `since`: the orders of events received since then: the log from the first such event
 *   (found by a binary search of the primary key), a slice at a time.
 */
export async function rebuild(sql: Sql, scope: RebuildScope = {}, progress?: (p: RebuildProgress) => void): Promise<RebuildResult> {
  const state = { orders: 0, changed: 0, eventsRead: 0 };
  const report = (phase: RebuildProgress["phase"], eventsTotal = 0) => progress?.({ phase, ...state, eventsTotal });
  const project = async (starts: readonly OrderIds[]) => {
    if (starts.length === 0) return;
    const results = await withRetry(() => projectOrders(sql, starts));
    // Identities of one order share its result: count each order once.
    const orders = new Set(results.filter((r) => r !== null).map((r) => r!.orderId));
    state.orders += orders.size;
    state.changed += new Set(results.filter((r) => r?.changed).map((r) => r!.orderId)).size;
  };

  if (scope.since === undefined) {
    for (let afterId = (scope.fromOrderId ?? 1) - 1; ; ) {
      const page = await orderIdentityPage(sql, { afterId, upToId: scope.toOrderId, limit: ORDER_PAGE });
      if (page.length === 0) break;
      afterId = page[page.length - 1]!.id;
      await project(page.flatMap(identitiesOfRow));
      report("orders");
    }
    if (scope.fromOrderId !== undefined || scope.toOrderId !== undefined) return state;
  }

  const { last } = await eventIdRange(sql);
  const start = scope.since === undefined ? 0 : ((await firstEventReceivedSince(sql, scope.since)) ?? last + 1) - 1;
  // Orders already re-derived in this run (since: an order's events span slices).
  const done = new Set<string>();
  for (let afterId = start; afterId < last; afterId += LOG_SLICE) {
    const upTo = Math.min(last, afterId + LOG_SLICE);
    const inSlice = await identitiesIn(sql, afterId, upTo);
    // Every order: the orders no row knows yet (the rows were all re-derived above).
    const identities = scope.since === undefined ? await withoutOrder(sql, inSlice) : inSlice;
    const fresh = identities.filter((i) => !done.has(key(i)));
    if (scope.since !== undefined) for (const i of fresh) done.add(key(i));
    for (let i = 0; i < fresh.length; i += ORDER_PAGE) {
      await project(fresh.slice(i, i + ORDER_PAGE).map((ids) => ({ svcOrderId: ids.svc_order_id, clientOrderId: ids.client_order_id })));
    }
    state.eventsRead += upTo - afterId;
    report("log", last - start);
  }
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
