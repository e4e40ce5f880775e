/**
 * Reconciliation: the active orders silent for RECONCILE_AFTER_MIN are asked for their
 * status, a few at a time, and the answers are appended to the event log as `poll` events
 * under a callback's identity rules. A provider without the endpoint (an HTML 404) turns
 * polling off in this process, with one warning, and is asked again an hour later: a
 * proxy's "Not Found" page during a provider's deploy must not end polling for good.
 */
import type { Sql } from "postgres";
import { hasCoordinates, normaliseCallback } from "../domain/normalise.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { CANONICAL_STATUSES, isTerminal } from "../domain/statuses.ts";
import { appendEvents } from "../events/log.ts";
import { ordersDueForPoll } from "../orders/read.ts";
import type { DueOrder } from "../orders/read.ts";
import { markPolled } from "../orders/store.ts";
import type { Logger } from "../logger.ts";
import type { ProviderClient } from "../provider/client.ts";
import { ProviderError } from "../provider/errors.ts";

/** Orders asked about in one run (the cron runs every minute): at most this many calls a minute. */
const RECONCILE_BATCH = 60;
/** At least this long between two calls: at most 5 a second, whatever the backlog. */
const RECONCILE_SPACING_MS = 200;
/** A missing status endpoint is asked about again after this long (one order's call). */
const ENDPOINT_RECHECK_MS = 60 * 60 * 1000;

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
  /** ENDPOINT_RECHECK_MS, for tests. */
  recheckMs?: number;
  /**
   * Aborts when the worker begins to stop (a deploy's SIGTERM): the run asks about no
   * further order and ends, as a run cut short by a provider failure does; the next tick
   * goes on with the orders left. Otherwise it kept polling, up to a minute's worth of
   * calls, past the 15 s a stopping worker gives its jobs, and was cut off there, its job
   * left with its one attempt spent.
   */
  stopping?: AbortSignal | undefined;
}

export interface ReconcileReport {
  asked: number;
  /** Answers that added an event to the log (the rest said nothing new). */
  learned: number;
  /** Calls that failed, and answers not recorded (unusable, or naming another order). */
  failed: number;
  /** Polling is off: configured so, or the provider has no such endpoint. */
  off: boolean;
}

/**
 * Per process: when the provider last answered that it has no status endpoint (its first
 * such answer is the one warned about), or undefined while the endpoint answers.
 */
let endpointMissing: { since: number; checkedAt: number } | undefined;

/** For tests: forget that the endpoint was found missing. */
export function resetEndpointMissing(): void {
  endpointMissing = undefined;
}

const ACTIVE = CANONICAL_STATUSES.filter((s) => !isTerminal(s));

/**
 * A 404 with an HTML page from the status call itself (not its token exchange): the path
 * is unknown to the provider (a web server's "Not Found" page). An order the provider does not know is a JSON 404 (`{"detail": …}`),
 * and an empty or plain 404 is read as that too: a missing endpoint must be shown, not
 * guessed, since it turns polling off.
 */
function endpointIsMissing(err: unknown): boolean {
  return err instanceof ProviderError && err.stage === "call" && err.status === 404 && typeof err.body === "string" && /<html|<!doctype|<h1/i.test(err.body);
}

/** The endpoint answered: if it was missing, polling is back on (said once). */
function endpointAnswers(log: Logger): void {
  if (endpointMissing === undefined) return;
  log.info({ missingSince: new Date(endpointMissing.since).toISOString() }, "the provider's order-status endpoint answers again: reconciliation is back on");
  endpointMissing = undefined;
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
  if (deps.afterMin <= 0 || deps.provider === undefined) return { ...report, off: true };
  const missing = endpointMissing;
  if (missing !== undefined && Date.now() - missing.checkedAt < (deps.recheckMs ?? ENDPOINT_RECHECK_MS)) return { ...report, off: true };
  const recheck = missing !== undefined;
  const spacing = deps.spacingMs ?? RECONCILE_SPACING_MS;
  // Asking whether a missing endpoint is back takes one order's call, not a run's.
  const batch = recheck ? 1 : (deps.batch ?? RECONCILE_BATCH);
  const orders = await ordersDueForPoll(deps.sql, ACTIVE, deps.afterMin, batch);
  let last = 0;
  let stop = false;
  for (const order of orders) {
    if (deps.stopping?.aborted) break;
    // Every provider id the order carries: the provider may have made a second order for
    // it (PRODUCT.md §10), whose lost callbacks only asking about that id can recover.
    const svcs = [...new Set([order.svc_order_id, ...order.svc_order_ids])];
    if (report.asked > 0 && report.asked + svcs.length > batch) break;
    try {
      for (const svc of svcs) {
        if (deps.stopping?.aborted) break;
        const wait = last + spacing - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        last = Date.now();
        report.asked++;
        const log = deps.log.child({ orderId: order.id, svcOrderId: svc });
        try {
          const answer = await deps.provider.orderStatus(svc);
          endpointAnswers(deps.log);
          const outcome = await appendPoll(deps, { ...order, svc_order_id: svc }, svcs, answer.data);
          if (outcome === "new") report.learned++;
          if (outcome === "refused") report.failed++;
        } catch (err) {
          if (endpointIsMissing(err)) {
            const now = Date.now();
            if (endpointMissing === undefined) {
              deps.log.warn(
                { status: 404 },
                "the provider has no order-status endpoint: reconciliation is off, asked again hourly (set RECONCILE_AFTER_MIN=0 to silence this)",
              );
            }
            endpointMissing = { since: endpointMissing?.since ?? now, checkedAt: now };
            return { ...report, off: true };
          }
          if (!(err instanceof ProviderError)) throw err;
          // An order it does not know (a JSON 404) is an answer of the endpoint too.
          if (err.stage === "call" && err.status === 404) endpointAnswers(deps.log);
          report.failed++;
          log.warn({ error: err.message }, "order status poll failed");
          // Rate limited, down (no answer, or a 5xx), or our credentials refused (or no token
          // to be had): the rest of this run would fare no better, and asking again per order
          // only hammers the provider. The order asked goes to the back of the line, so one
          // order the provider always fails on does not hold the others up.
          stop =
            err.kind === "rate_limited" ||
            err.kind === "server" ||
            err.kind === "network" ||
            err.kind === "timeout" ||
            err.kind === "auth" ||
            err.stage === "token";
          if (stop) break;
        }
      }
    } finally {
      // Whatever happened, this order goes to the back of the line.
      await markPolled(deps.sql, order.id);
    }
    if (stop) break;
  }
  if (report.asked > 0) deps.log.info(report, "reconciliation run");
  return report;
}

