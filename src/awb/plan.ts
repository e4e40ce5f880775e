/**
 * Top-up planning: how many numbers to ask the provider for, and when to poll. Pure
 * functions of what the database says, so every run re-plans from the facts (a retried
 * or duplicated job never over-asks because of what an earlier run intended).
 */
import { MAX_AWB_COUNT } from "../provider/schemas.ts";

export interface PoolSnapshot {
  /** Numbers ready to hand out. */
  available: number;
  /** Of those, numbers that came from the replenishment endpoint. */
  availablePool: number;
  /** Numbers promised by fresh requests still being generated (within the poll give-up window). */
  pendingFresh: number;
}

export interface PoolSettings {
  lowWatermark: number;
  target: number;
}

/**
 * How many numbers this top-up should add; 0 means nothing to do.
 *
 * An explicit count (POST /v1/awb/replenish) is taken as is. The cron, the allocation
 * trigger and a follow-up act only below the low watermark (or on an empty pool, so low=0 still refills);
 * an empty-pool or manual top-up fills to the target whatever the watermark. Numbers that
 * pending fresh requests will deliver count as already there: the cron must not ask again
 * every minute while a large batch is being generated.
 */
export function topUpNeed(s: PoolSnapshot, settings: PoolSettings, job: { reason: string; count?: number | undefined }): number {
  if (job.count !== undefined) return job.count;
  const automatic = job.reason === "cron" || job.reason === "allocation" || job.reason === "follow-up";
  if (automatic && !(s.available < settings.lowWatermark || s.available === 0)) return 0;
  return Math.max(0, settings.target - s.available - s.pendingFresh);
}

/**
 * Pool mode: the provider answers `count` numbers taken from the client's UNUSED numbers
 * first and mints only the rest. "Unused" is the provider's view: every number it ever
 * gave us by this endpoint that no shipment has used yet, so it includes all our
 * available pool numbers and any allocated number whose order has not used it at the
 * provider yet. Let U be that set. Asking for c gives max(0, c - |U|) numbers new to us.
 *
 * We know |U| >= availablePool (we hold those, unused), and in steady production
 * allocated numbers get used, so |U| ~ availablePool. The first request therefore asks
 * availablePool + need (= the target when every available number came from this
 * endpoint): "the target, not the deficit". Asking only the deficit would return our own
 * available numbers and add nothing; asking more than availablePool + need overshoots
 * the target whenever the provider has seen our allocated numbers used.
 *
 * When allocated numbers are still unused at the provider (the emulator until they are
 * marked used), the answer falls short, and the answer tells us by how much:
 * - some numbers were new (added > 0): the provider ran out of unused numbers and minted
 *   the rest, so U is now exactly what it returned; `received + remaining` is exact.
 * - nothing was new: |U| >= count. The last request that minted (`knownUnused`, its
 *   `received`) left U at exactly that size, and since then U has only shrunk (numbers
 *   used) or stayed (requests that minted nothing), so ask knownUnused + remaining: exact
 *   when none of those numbers has been used since, and otherwise over by the numbers
 *   used meanwhile. Without such a record (or if U outgrew it: someone else shares the
 *   credentials), double the request.
 * null: stop (done, or no request within the provider's limit can add a number).
 */
export function firstPoolCount(s: PoolSnapshot, need: number): number {
  return clamp(s.availablePool + need, 1, MAX_AWB_COUNT);
}

export function nextPoolCount(
  last: { count: number; received: number; added: number },
  remaining: number,
  knownUnused: number | null,
): number | null {
  if (remaining <= 0) return null;
  let floor: number;
  let wanted: number;
  if (last.added > 0) {
    floor = last.received;
    wanted = last.received + remaining;
  } else {
    floor = last.count;
    wanted = knownUnused !== null && knownUnused >= last.count ? knownUnused + remaining : 2 * last.count;
  }
  const next = Math.min(MAX_AWB_COUNT, Math.max(floor + 1, wanted));
  return next > floor ? next : null;
}

/** Rounds (provider calls) one pool top-up may make before leaving the rest to the next run. */
export const MAX_POOL_ROUNDS = 6;

/**
 * Fresh mode: numbers are always newly minted, so the need is exact. Split into requests
 * within the provider's limit (awb_count <= 100000), at most `MAX_FRESH_REQUESTS` per run
 * (10 x 100000 covers the largest allowed target).
 */
const MAX_FRESH_REQUESTS = 10;
export function freshBatches(need: number): number[] {
  const batches: number[] = [];
  let left = need;
  while (left > 0 && batches.length < MAX_FRESH_REQUESTS) {
    const n = Math.min(MAX_AWB_COUNT, left);
    batches.push(n);
    left -= n;
  }
  return batches;
}

/**
 * Polling a fresh request: the first poll `delay_time` after the request; while the
 * provider answers PENDING with retry_flag, again after the delay_time it sends with that
 * answer if any (however long: polling sooner than the provider asked only loads it), else
 * after a backoff (5 s, 10 s, 20 s ... 5 min); never sooner than 1 s.
 * Bounded: give up (request failed) after MAX_POLLS polls or MAX_POLL_AGE_MS.
 */
export const MAX_POLLS = 40;
/** Also the age past which a pending request no longer counts as numbers on the way (poolSnapshot). */
export const MAX_POLL_AGE_MS = 2 * 60 * 60_000;
const MIN_POLL_DELAY_MS = 1000;
const MAX_POLL_DELAY_MS = 5 * 60_000;

export function firstPollDelayMs(delayTimeSeconds: number): number {
  return clamp(Math.round(delayTimeSeconds * 1000), 0, MAX_POLL_AGE_MS);
}

export function nextPollDelayMs(polls: number, hintSeconds: number | undefined): number {
  if (hintSeconds !== undefined) return clamp(Math.round(hintSeconds * 1000), MIN_POLL_DELAY_MS, MAX_POLL_AGE_MS);
  return clamp(Math.round(5000 * 2 ** Math.max(0, polls - 1)), MIN_POLL_DELAY_MS, MAX_POLL_DELAY_MS);
}

export function pollGivesUp(polls: number, ageMs: number): boolean {
  return polls >= MAX_POLLS || ageMs >= MAX_POLL_AGE_MS;
}

function clamp(n: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, n));
}
