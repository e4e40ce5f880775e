/**
 * Delivering one endpoint's due messages: a few at a time (one run per endpoint, its own
 * graphile-worker queue, so a slow receiver holds one worker slot, not all), each signed
 * as Standard Webhooks, its outcome recorded; then a run is scheduled for the next retry.
 */
import type { Sql } from "postgres";
import { failureBursts } from "../db/failure-bursts.ts";
import type { FailureBursts } from "../db/failure-bursts.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { LoadMeter } from "../worker/load.ts";
import { claimDue, enqueueDelivery, failPending, nextDue, oldestDue, recordAttempts, releaseClaims } from "./deliveries.ts";
import type { AttemptRecord, Claimed } from "./deliveries.ts";
import { disableEndpoint, getEndpoint, signingSecrets } from "./endpoints.ts";
import type { EndpointRow } from "./endpoints.ts";
import { sendWebhook } from "./send.ts";
import { webhookHeaders } from "./sign.ts";

/** Deliveries in flight at once per endpoint. */
export const PER_ENDPOINT = 4;
/** Deliveries claimed (and their outcomes recorded) per round: one claim and one write for many sends. */
const ROUND = 64;

export interface DeliverDeps {
  sql: Sql;
  log: Logger;
  metrics: Metrics;
  settings: { timeoutMs: number; retryScheduleS: readonly number[]; allowPrivateUrls: boolean; burstEventsS: number; burstMaxWaitS: number };
  /** How many events the worker projects: deliveries yield to a burst. */
  load: LoadMeter;
  /** This runner's delivery runs in progress, and how many may be (absent: no limit). */
  runs?: RunSlots | undefined;
  /** The runner's log of failed attempts, a line per burst per endpoint (absent: a line per attempt). */
  failures?: DeliveryFailureLog | undefined;
  /**
   * Aborts when the worker begins to stop (a deploy's SIGTERM): the run starts no new
   * send, records what it sent, gives back what it claimed and did not send, and leaves
   * a job for the endpoint, which another worker runs at once.
   */
  stopping?: AbortSignal | undefined;
}

/**
 * Failed attempts, logged per endpoint as bursts (db/failure-bursts.ts): the first with its
 * error, then a count a minute while the endpoint keeps failing, and a line once it has
 * stopped. A receiver that is down fails every message up to NOTIFY_RETRY_SCHEDULE's
 * length of times, and it is never disabled but by a 410: logged one by one, that was a
 * line per attempt for as long as it stayed down (a 15-minute soak with two failing
 * receivers wrote 64 MB of them, 99 % of the worker's log). Every attempt stays recorded
 * (GET /v1/notifications/messages/{id}).
 */
export interface DeliveryFailureLog {
  retrying: FailureBursts;
  givenUp: FailureBursts;
}

export function deliveryFailureLog(log: Logger): DeliveryFailureLog {
  return { retrying: failureBursts(log, "failed attempts"), givenUp: failureBursts(log, "messages failed for good") };
}

/**
 * A run holds a worker slot for as long as its endpoint has something due, and a receiver
 * that hangs makes every send last the whole timeout: with as many hanging endpoints as
 * WORKER_CONCURRENCY, nothing else would run (no projection, no provider command). So a
 * runner runs at most `max` at once; another comes back a second later.
 */
export interface RunSlots {
  active: number;
  readonly max: number;
}

/** A run put off because the runner's delivery runs are all taken comes back after this. */
const SLOT_RECHECK_MS = 1000;

/** The most delivery runs a worker runs at once: all its slots but two, at least one. */
export const deliveryRunsOf = (concurrency: number): number => Math.max(1, concurrency - 2);

/** While a burst lasts, the endpoint's run is looked at again this often. */
const BURST_RECHECK_MS = 1000;
/** Per endpoint, when this process's last burst wake-up run is due. */
const wakeUps = new Map<string, number>();

/**
 * Ingestion first: while the worker projects more than `burstEventsS` events a second, a
 * run sends only what has been due for `burstMaxWaitS` or longer, and otherwise comes back
 * in a second. On two cores, webhooks sent during a burst take the CPU that acknowledging
 * callbacks needs; a few seconds' delay costs a receiver nothing, a slow acknowledgement
 * makes the provider retry. True when the run was put off.
 */
async function waitsForBurst(deps: DeliverDeps, endpointId: string): Promise<boolean> {
  const { burstEventsS, burstMaxWaitS } = deps.settings;
  if (burstEventsS === 0 || deps.load.perSecond() <= burstEventsS) return false;
  // Every projection batch's messages start a run: while a wake-up is already set, such a
  // run ends here, without a query.
  if ((wakeUps.get(endpointId) ?? 0) > Date.now()) return true;
  const oldest = await oldestDue(deps.sql, endpointId);
  if (oldest === null) return false; // nothing is due: the claim finds nothing, and the run ends as usual
  const waited = Date.now() - oldest.getTime();
  if (waited >= burstMaxWaitS * 1000) return false;
  const wakeAt = Date.now() + BURST_RECHECK_MS;
  await enqueueDelivery(deps.sql, endpointId, new Date(wakeAt));
  wakeUps.set(endpointId, wakeAt);
  deps.metrics.notifyBurstWaits.inc();
  return true;
}