/**
 * What became of an answer: `new` added an event, `known` was the same answer as before,
 * `refused` was not recorded (unusable, or about another order).
 */
type PollOutcome = "new" | "known" | "refused";

/**
 * Appends what the answer says. An answer that names another order than the one asked
 * about (a provider id the order does not carry, or another client_order_id) is refused:
 * stored beside the ids we asked with, it would tell the projection that the two orders
 * are one, and merge them.
 */
async function appendPoll(
  deps: ReconcileDeps,
  order: Pick<DueOrder, "svc_order_id" | "client_order_id">,
  svcs: readonly string[],
  data: JsonObject,
): Promise<PollOutcome> {
  const payload = pollPayload(data, order);
  const receivedAt = new Date();
  const normalised = normaliseCallback(payload, { forceLocation: false, receivedAt, timeZone: deps.timeZone });
  if (!normalised.ok) {
    deps.log.warn({ svcOrderId: order.svc_order_id, reason: normalised.message }, "order status answer not usable");
    return "refused";
  }
  const { svcOrderId, clientOrderId } = normalised.event;
  const otherSvc = svcOrderId !== null && !svcs.includes(svcOrderId);
  const otherClient = clientOrderId !== null && order.client_order_id !== null && clientOrderId !== order.client_order_id;
  if (otherSvc || otherClient) {
    deps.log.warn(
      { svcOrderId: order.svc_order_id, clientOrderId: order.client_order_id, answerSvcOrderId: svcOrderId, answerClientOrderId: clientOrderId },
      "order status answer names another order: not recorded",
    );
    return "refused";
  }
  const inputs = [{ event: normalised.event, payload, source: "poll" as const }];
  const position = positionPayload(payload, normalised.event);
  if (position !== null) {
    const located = normaliseCallback(position, { forceLocation: true, receivedAt, timeZone: deps.timeZone });
    if (located.ok) inputs.push({ event: located.event, payload: position, source: "poll" });
  }
  const appended = await appendEvents(deps.sql, inputs);
  return appended.some((a) => !a.duplicate) ? "new" : "known";
}

/** Top-level keys of an answer that say who the rider is and where (eventDetails's aliases). */
const RIDER_KEYS = [
  "rider_details",
  "rider_id",
  "sfx_rider_id",
  "rider_name",
  "rider_contact",
  "rider_contact_number",
  "virtual_contact_number",
  "rider_phone",
  "masked_rider_contact",
  "rider_latitude",
  "rider_longitude",
  "latitude",
  "longitude",
  "location_accuracy",
] as const;

/**
 * The rider's position in a status answer, as a location event of its own: the order's ids
 * and the rider's keys, nothing else. The status event is dated by its step's time (the
 * dispatch time of a COLLECTED order), but the position is where the rider is when the
 * provider answers: dated with the status, a newer poll's position tied with an older one
 * and either could win. With no time of its own it is dated when received, and the same
 * position again is the same body, one event.
 */
export function positionPayload(payload: JsonObject, ids: { svcOrderId: string | null; clientOrderId: string | null }): JsonObject | null {
  if (!hasCoordinates(payload)) return null;
  const position: JsonObject = {};
  if (ids.svcOrderId !== null) position["svc_order_id"] = ids.svcOrderId;
  if (ids.clientOrderId !== null) position["client_order_id"] = ids.clientOrderId;
  for (const key of RIDER_KEYS) if (payload[key] !== undefined) position[key] = payload[key];
  return position;
}
