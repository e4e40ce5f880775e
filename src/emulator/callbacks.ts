import type { Logger } from "../logger.ts";
import { redactPath } from "../logger.ts";
import type { Clock } from "./clock.ts";
import type { Faults } from "./faults.ts";
import type { EmulatorState } from "./state.ts";

/**
 * Outgoing callbacks: POSTed as JSON to every registered URL, after the API answer that
 * caused them, one at a time in the order they arose (so tests see a stable order unless
 * a reorder fault says otherwise). A delivery that gets no 2xx is sent again after each of
 * `retryDelaysMs` while the `callback_retries` switch is on (the spec does not say whether
 * the provider retries; the real one is reported not to, PRODUCT.md §10), and dropped
 * after that attempt while it is off. Every attempt is logged.
 */

export type CallbackKind = "status" | "location";

export interface DeliveryLogEntry {
  id: number;
  url: string;
  kind: CallbackKind;
  payload: Record<string, unknown>;
  /** HTTP status of the attempt; null when none (network error, dropped). */
  status: number | null;
  error?: string;
  attempt: number;
  at: string;
  /** dropped, duplicate (the extra copy) or reordered (sent after a later callback). */
  fault?: "dropped" | "duplicate" | "reordered";
}

export interface CallbackDispatcher {
  /** `orderStatus` is what callback faults match `order_status` against: not every shape has that field. */
  enqueue(kind: CallbackKind, payload: Record<string, unknown>, orderStatus?: string): void;
  /** Resolves once nothing is queued, in flight or waiting for a retry (held-back callbacks aside). */
  idle(): Promise<void>;
  /** Sends held-back (reordered) callbacks now; returns how many. */
  releaseHeld(): number;
  deliveries(): DeliveryLogEntry[];
  pending(): number;
  held(): number;
  reset(): void;
  close(): void;
}

interface Job {
  url: string;
  kind: CallbackKind;
  payload: Record<string, unknown>;
  attempt: number;
  fault?: DeliveryLogEntry["fault"];
}

interface Held {
  kind: CallbackKind;
  payload: Record<string, unknown>;
}

export interface CallbackOptions {
  timeoutMs: number;
  retryDelaysMs: number[];
  reorderHoldMs: number;
}

const MAX_LOG = 10_000;

