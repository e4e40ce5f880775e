/**
 * Topping the pool up from the provider, in both modes, and polling fresh requests. A
 * permanent provider error is recorded on an awb_requests row and ends the job; a
 * transient one is thrown for graphile-worker to retry, or the job re-schedules itself
 * for the provider's Retry-After.
 */
import type { Sql, TransactionSql } from "postgres";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { ProviderClient } from "../provider/client.ts";
import type { JobInfo } from "../worker/deps.ts";
import { ProviderError, describeProviderError } from "../provider/errors.ts";
import { headOf } from "../domain/text.ts";
import { MAX_AWB_COUNT, USABLE_AWB_NUMBER } from "../provider/schemas.ts";
import { FOLLOW_UP_MS, MAX_RETRY_AFTER_RESCHEDULES, POLL_KEY_PREFIX, enqueueFollowUpReplenish, rescheduleReplenish, schedulePoll, stillLow } from "./jobs.ts";
import type { PollPayload, ReplenishPayload } from "./jobs.ts";
import {
  MAX_POLL_AGE_MS,
  MAX_POLLS,
  MAX_POOL_ROUNDS,
  firstPollDelayMs,
  firstPoolCount,
  freshBatches,
  nextPollDelayMs,
  nextPoolCount,
  pollGivesUp,
  topUpNeed,
} from "./plan.ts";
import { availableUpTo, heldFromElsewhere, insertAwbNumbers, lastKnownUnused, poolSnapshot } from "./pool.ts";
import type { AwbRequestRow } from "./pool.ts";

export interface TopUpDeps {
  sql: Sql;
  provider: ProviderClient | undefined;
  settings: Config["awb"];
  log: Logger;
  /** Aborts when the worker begins to stop: a top-up sends no further request. */
  stopping?: AbortSignal | undefined;
}

export type TopUpResult =
  | { outcome: "skipped"; reason: string }
  | { outcome: "done"; mode: "pool"; requested: number; received: number; added: number }
  | { outcome: "done"; mode: "fresh"; requested: number; requests: number }
  | { outcome: "failed"; error: string }
  | { outcome: "rescheduled"; afterMs: number };

// ---------------------------------------------------------------- top-up

/**
 * One top-up run. An automatic one (not manual) that ends with the pool still below the
 * low watermark, fresh numbers on the way included, however it ended (the provider
 * refused, retries ran out, stopped short), leaves the next automatic top-up waiting FOLLOW_UP_MS: allocations meanwhile
 * find it waiting and queue none (no provider call and no awb.pool_low per allocation).
 */
export async function replenish(deps: TopUpDeps, payload: ReplenishPayload, job: JobInfo): Promise<TopUpResult> {
  let result: TopUpResult;
  try {
    result = await replenishOnce(deps, payload, job);
  } catch (err) {
    // graphile-worker retries it (the job keeps waiting) unless this was the last attempt.
    if (job.lastAttempt) await followUpIfStillLow(deps, payload);
    throw err;
  }
  if (result.outcome !== "rescheduled") await followUpIfStillLow(deps, payload);
  return result;
}

async function followUpIfStillLow(deps: TopUpDeps, payload: ReplenishPayload): Promise<void> {
  // Without a provider nothing changes until the configuration does (tests only).
  if (payload.reason === "manual" || !deps.provider) return;
  const low = deps.settings.lowWatermark;
  const left = await availableUpTo(deps.sql, low);
  if (!(await stillLow(deps.sql, left, low))) return;
  await enqueueFollowUpReplenish(deps.sql, FOLLOW_UP_MS);
  deps.log.info({ reason: payload.reason, available: left, afterMs: FOLLOW_UP_MS }, "awb pool still low after a top-up; the next one waits");
}