/** Sends everything due for the endpoint, until nothing is; schedules the next retry's run. How many it sent. */
export async function deliverDue(deps: DeliverDeps, endpointId: string): Promise<number> {
  const slots = deps.runs;
  if (slots === undefined) return await deliverAll(deps, endpointId);
  const isBehind = behind.has(endpointId);
  // A slot just freed goes to a run that is not behind if one was put off lately: runs
  // that start together race for it, whatever their priority.
  for (const [id, at] of waiting) if (Date.now() - at >= WAITING_MS) waiting.delete(id);
  const yields = isBehind && waiting.size > 0;
  if (slots.active >= slots.max || yields) {
    if (!isBehind) waiting.set(endpointId, Date.now());
    await enqueueDelivery(deps.sql, endpointId, new Date(Date.now() + SLOT_RECHECK_MS), isBehind);
    return 0;
  }
  waiting.delete(endpointId);
  slots.active++;
  try {
    return await deliverAll(deps, endpointId);
  } finally {
    slots.active--;
  }
}

/**
 * How long a run starts sends while every delivery run of its runner is taken (so others
 * may be put off): then it starts no new one, gives back what it claimed and did not
 * send, and comes back after SLOT_RECHECK_MS, behind the other runs (`behind`). Without
 * it a receiver that hangs held its slot for a whole round (64 sends, 4 at a time, each
 * the whole timeout) and for as long as its retries kept falling due: with as many such
 * receivers as delivery runs (one, with WORKER_CONCURRENCY 3 or less), every other
 * endpoint waited for them. With a slot to spare nobody waits, and a run goes on.
 */
export const RUN_SLICE_MS = 1000;

/**
 * Endpoints (of this process) whose last run gave its slot up with deliveries left: their
 * runs, put off or coming back, go behind every other job due (outbox.ts deliveryJob), so
 * that a few receivers that hang take turns among themselves rather than with everyone.
 * An endpoint leaves the set once a run of it ends within its turn.
 */
const behind = new Set<string>();
/** Endpoints not behind whose run was put off for want of a slot, and when (last). */
const waiting = new Map<string, number>();
/** A put-off run comes back after SLOT_RECHECK_MS: waiting longer than this, it is not. */
const WAITING_MS = 3 * SLOT_RECHECK_MS;

async function deliverAll(deps: DeliverDeps, endpointId: string): Promise<number> {
  let sent = 0;
  // A round sends its deliveries PER_ENDPOINT at a time, each within the timeout.
  const leaseMs = Math.ceil(ROUND / PER_ENDPOINT) * deps.settings.timeoutMs + 5_000;
  const sliceEnds = Date.now() + RUN_SLICE_MS;
  const slots = deps.runs;
  const stopping = () => deps.stopping?.aborted === true;
  const turnOver = () => slots !== undefined && slots.active >= slots.max && Date.now() >= sliceEnds;
  for (;;) {
    // Stopping: a round claimed now would go on after the worker's 15 s for running jobs
    // (64 sends to a slow receiver), be cut off unrecorded, and stay leased for minutes;
    // the job left below lets the next worker send what is due at once.
    if (stopping()) break;
    const endpoint = await getEndpoint(deps.sql, endpointId);
    if (!endpoint) {
      behind.delete(endpointId);
      return sent; // deleted: its deliveries went with it
    }
    if (!endpoint.enabled) {
      behind.delete(endpointId);
      await failPending(deps.sql, endpointId, `endpoint disabled${endpoint.disabled_reason ? `: ${endpoint.disabled_reason}` : ""}`);
      return sent;
    }
    if (await waitsForBurst(deps, endpointId)) return sent;
    if (turnOver()) {
      // Its turn is over: a run in a second, behind the jobs due then (nextDue's time would
      // put it before the runs waiting for a slot).
      if ((await nextDue(deps.sql, endpointId)) !== null) {
        behind.add(endpointId);
        await enqueueDelivery(deps.sql, endpointId, new Date(Date.now() + SLOT_RECHECK_MS), true);
      }
      return sent;
    }
    const batch = await claimDue(deps.sql, endpointId, ROUND, leaseMs);
    if (batch.length === 0) {
      behind.delete(endpointId);
      break;
    }
    // Stopped (deleted or disabled meanwhile, or the turn over): the next turn ends its
    // waiting deliveries failed at once (not at the sweep), finds the endpoint gone, or yields.
    sent += await sendRound(deps, endpoint, batch, () => stopping() || turnOver());
  }
  const next = await nextDue(deps.sql, endpointId);
  if (next !== null) await enqueueDelivery(deps.sql, endpointId, next);
  return sent;
}