export function createCallbackDispatcher(
  state: EmulatorState,
  clock: Clock,
  faults: Faults,
  options: CallbackOptions,
  logger: Logger | undefined,
  /** The `callback_retries` switch now (behaviour.ts), read when a delivery fails. */
  retries: () => boolean,
): CallbackDispatcher {
  const queue: Job[] = [];
  let held: Held[] = [];
  let holdTimer: NodeJS.Timeout | null = null;
  const retryTimers = new Set<NodeJS.Timeout>();
  let log: DeliveryLogEntry[] = [];
  let nextId = 1;
  let running = false;
  let closed = false;
  let waiters: (() => void)[] = [];

  function record(entry: Omit<DeliveryLogEntry, "id" | "at">): void {
    log.push({ id: nextId++, at: clock.iso(), ...entry });
    if (log.length > MAX_LOG) log.splice(0, log.length - MAX_LOG);
  }

  function isIdle(): boolean {
    return queue.length === 0 && !running && retryTimers.size === 0;
  }

  function wakeWaiters(): void {
    if (!isIdle()) return;
    const ready = waiters;
    waiters = [];
    for (const w of ready) w();
  }

  function push(kind: CallbackKind, payload: Record<string, unknown>, fault?: DeliveryLogEntry["fault"]): void {
    for (const url of state.callbackUrls) queue.push({ url, kind, payload, attempt: 1, fault });
  }

  function schedule(): void {
    if (running || closed || queue.length === 0) return;
    running = true;
    // After the current turn: the API answer that caused the callback goes out first.
    setTimeout(() => void pump(), 0);
  }

  /**
   * Runs detached from any request (`void pump()`): a throw here would be an unhandled
   * rejection, which ends the process. So a job that fails inside the emulator is logged
   * and given up, and the queue goes on.
   */
  async function pump(): Promise<void> {
    try {
      while (queue.length > 0 && !closed) {
        const job = queue.shift();
        if (!job) continue;
        try {
          await deliver(job);
        } catch (err) {
          reportBroken(err, job);
        }
      }
    } finally {
      running = false;
      wakeWaiters();
    }
  }

  function reportBroken(err: unknown, job: Job): void {
    const fields = { target: redactCallbackUrl(job.url), kind: job.kind, attempt: job.attempt };
    const message = "callback delivery failed inside the emulator: given up";
    if (logger) logger.error({ ...fields, err }, message);
    // Without a logger (library use) it still reaches stderr.
    else process.emitWarning(`${message} ${JSON.stringify(fields)}: ${err instanceof Error ? err.message : String(err)}`);
  }

  async function deliver(job: Job): Promise<void> {
    let status: number | null = null;
    let error: string | undefined;
    try {
      const res = await fetch(job.url, {
        method: "POST",
        headers: { "content-type": "application/json", "user-agent": "tracklane-provider-emulator" },
        body: JSON.stringify(job.payload),
        signal: AbortSignal.timeout(options.timeoutMs),
      });
      status = res.status;
      await res.arrayBuffer().catch(() => undefined);
    } catch (err) {
      error = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
    }
    record({ url: job.url, kind: job.kind, payload: job.payload, status, error, attempt: job.attempt, fault: job.fault });
    const ok = status !== null && status >= 200 && status <= 299;
    const target = redactCallbackUrl(job.url);
    if (ok) {
      logger?.debug({ target, status, attempt: job.attempt }, "callback delivered");
      return;
    }
    if (!retries()) {
      logger?.warn({ target, status, error, attempt: job.attempt }, "callback not accepted: dropped (callback_retries is off)");
      return;
    }
    const delay = options.retryDelaysMs[job.attempt - 1];
    logger?.warn({ target, status, error, attempt: job.attempt, retryInMs: delay ?? null }, "callback not accepted");
    if (delay === undefined || closed) return;
    const timer = setTimeout(() => {
      retryTimers.delete(timer);
      queue.push({ ...job, attempt: job.attempt + 1 });
      schedule();
      wakeWaiters();
    }, delay);
    retryTimers.add(timer);
  }

  function releaseHeld(): number {
    if (holdTimer) clearTimeout(holdTimer);
    holdTimer = null;
    const released = held;
    held = [];
    for (const h of released) push(h.kind, h.payload, "reordered");
    schedule();
    return released.length;
  }

  return {
    enqueue(kind, payload, orderStatus) {
      if (closed) return;
      const fault = faults.forCallback(kind, orderStatus);
      if (fault?.action === "drop") {
        for (const url of state.callbackUrls) record({ url, kind, payload, status: null, attempt: 0, fault: "dropped" });
        return;
      }
      if (fault?.action === "reorder") {
        held.push({ kind, payload });
        holdTimer ??= setTimeout(releaseHeld, options.reorderHoldMs);
        return;
      }
      push(kind, payload);
      if (fault?.action === "duplicate") push(kind, payload, "duplicate");
      if (held.length > 0) releaseHeld();
      schedule();
    },
    idle() {
      if (isIdle()) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
    releaseHeld,
    deliveries: () => [...log],
    pending: () => queue.length + (running ? 1 : 0) + retryTimers.size,
    held: () => held.length,
    reset() {
      queue.length = 0;
      held = [];
      if (holdTimer) clearTimeout(holdTimer);
      holdTimer = null;
      for (const t of retryTimers) clearTimeout(t);
      retryTimers.clear();
      log = [];
      wakeWaiters();
    },
    close() {
      closed = true;
      this.reset();
      running = false;
      wakeWaiters();
    },
  };
}

/** Callback URLs carry tracklane's secret in the path: log them redacted. */
function redactCallbackUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${redactPath(u.pathname)}`;
  } catch {
    return "[invalid url]";
  }
}