async function replenishOnce(deps: TopUpDeps, payload: ReplenishPayload, job: JobInfo): Promise<TopUpResult> {
  const log = deps.log.child({ reason: payload.reason });
  // Before planning: a fresh request nothing will poll again must not count as numbers on the way.
  const lost = await failLostFreshRequests(deps.sql);
  if (lost.length > 0) log.warn({ requests: lost }, "awb fresh requests given up: no poll job left");
  if (!deps.provider) {
    // Nothing to retry until the configuration changes: end the job, quietly enough for a cron.
    log.warn("awb top-up skipped: no provider configured");
    return { outcome: "skipped", reason: "no provider configured" };
  }
  const mode = payload.mode ?? deps.settings.mode;
  const snapshot = await poolSnapshot(deps.sql);
  const need = topUpNeed(snapshot, deps.settings, payload);
  if (need === 0) {
    log.debug({ ...snapshot }, "awb top-up not needed");
    return { outcome: "skipped", reason: "not needed" };
  }
  log.info({ mode, need, ...snapshot }, "awb top-up starting");
  // Each request waits up to the provider's timeout, and a run makes several: a stopping
  // worker (15 s for running jobs) ends it between two, and the next top-up asks for the rest.
  const stopped = () => {
    if (deps.stopping?.aborted !== true) return false;
    log.info("awb top-up stopped with the worker; the next top-up continues");
    return true;
  };
  let count = 0;
  try {
    if (mode === "fresh") {
      const batches = freshBatches(need);
      let sent = 0;
      for (const n of batches) {
        if (sent > 0 && stopped()) break;
        count = n;
        await requestFresh(deps.sql, deps.provider, n, log);
        sent++;
      }
      return { outcome: "done", mode, requested: batches.slice(0, sent).reduce((a, b) => a + b, 0), requests: sent };
    }
    if (snapshot.availablePool + need > MAX_AWB_COUNT) {
      // The provider returns held-but-unused numbers first and caps a request at 100000,
      // so pool mode cannot hold more than 100000 unused numbers.
      log.warn({ need, availablePool: snapshot.availablePool }, "awb pool mode cannot exceed 100000 unused numbers; use AWB_MODE=fresh for a larger target");
    }
    let request = firstPoolCount(snapshot, need);
    let remaining = need;
    const total = { requested: 0, received: 0, added: 0 };
    for (let round = 1; ; round++) {
      count = request;
      const got = await requestPool(deps.sql, deps.provider, request, log);
      total.requested += request;
      total.received += got.received;
      total.added += got.added;
      remaining -= got.added;
      const knownUnused = remaining > 0 && got.added === 0 ? await lastKnownUnused(deps.sql) : null;
      // An answer with numbers left out says nothing sure about the provider's unused set
      // (those numbers may be in it): asking for more would only mint more, so stop here.
      const next =
        round < MAX_POOL_ROUNDS && !got.screenedOut ? nextPoolCount({ count: request, received: got.received, added: got.added }, remaining, knownUnused) : null;
      if (next === null) {
        if (remaining > 0) log.warn({ remaining, rounds: round }, "awb pool top-up stopped short of its goal; the next top-up continues");
        return { outcome: "done", mode, ...total };
      }
      if (stopped()) return { outcome: "done", mode, ...total };
      request = next;
    }
  } catch (err) {
    return await onTopUpFailure(deps, err, { mode, count, payload, job, log });
  }
}

/** An answer's numbers: the well-formed ones, once each, and what was wrong with the rest. */
export interface ScreenedNumbers {
  numbers: string[];
  /** Why some were left out (null: none was): shown as the request's last_error. */
  problem: string | null;
}

/**
 * Keeps the usable numbers (USABLE_AWB_NUMBER: 8 to 40 capital letters and digits, of
 * which the documented `SF` + 10 digits + 3 letters is one form), each once. Anything
 * else (blank, padded, truncated, lower-case, punctuated) is never stored and so never
 * handed out; a number repeated within one answer counts once. What was left out
 * is named, so that it shows on the request in GET /v1/awb/pool and the console.
 */
export function screenAwbNumbers(raw: readonly string[]): ScreenedNumbers {
  const seen = new Set<string>();
  const malformed: string[] = [];
  let repeated = 0;
  for (const n of raw) {
    if (!USABLE_AWB_NUMBER.test(n)) malformed.push(n);
    else if (seen.has(n)) repeated++;
    else seen.add(n);
  }
  const parts: string[] = [];
  if (malformed.length > 0) {
    const sample = malformed.slice(0, 3).map((n) => JSON.stringify(n.length > 40 ? `${headOf(n, 40)}…` : n));
    parts.push(`${malformed.length} not usable as AWB numbers, 8 to 40 capital letters and digits (${sample.join(", ")}${malformed.length > 3 ? ", …" : ""})`);
  }
  if (repeated > 0) parts.push(`${repeated} repeated within the answer`);
  const problem = parts.length > 0 ? `the provider's answer had numbers left out: ${parts.join("; ")}` : null;
  return { numbers: [...seen], problem };
}

