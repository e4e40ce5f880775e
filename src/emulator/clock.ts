/**
 * The emulator's movable clock: real time plus an offset that only grows through
 * `advance`. Token expiry, re-attempt schedules, AWB readiness and callback event times all
 * read it, so a test can jump an hour ahead without waiting.
 */
export interface Clock {
  now(): number;
  iso(at?: number): string;
  /** Throws a RangeError for a negative step or one that would pass MAX_AHEAD_MS. */
  advance(ms: number): void;
  offsetMs(): number;
  reset(): void;
}

/**
 * How far ahead of real time the clock, and a re-attempt from its now, may go: 100 years.
 * Far beyond any test's need, and far inside JavaScript's Date range (about 275,000 years),
 * so every time the emulator holds can be written as an ISO string.
 */
export const MAX_AHEAD_MS = 100 * 365.25 * 86_400_000;

export function createClock(realNow: () => number = Date.now): Clock {
  let offset = 0;
  const now = () => realNow() + offset;
  return {
    now,
    iso: (at) => new Date(at ?? now()).toISOString(),
    advance(ms) {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError("the clock only moves forward");
      if (offset + ms > MAX_AHEAD_MS) throw new RangeError("the clock moves at most 100 years ahead of real time");
      offset += ms;
    },
    offsetMs: () => offset,
    reset() {
      offset = 0;
    },
  };
}
