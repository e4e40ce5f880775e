/**
 * Reconciliation (PRODUCT.md §10). The real provider is reported not to retry a callback
 * that failed, so an order can fall silent while it moves on at the provider. Every
 * minute, the active orders (a provider id, not terminal) with no event for
 * RECONCILE_AFTER_MIN minutes are asked for their status, a few at a time; what the
 * answer says is appended to the event log with source `poll`, under the same identity
 * rules as a callback (the same answer twice is one event), so the projection stays one
 * fold over one log.
 *
 * A provider without the endpoint answers 404 with its HTML page, not an order's JSON
 * "not found": polling is then turned off in this process, with one warning.
 */
import type { Sql } from "postgres";
import { normaliseCallback } from "../domain/normalise.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { CANONICAL_STATUSES, isTerminal } from "../domain/statuses.ts";
import { appendEvents } from "../ingest/append.ts";
import type { Logger } from "../logger.ts";
import type { ProviderClient } from "../provider/client.ts";
import { ProviderError } from "../provider/errors.ts";

/** Orders asked about in one run (the cron runs every minute): at most this many calls a minute. */
const RECONCILE_BATCH = 60;
/** At least this long between two calls: at most 5 a second, whatever the backlog. */
const RECONCILE_SPACING_MS = 200;

export interface ReconcileDeps {
  sql: Sql;
  provider: ProviderClient | undefined;
  log: Logger;
  /** RECONCILE_AFTER_MIN; 0 turns reconciliation off. */
  afterMin: number;
  /** PROVIDER_TIMEZONE, for the answer's zone-less times. */
  timeZone: string;
  spacingMs?: number;
  batch?: number;
}

export interface ReconcileReport {
  asked: number;
  /** Answers that added an event to the log (the rest said nothing new). */
  learned: number;
  failed: number;
  /** Polling is off: configured so, or the provider has no such endpoint. */
  off: boolean;
}

/** Per process: the provider answered that it has no status endpoint. */
let endpointMissing = false;

/** For tests: forget that the endpoint was found missing. */
export function resetEndpointMissing(): void {
  endpointMissing = false;
}

const ACTIVE = CANONICAL_STATUSES.filter((s) => !isTerminal(s));

interface DueOrder {
  id: string;
  svc_order_id: string;
  client_order_id: string | null;
}

/**
 * The orders due for a poll, longest unpolled first. `last_event_at` is the newest event
 * time; an order never heard of since it was created counts from its creation.
 */
async function dueOrders(sql: Sql, afterMin: number, limit: number): Promise<DueOrder[]> {
  const seconds = afterMin * 60;
  return await sql<DueOrder[]>`
    select id::text, svc_order_id, client_order_id from orders
    where svc_order_id is not null
      -- Active statuses named, not terminal ones excluded: orders_status_idx then finds the
      -- active orders, few beside the finished ones, with no index of their own (an index
      -- costs every write of an order row).
      and (status is null or status = any(${ACTIVE}::text[]))
      and coalesce(last_event_at, created_at) < now() - make_interval(secs => ${seconds})
      and (reconciled_at is null or reconciled_at < now() - make_interval(secs => ${seconds}))
    order by reconciled_at nulls first, id
    limit ${limit}`;
}

/**
 * A 404 with an HTML page: the path itself is unknown to the provider (a web server's
 * "Not Found" page). An order the provider does not know is a JSON 404 (`{"detail": …}`),
 * and an empty or plain 404 is read as that too: a missing endpoint must be shown, not
 * guessed, since it turns polling off.
 */
function endpointIsMissing(err: unknown): boolean {
  return err instanceof ProviderError && err.status === 404 && typeof err.body === "string" && /<html|<!doctype|<h1/i.test(err.body);
}

/**
 * The event a status answer makes: its `data`, with the ids we asked about added when
 * the answer leaves them out (so the event always lands on the order it is about).
 */
export function pollPayload(data: JsonObject, order: Pick<DueOrder, "svc_order_id" | "client_order_id">): JsonObject {
  const payload: JsonObject = { ...data };
  const hasSvc = ["svc_order_id", "sfx_order_id"].some((k) => payload[k] !== undefined && payload[k] !== null);
  if (!hasSvc) payload["svc_order_id"] = order.svc_order_id;
  const hasClient = ["client_order_id", "coid"].some((k) => payload[k] !== undefined && payload[k] !== null);
  if (!hasClient && order.client_order_id !== null) payload["client_order_id"] = order.client_order_id;
  return payload;
}

export async function reconcileDue(deps: ReconcileDeps): Promise<ReconcileReport> {
  const report: ReconcileReport = { asked: 0, learned: 0, failed: 0, off: false };
  if (deps.afterMin <= 0 || deps.provider === undefined || endpointMissing) return { ...report, off: true };
  const spacing = deps.spacingMs ?? RECONCILE_SPACING_MS;
  const orders = await dueOrders(deps.sql, deps.afterMin, deps.batch ?? RECONCILE_BATCH);
  let last = 0;
  for (const order of orders) {
    const wait = last + spacing - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    last = Date.now();
    report.asked++;
    const log = deps.log.child({ orderId: Number(order.id), svcOrderId: order.svc_order_id });
    let stop = false;
    try {
      const answer = await deps.provider.orderStatus(order.svc_order_id);
      if (await appendPoll(deps, order, answer.data)) report.learned++;
    } catch (err) {
      if (endpointIsMissing(err)) {
        endpointMissing = true;
        deps.log.warn(
          { status: 404 },
          "the provider has no order-status endpoint: reconciliation is off until restart (set RECONCILE_AFTER_MIN=0 to silence this)",
        );
        return { ...report, off: true };
      }
      if (!(err instanceof ProviderError)) throw err;
      report.failed++;
      log.warn({ error: err.message }, "order status poll failed");
      // Rate limited or down: the rest of this run would fare no better.
      stop = err.kind === "rate_limited" || err.kind === "network" || err.kind === "timeout";
    } finally {
      // Whatever happened, this order goes to the back of the line.
      await markPolled(deps.sql, order.id);
    }
    if (stop) break;
  }
  if (report.asked > 0) deps.log.info(report, "reconciliation run");
  return report;
}

async function markPolled(sql: Sql, orderId: string): Promise<void> {
  await sql`update orders set reconciled_at = now() where id = ${orderId}`;
}

/** Appends what the answer says; true when it was news (not the same answer as before). */
async function appendPoll(deps: ReconcileDeps, order: DueOrder, data: JsonObject): Promise<boolean> {
  const payload = pollPayload(data, order);
  const normalised = normaliseCallback(payload, { forceLocation: false, receivedAt: new Date(), timeZone: deps.timeZone });
  if (!normalised.ok) {
    deps.log.warn({ svcOrderId: order.svc_order_id, reason: normalised.message }, "order status answer not usable");
    return false;
  }
  const [appended] = await appendEvents(deps.sql, [{ event: normalised.event, payload, source: "poll" }]);
  return appended !== undefined && !appended.duplicate;
}