/** One replenishment call; its numbers and its record in one transaction. */
async function requestPool(sql: Sql, provider: ProviderClient, count: number, log: Logger): Promise<{ received: number; added: number; screenedOut: boolean }> {
  const started = performance.now();
  const answer = await provider.generatePoolAwbs(count);
  const called = performance.now();
  const screened = screenAwbNumbers(answer.awb_numbers);
  const received = screened.numbers.length;
  const added = await sql.begin(async (tx) => {
    const n = await insertAwbNumbers(tx, screened.numbers, { source: "pool", requestId: null });
    await tx`
      insert into awb_requests (mode, status, count, received, added, last_error, completed_at)
      values ('pool', 'completed', ${count}, ${received}, ${n}, ${screened.problem}, now())`;
    return n;
  });
  if (screened.problem !== null) log.warn({ count, problem: screened.problem }, "awb pool answer had unusable numbers");
  log.info(
    { count, received, added, providerMs: Math.round(called - started), insertMs: Math.round(performance.now() - called) },
    "awb pool numbers received",
  );
  return { received, added, screenedOut: screened.problem !== null };
}

/**
 * One fresh request: recorded as pending before it is sent (request_id still null), then
 * given the provider's request_id with its first poll scheduled `delay_time` later. The
 * provider offers no way to find a request again without its request_id, so an answer
 * lost on the way (a timeout, a 5xx that may have acted, the worker stopped before
 * storing it) cannot be collected: the row says so instead of the request vanishing
 * (here, or later in failLostFreshRequests). A call that certainly did nothing leaves no row.
 */
async function requestFresh(sql: Sql, provider: ProviderClient, count: number, log: Logger): Promise<void> {
  const [row] = await sql<{ id: number }[]>`
    insert into awb_requests (mode, status, count) values ('fresh', 'pending', ${count}) returning id::int`;
  const id = row!.id;
  let accepted;
  try {
    accepted = await provider.requestFreshAwbs({ awb_count: count, request_type: "forward" });
  } catch (err) {
    if (err instanceof ProviderError && err.delivery === "ambiguous") {
      await failRequest(sql, id, `${ANSWER_LOST}: ${describeProviderError(err)}`);
      shownOnItsRequest.add(err);
      log.warn({ id, count, error: describeProviderError(err) }, "awb fresh request's answer lost: its numbers cannot be collected");
    } else {
      await sql`delete from awb_requests where id = ${id} and request_id is null`;
    }
    throw err;
  }
  const delayMs = firstPollDelayMs(accepted.delay_time);
  const revived = await sql.begin(async (tx) => {
    // Pending still, or marked failed meanwhile as an answer lost: a runner replaced while
    // this call was out has its jobs unlocked, and a top-up run then takes this row for one
    // whose run stopped (failLostFreshRequests). The answer came after all: its numbers can
    // be collected, so the request is pending again and polled.
    const [prior] = await tx<{ status: string }[]>`
      select status from awb_requests where id = ${id} for update`;
    if (!prior) return false;
    await tx`
      update awb_requests
      set request_id = ${accepted.request_id}, status = 'pending', last_error = null, completed_at = null,
          next_poll_at = now() + ${delayMs}::int * interval '1 millisecond'
      where id = ${id} and request_id is null`;
    await schedulePoll(tx, id, delayMs);
    return prior.status !== "pending";
  });
  if (revived) log.warn({ id, requestId: accepted.request_id }, "awb fresh request taken for lost was answered after all: polling it");
  log.info({ id, requestId: accepted.request_id, count, delayTime: accepted.delay_time }, "awb fresh request accepted");
}

const ANSWER_LOST = "the provider's answer was lost, so its request_id is unknown and any numbers it generates cannot be collected";

/** Failures already recorded on the request they ended (a fresh request whose answer was lost): no second row for them. */
const shownOnItsRequest = new WeakSet<ProviderError>();

async function onTopUpFailure(
  deps: TopUpDeps,
  err: unknown,
  ctx: { mode: "pool" | "fresh"; count: number; payload: ReplenishPayload; job: JobInfo; log: Logger },
): Promise<TopUpResult> {
  if (!(err instanceof ProviderError)) throw err;
  const error = describeProviderError(err);
  if (!err.retryable || ctx.job.lastAttempt) {
    const message = err.retryable ? `gave up after ${ctx.job.attempts} attempts: ${error}` : error;
    // A fresh request whose answer was lost already shows as failed, saying so: a row of
    // its own for the give-up would show two requests where one was sent.
    if (!shownOnItsRequest.has(err)) {
      await deps.sql`
        insert into awb_requests (mode, status, count, last_error, completed_at)
        values (${ctx.mode}, 'failed', ${ctx.count}, ${message}, now())`;
    }
    ctx.log.warn({ err, count: ctx.count }, "awb top-up failed");
    if (err.retryable) throw err; // graphile-worker records the job as failed for good too
    return { outcome: "failed", error: message };
  }
  if (err.retryAfterMs !== undefined && ctx.payload.reschedules < MAX_RETRY_AFTER_RESCHEDULES) {
    await rescheduleReplenish(deps.sql, ctx.payload, err.retryAfterMs, ctx.job.key);
    ctx.log.info({ afterMs: err.retryAfterMs, error }, "awb top-up put off for the provider's Retry-After");
    return { outcome: "rescheduled", afterMs: err.retryAfterMs };
  }
  throw err;
}

