/**
 * The AWB pool's jobs: names, keys, payloads and how they are enqueued, always with SQL in
 * the transaction of the change that calls for them. Every AWB job runs in the queue
 * `awb`, one at a time, so two top-ups never overlap.
 */
import type { Sql } from "postgres";
import { z } from "zod";
import type { Tx } from "../db/client.ts";
import { recordMessage } from "../notify/outbox.ts";
import { MAX_AWB_COUNT } from "../provider/schemas.ts";
import { MAX_POLL_AGE_MS } from "./plan.ts";

export const AWB_QUEUE = "awb";
export const REPLENISH_TASK = "awb__replenish";
export const POLL_TASK = "awb__poll";

/** At most one automatic top-up waiting: allocation and cron share this key. */
export const REPLENISH_KEY = "awb__replenish";
/** One scheduled poll per fresh request. */
export const POLL_KEY_PREFIX = "awb__poll:";
export const pollKey = (requestRowId: number) => `${POLL_KEY_PREFIX}${requestRowId}`;

/**
 * graphile-worker's retries (backoff exp(attempt) seconds: ~3 s, 7 s, 20 s ... ~18 min for
 * the 7th): about half an hour of provider trouble before a top-up or a poll gives up.
 * The cron starts a new top-up every minute anyway.
 */
export const REPLENISH_MAX_ATTEMPTS = 8;
export const POLL_MAX_ATTEMPTS = 8;
/** How many times a job may reschedule itself for a provider's Retry-After. */
export const MAX_RETRY_AFTER_RESCHEDULES = 8;

/**
 * Every minute: top up when below the low watermark (the task decides). jobKey makes the
 * cron share the allocation trigger's job, so at most one automatic top-up waits.
 * jobKeyMode=preserve_run_at: when that job is still waiting with no failed attempt (a
 * top-up put off for a Retry-After, see rescheduleReplenish), the tick keeps its run_at;
 * graphile's default (replace) would reset it to the tick and undo the put-off.
 */
export const AWB_CRONTAB = `* * * * * ${REPLENISH_TASK} ?id=awb_topup&jobKey=${REPLENISH_KEY}&jobKeyMode=preserve_run_at&queue=${AWB_QUEUE}&max=${REPLENISH_MAX_ATTEMPTS} {"reason":"cron"}`;

/**
 * Why a top-up runs: cron, allocation (available fell below the low watermark), empty (an
 * allocation found no number), start (a worker started below the watermark), follow-up
 * (an automatic top-up left the pool low: see FOLLOW_UP_MS) or manual
 * (POST /v1/awb/replenish). See `topUpNeed`.
 */
export const replenishPayload = z.object({
  reason: z.string().default("cron"),
  /** Numbers to add (manual only); absent: up to the target. */
  count: z.number().int().min(1).max(MAX_AWB_COUNT).optional(),
  mode: z.enum(["pool", "fresh"]).optional(),
  /** Times this top-up was put off for a Retry-After. */
  reschedules: z.number().int().min(0).default(0),
});
export type ReplenishPayload = z.infer<typeof replenishPayload>;

export const pollPayload = z.object({
  /** awb_requests.id */
  request: z.number().int().positive(),
  reschedules: z.number().int().min(0).default(0),
});
export type PollPayload = z.infer<typeof pollPayload>;

/**
 * Enqueues the automatic top-up unless one is already waiting (not running, attempts
 * left). The check keeps a waiting job's retry backoff intact (replace mode would reset
 * its run_at to now on every allocation) and keeps concurrent allocators from all
 * updating the same job row. Callers check one after another (a transaction-scoped
 * advisory lock, taken in its own statement so that the check's snapshot sees the job a
 * caller before committed): without it, concurrent allocators each found no job, each
 * "queued" it (job_key folded them into one) and each told the merchant awb.pool_low.
 */
export async function enqueueAutoReplenish(
  tx: Tx,
  reason: "allocation" | "empty" | "start",
  level?: { available: number; lowWatermark: number },
): Promise<boolean> {
  // Most calls below the watermark find the top-up already waiting: they say so without
  // taking the lock, which every one of them would otherwise hold until its commit.
  const [seen] = await tx<{ waiting: boolean }[]>`select ${topUpWaiting(tx)} as waiting`;
  if (seen?.waiting) return false;
  // Fresh numbers on the way will lift the pool to the watermark: the top-up that asked
  // for them did its part, and another would find nothing to ask (while a batch was
  // generated, each allocation queued a job that did nothing, and told awb.pool_low).
  if (level !== undefined && !(await stillLow(tx, level.available, level.lowWatermark))) return false;
  await tx`select pg_advisory_xact_lock(hashtextextended(${REPLENISH_KEY}, 0))`;
  const added = await tx`
    select graphile_worker.add_job(
      ${REPLENISH_TASK}, json_build_object('reason', ${reason}::text),
      queue_name := ${AWB_QUEUE}, job_key := ${REPLENISH_KEY}, max_attempts := ${REPLENISH_MAX_ATTEMPTS}::int)
    where not ${topUpWaiting(tx)}`;
  return added.count > 0;
}

/** Whether the automatic top-up is waiting: queued under its key, not running, attempts left. */
const topUpWaiting = (tx: Tx) => tx`exists (
  select 1 from graphile_worker.jobs
  where key = ${REPLENISH_KEY} and locked_at is null and attempts < max_attempts)`;

/**
 * Numbers that pending fresh requests will deliver (those within the poll give-up window,
 * as poolSnapshot counts them), read through the created_at index.
 */
