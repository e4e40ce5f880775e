/**
 * The emulator's movable clock: real time plus an offset that only grows through
 * `advance`. Token expiry, re-attempt schedules, AWB readiness and callback event times all
 * read it, so a test can jump an hour ahead without waiting.
 */
export interface Clock {
  now(): number;
  iso(at?: number): string;
  advance(ms: number): void;
  offsetMs(): number;
  reset(): void;
}

export function createClock(realNow: () => number = Date.now): Clock {
  let offset = 0;
  const now = () => realNow() + offset;
  return {
    now,
    iso: (at) => new Date(at ?? now()).toISOString(),
    advance(ms) {
      if (!Number.isFinite(ms) || ms < 0) throw new RangeError("the clock only moves forward");
      offset += ms;
    },
    offsetMs: () => offset,
    reset() {
      offset = 0;
    },
  };
}