// ---------------------------------------------------------------- fresh polling

type PendingRow = Pick<AwbRequestRow, "id" | "request_id" | "status" | "polls"> & { age_ms: number };

export async function pollFresh(deps: TopUpDeps, payload: PollPayload, job: JobInfo): Promise<TopUpResult> {
  const log = deps.log.child({ request: payload.request });
  const [row] = await deps.sql<PendingRow[]>`
    select id, request_id, status, polls, (extract(epoch from now() - created_at) * 1000)::float8 as age_ms
    from awb_requests where id = ${payload.request} and mode = 'fresh'`;
  if (!row || row.status !== "pending" || row.request_id === null) {
    return { outcome: "skipped", reason: row ? `request is ${row.status}` : "no such request" };
  }
  if (!deps.provider) {
    await failRequest(deps.sql, row.id, "no provider configured");
    log.warn("awb poll gave up: no provider configured");
    return { outcome: "failed", error: "no provider configured" };
  }
  let answer;
  try {
    answer = await deps.provider.pollFreshAwbs(row.request_id);
  } catch (err) {
    if (!(err instanceof ProviderError)) throw err;
    const error = describeProviderError(err);
    if (err.retryable && job.lastAttempt && !pollGivesUp(0, row.age_ms)) {
      // The provider is still generating (or has finished) this batch and only its poll
      // keeps failing: failing the request would lose numbers it can still hand over.
      // A new poll job, at the longest poll interval, until the give-up window ends.
      const afterMs = nextPollDelayMs(MAX_POLLS, undefined);
      await deps.sql.begin(async (tx) => {
        await tx`update awb_requests set next_poll_at = now() + ${afterMs}::int * interval '1 millisecond' where id = ${row.id}`;
        await schedulePoll(tx, row.id, afterMs);
      });
      log.warn({ err, afterMs }, "awb poll keeps failing; polling again later");
      return { outcome: "rescheduled", afterMs };
    }
    if (!err.retryable || job.lastAttempt) {
      const message = err.retryable ? `gave up after ${job.attempts} attempts: ${error}` : error;
      await failRequest(deps.sql, row.id, message);
      log.warn({ err }, "awb poll failed");
      if (err.retryable) throw err;
      return { outcome: "failed", error: message };
    }
    if (err.retryAfterMs !== undefined && payload.reschedules < MAX_RETRY_AFTER_RESCHEDULES) {
      const afterMs = err.retryAfterMs;
      await deps.sql.begin(async (tx) => {
        await tx`update awb_requests set next_poll_at = now() + ${afterMs}::int * interval '1 millisecond' where id = ${row.id}`;
        await schedulePoll(tx, row.id, afterMs, payload.reschedules + 1);
      });
      return { outcome: "rescheduled", afterMs };
    }
    throw err;
  }

  const hint = answer.delay_time;
  const screened = screenAwbNumbers(answer.awb_numbers);
  const numbers = screened.numbers;
  if (screened.problem !== null) log.warn({ requestId: row.request_id, problem: screened.problem }, "awb fresh answer had unusable numbers");
  // Whatever the provider returned is stored in the transaction that records the poll:
  // an answer is never half-applied, and numbers never lost to a later failure.
  const result = await deps.sql.begin(async (tx): Promise<TopUpResult> => {
    const [locked] = await tx<{ status: string; polls: number; age_ms: number }[]>`
      select status, polls, (extract(epoch from now() - created_at) * 1000)::float8 as age_ms
      from awb_requests where id = ${row.id} for update`;
    const added = await insertAwbNumbers(tx, numbers, { source: "fresh", requestId: row.request_id });
    const foreign = added < numbers.length ? await heldFromElsewhere(tx, numbers, row.request_id!) : 0;
    const held = `${foreign} numbers the pool already held from elsewhere (kept as they were: an allocated one stays allocated)`;
    const problem = foreign === 0 ? screened.problem : screened.problem === null ? `the provider's answer had ${held}` : `${screened.problem}; and ${held}`;
    if (foreign > 0) log.warn({ requestId: row.request_id, foreign }, "awb fresh answer repeats numbers the pool already held");
    if (locked?.status !== "pending") {
      // Finished meanwhile (another run): keep the numbers, leave its outcome.
      await tx`update awb_requests set received = received + ${numbers.length}, added = added + ${added} where id = ${row.id}`;
      return { outcome: "skipped", reason: `request is ${locked?.status ?? "gone"}` };
    }
    const polls = locked.polls + 1;
    const progress = tx`received = received + ${numbers.length}, added = added + ${added}, polls = ${polls}`;
    if (!answer.retry_flag) {
      if (numbers.length === 0) {
        const error = `provider finished with status ${answer.status} and no numbers` + (screened.problem === null ? "" : ` (${screened.problem})`);
        await tx`update awb_requests set ${progress}, status = 'failed', last_error = ${error}, next_poll_at = null, completed_at = now() where id = ${row.id}`;
        return { outcome: "failed", error };
      }
      await tx`update awb_requests set ${progress}, status = 'completed', last_error = coalesce(${problem}, last_error), next_poll_at = null, completed_at = now() where id = ${row.id}`;
      return { outcome: "done", mode: "fresh", requested: numbers.length, requests: 1 };
    }
    if (pollGivesUp(polls, locked.age_ms)) {
      const error = `gave up after ${polls} polls: still ${answer.status}`;
      await tx`update awb_requests set ${progress}, status = 'failed', last_error = ${error}, next_poll_at = null, completed_at = now() where id = ${row.id}`;
      return { outcome: "failed", error };
    }
    const delayMs = nextPollDelayMs(polls, hint);
    await tx`
      update awb_requests set ${progress}, last_error = coalesce(${problem}, last_error), next_poll_at = now() + ${delayMs}::int * interval '1 millisecond'
      where id = ${row.id}`;
    await schedulePoll(tx, row.id, delayMs);
    return { outcome: "rescheduled", afterMs: delayMs };
  });
  const level = result.outcome === "failed" ? "warn" : "info";
  log[level]({ requestId: row.request_id, status: answer.status, received: numbers.length, ...result }, "awb fresh request polled");
  return result;
}

