/**
 * Group work for set-based code: callers submit one item each and get one result, while
 * the items submitted together (or while a batch is in flight) run as one batch. The
 * worker runs many order__project jobs at once; this turns them into a few set-based
 * projection transactions instead of one transaction each (the same idea as the ingest
 * group commit, src/ingest/batcher.ts).
 */
import { isDatabaseUnavailable } from "../db/client.ts";

export interface BatchRunnerOptions {
  /** Most items in one batch. */
  batchMax: number;
  /** Batches running at once. */
  maxInFlight: number;
}

export interface BatchRunner<I, O> {
  run(item: I): Promise<O>;
}

interface Pending<I, O> {
  item: I;
  resolve: (result: O) => void;
  reject: (err: unknown) => void;
}

export function createBatchRunner<I, O>(runBatch: (items: I[]) => Promise<O[]>, options: BatchRunnerOptions): BatchRunner<I, O> {
  let buffer: Pending<I, O>[] = [];
  let inFlight = 0;
  let scheduled = false;

  const settle = async (batch: Pending<I, O>[]) => {
    const results = await runBatch(batch.map((p) => p.item));
    batch.forEach((p, i) => p.resolve(results[i]!));
  };

  const flush = async (batch: Pending<I, O>[]) => {
    inFlight++;
    try {
      await settle(batch);
    } catch (err) {
      if (batch.length > 1 && !isDatabaseUnavailable(err)) {
        // One failing item (or a deadlock) must not fail its batch-mates: run each alone,
        // so only the items that fail on their own fail (and their jobs retry).
        for (const p of batch) await settle([p]).catch(p.reject);
      } else {
        for (const p of batch) p.reject(err);
      }
    } finally {
      inFlight--;
      if (buffer.length > 0) schedule();
    }
  };

  const drain = () => {
    scheduled = false;
    while (buffer.length > 0 && inFlight < options.maxInFlight) {
      const batch = buffer.slice(0, options.batchMax);
      buffer = buffer.slice(batch.length);
      void flush(batch);
    }
  };

  const schedule = () => {
    if (scheduled || inFlight >= options.maxInFlight) return; // a finishing batch reschedules
    scheduled = true;
    // Let the items submitted in this turn of the event loop join the batch.
    setImmediate(drain);
  };

  return {
    run(item) {
      return new Promise<O>((resolve, reject) => {
        buffer.push({ item, resolve, reject });
        schedule();
      });
    },
  };
}
