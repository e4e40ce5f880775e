/**
 * One log line per burst of database failures, not one per request or poll. While
 * PostgreSQL is away a web process refuses every callback (503) and graphile-worker fails
 * every poll: logged one by one, a minute's outage under load was tens of thousands of
 * identical lines, burying the one that said why. Here the first failure of a burst is
 * logged with its cause; the rest are counted, a line a minute says how many while it
 * lasts, and once none has come for `quietMs` a last line says how many there were and
 * for how long. An outage (escalateAfterMs) makes its "still failing" lines errors.
 */
import type { Logger } from "../logger.ts";

/** How long the database may fail before the lines saying so are errors: an outage, not a blip. */
export const DATABASE_OUTAGE_MS = 60_000;

export interface FailureBurstOptions {
  /** A burst ends this long after its last failure. */
  quietMs?: number;
  /** While a burst lasts, a line this often with the count since the previous one. */
  repeatMs?: number;
  /**
   * Once a burst has lasted this long, its "still failing" lines are errors, not warnings:
   * a blip (a restart, a failover) stays a warning, an outage pages whoever alerts on
   * errors. Unset: warnings throughout.
   */
  escalateAfterMs?: number;
}

interface Burst {
  startedAt: number;
  lastAt: number;
  lastLineAt: number;
  total: number;
  sinceLine: number;
  timer: NodeJS.Timeout;
}

export interface FailureBursts {
  /**
   * A failure of kind `key` (one burst per key: "database unavailable", a busy reason).
   * `fields` and `msg` are the line to write when it is the first of a burst.
   */
  failed(key: string, fields: Record<string, unknown>, msg: string): void;
}

export function failureBursts(log: Logger, what: string, options: FailureBurstOptions = {}): FailureBursts {
  const quietMs = options.quietMs ?? 10_000;
  const repeatMs = options.repeatMs ?? 60_000;
  const bursts = new Map<string, Burst>();

  const seconds = (ms: number) => Math.round(ms / 100) / 10;
  const check = (key: string) => {
    const burst = bursts.get(key);
    if (burst === undefined) return;
    const now = Date.now();
    const quietFor = now - burst.lastAt;
    if (quietFor < quietMs) {
      burst.timer = setTimeout(() => check(key), quietMs - quietFor).unref();
      return;
    }
    bursts.delete(key);
    if (burst.total > 1) {
      log.info(
        { failure: key, count: burst.total, seconds: seconds(burst.lastAt - burst.startedAt) },
        `${key}: ${burst.total} ${what} in ${seconds(burst.lastAt - burst.startedAt)} s, none for the last ${seconds(quietFor)} s`,
      );
    }
  };

  return {
    failed(key, fields, msg) {
      const now = Date.now();
      const burst = bursts.get(key);
      if (burst === undefined) {
        log.warn({ ...fields, failure: key, repeats: `counted, not logged one by one, until none for ${seconds(quietMs)} s` }, msg);
        bursts.set(key, { startedAt: now, lastAt: now, lastLineAt: now, total: 1, sinceLine: 0, timer: setTimeout(() => check(key), quietMs).unref() });
        return;
      }
      burst.lastAt = now;
      burst.total++;
      burst.sinceLine++;
      if (now - burst.lastLineAt >= repeatMs) {
        const escalated = options.escalateAfterMs !== undefined && now - burst.startedAt >= options.escalateAfterMs;
        log[escalated ? "error" : "warn"](
          { ...fields, failure: key, count: burst.sinceLine, seconds: seconds(now - burst.startedAt) },
          `${key}: still failing after ${seconds(now - burst.startedAt)} s, ${burst.sinceLine} more ${what} since the last line`,
        );
        burst.lastLineAt = now;
        burst.sinceLine = 0;
      }
    },
  };
}