export async function freshOnTheWay(sql: Tx): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    select coalesce(sum(count), 0)::int as n from awb_requests
    where created_at > now() - ${MAX_POLL_AGE_MS}::int * interval '1 millisecond'
      and mode = 'fresh' and status = 'pending'`;
  return row?.n ?? 0;
}

/** Whether the pool is below the low watermark (or empty), counting fresh numbers on the way. */
export async function stillLow(sql: Tx, available: number, lowWatermark: number): Promise<boolean> {
  const floor = Math.max(1, lowWatermark);
  if (available >= floor) return false;
  return available + (await freshOnTheWay(sql)) < floor;
}

/**
 * How long an automatic top-up that left the pool below the low watermark, with no fresh
 * numbers on the way to lift it, keeps the next one waiting (the cron's period). Without
 * it, a top-up that could not fill the pool (the provider refused, gave too few, or
 * retries ran out) ended, the next allocation found no top-up waiting and queued another
 * at once: one provider call, one failed request and one awb.pool_low per allocation.
 */
export const FOLLOW_UP_MS = 60_000;

/**
 * Queues the automatic top-up `delayMs` from now, under the shared key. One that
 * allocations queued while this run was under way is that same job and is put off too
 * (graphile's replace mode): it would only meet what this run just met.
 */
export async function enqueueFollowUpReplenish(sql: Sql, delayMs: number): Promise<void> {
  await sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${REPLENISH_KEY}, 0))`;
    await tx`
      select graphile_worker.add_job(
        ${REPLENISH_TASK}, json_build_object('reason', 'follow-up'),
        queue_name := ${AWB_QUEUE}, run_at := now() + ${delayMs}::int * interval '1 millisecond',
        job_key := ${REPLENISH_KEY}, job_key_mode := 'replace', max_attempts := ${REPLENISH_MAX_ATTEMPTS}::int)`;
  });
}

/**
 * At worker start: the automatic top-up at once when the pool is below the low watermark
 * (or empty, as the cron decides), rather than at the cron's first minute, which leaves a
 * fresh install without numbers for up to a minute. The same job and key as the cron and
 * allocations, so starting many workers at once still queues one top-up. Counting stops
 * at the watermark (a bounded index-only scan). True when this call queued the job (or,
 * racing another start, replaced the one just queued: still one job).
 */
export async function enqueueStartReplenish(sql: Sql, lowWatermark: number): Promise<boolean> {
  const floor = Math.max(1, lowWatermark);
  return await sql.begin(async (tx) => {
    const [level] = await tx<{ n: number }[]>`
      select count(*)::int as n from (select 1 from awb_numbers where state = 'available' limit ${floor}) s`;
    const available = level?.n ?? 0;
    if (available >= floor) return false;
    if (!(await enqueueAutoReplenish(tx, "start", { available, lowWatermark }))) return false;
    // The merchant is told as when an allocation queues it: allocations meanwhile find
    // this top-up waiting (and, should it fail, its follow-up), so none would tell.
    await recordMessage(tx, { type: "awb.pool_low", data: { pool: { available, low_watermark: lowWatermark } } });
    return true;
  });
}

/** A manual top-up: no job key (each request is honoured), serialised by the queue. */
export async function enqueueManualReplenish(tx: Tx, options: { count?: number | undefined; mode?: "pool" | "fresh" | undefined }): Promise<string> {
  const payload: Partial<ReplenishPayload> = { reason: "manual", count: options.count, mode: options.mode };
  const [job] = await tx<{ id: string }[]>`
    select id::text from graphile_worker.add_job(
      ${REPLENISH_TASK}, ${JSON.stringify(payload)}::text::json,
      queue_name := ${AWB_QUEUE}, max_attempts := ${REPLENISH_MAX_ATTEMPTS}::int)`;
  return job!.id;
}

/**
 * Puts a top-up off by `delayMs` (a provider's Retry-After). With the running job's key,
 * graphile clears the key on this (running) job and adds the new one, so the "one waiting"
 * rule still holds. The cron's ticks keep this run_at (preserve_run_at, see AWB_CRONTAB)
 * but replace the payload with {"reason":"cron"}, so for the shared key `reschedules`
 * starts again at 0. That is harmless: the cron starts a top-up every minute whatever the
 * count, so the cap cannot end the series there; keeping the count would only swap the
 * Retry-After for graphile's backoff after 8 put-offs. The cap still bounds manual
 * top-ups (no key, no cron).
 */
export async function rescheduleReplenish(tx: Tx, payload: ReplenishPayload, delayMs: number, jobKey: string | null): Promise<void> {
  const next: ReplenishPayload = { ...payload, reschedules: payload.reschedules + 1 };
  await tx`
    select graphile_worker.add_job(
      ${REPLENISH_TASK}, ${JSON.stringify(next)}::text::json,
      queue_name := ${AWB_QUEUE}, run_at := now() + ${delayMs}::int * interval '1 millisecond',
      job_key := ${jobKey}::text, max_attempts := ${REPLENISH_MAX_ATTEMPTS}::int)`;
}

/** Schedules the next poll of a fresh request `delayMs` from now (replacing any waiting one). */
export async function schedulePoll(tx: Tx, requestRowId: number, delayMs: number, reschedules = 0): Promise<void> {
  const payload: PollPayload = { request: requestRowId, reschedules };
  await tx`
    select graphile_worker.add_job(
      ${POLL_TASK}, ${JSON.stringify(payload)}::text::json,
      queue_name := ${AWB_QUEUE}, run_at := now() + ${delayMs}::int * interval '1 millisecond',
      job_key := ${pollKey(requestRowId)}, max_attempts := ${POLL_MAX_ATTEMPTS}::int)`;
}