/**
 * Sends a round PER_ENDPOINT at a time and records every outcome in one statement. Each
 * send reads the endpoint again first: a PATCH or DELETE that has committed decides the
 * next send (its URL, whether it goes at all), not after a round that may last minutes
 * with a slow receiver. Once the endpoint is deleted or disabled (by a person, or by a
 * 410 it answered), or the run must yield (its turn is over, or the worker is stopping),
 * the rest of the round is not sent: it is given back, for the next turn or run. How many
 * were sent.
 */
async function sendRound(deps: DeliverDeps, endpoint: EndpointRow, batch: readonly Claimed[], yieldNow: () => boolean): Promise<number> {
  const records: AttemptRecord[] = [];
  let stopped = false;
  let next = 0;
  const lane = async () => {
    while (!stopped && next < batch.length) {
      if (yieldNow()) {
        stopped = true;
        break;
      }
      const d = batch[next++]!;
      const current = await getEndpoint(deps.sql, endpoint.id);
      if (!current?.enabled) {
        stopped = true; // d and the rest are given back below
        break;
      }
      const record = await attempt(deps, current, d);
      records.push(record);
      if (record.next.state === "failed" && record.statusCode === 410) {
        stopped = true;
        // The URL is not logged: receivers often carry a token in it.
        if (await disableEndpoint(deps.sql, current.id, `410 Gone at ${new Date().toISOString()}`, current.url)) {
          deps.log.warn({ endpointId: current.id }, "notification endpoint answered 410 Gone: disabled");
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PER_ENDPOINT, batch.length) }, lane));
  const recorded = new Set(await recordAttempts(deps.sql, records));
  const superseded = records.filter((r) => !recorded.has(r.deliveryId)).map((r) => r.deliveryId);
  if (superseded.length > 0) {
    // Resent, recovered or claimed again while this run sent them: their attempts are
    // logged, and the delivery's state is what the newer request or run makes of it.
    deps.log.info({ endpointId: endpoint.id, deliveryIds: superseded }, "notification outcomes not recorded: resent or claimed again meanwhile");
  }
  if (stopped) {
    // What this round claimed but did not send goes back at once, for the next turn to fail
    // (disabled), or to send to the endpoint as it is now (a 410 from a URL it no longer
    // has), or for the endpoint's next run (its turn is over, or the worker is stopping).
    const sent = new Set(records.map((r) => r.deliveryId));
    await releaseClaims(deps.sql, batch.filter((d) => !sent.has(d.id)));
  }
  return records.length;
}

/** One send; its outcome as a record, with the metrics and the log line it calls for. */
async function attempt(deps: DeliverDeps, endpoint: EndpointRow, d: Claimed): Promise<AttemptRecord> {
  const at = new Date();
  const timestampS = Math.floor(at.getTime() / 1000);
  const result = await sendWebhook({
    url: endpoint.url,
    headers: webhookHeaders(signingSecrets(endpoint, at), d.message_id, timestampS, d.body),
    body: d.body,
    timeoutMs: deps.settings.timeoutMs,
    allowPrivate: deps.settings.allowPrivateUrls,
  });
  const base = { deliveryId: d.id, lease: d.lease, at, statusCode: result.statusCode, durationMs: result.durationMs, responseExcerpt: result.responseExcerpt, error: result.error };
  deps.metrics.notifyAttempts.inc({ outcome: result.outcome });
  if (result.outcome === "delivered") {
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "delivered" });
    deps.metrics.notifyLag.observe(Math.max(0, Date.now() - d.created_at.getTime()) / 1000);
    return { ...base, next: { state: "delivered" } };
  }
  if (result.outcome === "gone") {
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "gone" });
    return { ...base, next: { state: "failed" } };
  }
  const fields = { endpointId: endpoint.id, messageId: d.message_id, type: d.type, attempts: d.attempts + 1, error: result.error, status: result.statusCode };
  const key = `notification endpoint ${endpoint.id}`;
  // Entry k is the delay before attempt k+1 (entry 0, before the first, the outbox applies):
  // after attempt n, entry n; after the last entry's attempt, none.
  const delay = deps.settings.retryScheduleS[fields.attempts];
  if (delay === undefined) {
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "failed" });
    if (deps.failures) deps.failures.givenUp.failed(key, fields, "notification failed for good");
    else deps.log.warn(fields, "notification failed for good");
    return { ...base, next: { state: "failed" } };
  }
  if (deps.failures) deps.failures.retrying.failed(key, { ...fields, retryInS: delay }, "notification attempt failed; will retry");
  else deps.log.info({ ...fields, retryInS: delay }, "notification attempt failed; will retry");
  return { ...base, next: { state: "pending", retryInS: delay } };
}
