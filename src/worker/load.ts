/**
 * How hard ingestion is pushing, as this runner sees it: events projected per second over
 * the last two seconds. Work that can wait (notification deliveries) yields to a burst.
 */

const BUCKET_MS = 250;
const BUCKETS = 8;

export interface LoadMeter {
  /** `events` were just projected. */
  note(events: number): void;
  /** Events projected per second over the last two seconds. */
  perSecond(): number;
}

export function createLoadMeter(now: () => number = Date.now): LoadMeter {
  const counts = new Array<number>(BUCKETS).fill(0);
  let head = Math.floor(now() / BUCKET_MS);
  /** Moves the ring to the current bucket, zeroing the ones skipped. */
  const advance = (): number => {
    const current = Math.floor(now() / BUCKET_MS);
    for (let b = head + 1; b <= current && b <= head + BUCKETS; b++) counts[b % BUCKETS] = 0;
    if (current > head) head = current;
    return current;
  };
  return {
    note(events) {
      const current = advance();
      counts[current % BUCKETS]! += events;
    },
    perSecond() {
      advance();
      return counts.reduce((a, b) => a + b, 0) / ((BUCKETS * BUCKET_MS) / 1000);
    },
  };
}