async function failRequest(sql: Sql | TransactionSql, id: number, error: string): Promise<void> {
  await sql`
    update awb_requests set status = 'failed', last_error = ${error}, next_poll_at = null, completed_at = now()
    where id = ${id} and status = 'pending'`;
}

/**
 * Marks failed the fresh requests still pending past the poll give-up window whose poll
 * job is gone (it used up its attempts on an error that is not the provider's, or was
 * removed): nothing will ever poll them again, and GET /v1/awb/pool should say so. One
 * whose poll job still waits or runs is left to it (pollGivesUp ends it on its next
 * PENDING answer; a final answer still stores its numbers). Returns the ids marked.
 */
async function failLostFreshRequests(sql: Sql): Promise<number[]> {
  const error = `no poll job left and still pending after ${MAX_POLL_AGE_MS / 60_000} min; given up`;
  const rows = await sql<{ id: number }[]>`
    update awb_requests r
    set status = 'failed', last_error = ${error}, next_poll_at = null, completed_at = now()
    where r.mode = 'fresh' and r.status = 'pending' and r.request_id is not null
      and r.created_at <= now() - ${MAX_POLL_AGE_MS}::int * interval '1 millisecond'
      and not exists (
        select 1 from graphile_worker.jobs j
        where j.key = ${POLL_KEY_PREFIX}::text || r.id::text
          and (j.locked_at is not null or j.attempts < j.max_attempts))
    returning r.id::int`;
  // Sent, but its answer never stored (the worker stopped during the call): every AWB job
  // runs in the one `awb` queue, so no other run is normally still waiting for that answer.
  // One can be, when its runner was replaced and its job unlocked mid-call: should that
  // answer still come, requestFresh makes the request pending again.
  const unanswered = await sql<{ id: number }[]>`
    update awb_requests
    set status = 'failed', last_error = ${`${ANSWER_LOST} (the top-up stopped before storing it)`}, completed_at = now()
    where mode = 'fresh' and status = 'pending' and request_id is null
    returning id::int`;
  return [...rows, ...unanswered].map((r) => r.id);
}
