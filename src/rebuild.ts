/**
 * `npm run rebuild [-- --orders FROM-TO | --since ISO-TIME]`: re-derives orders from the event
 * log (all of them by default), reports progress, then exits. See projection/rebuild.ts.
 */
import { parseArgs } from "node:util";
import { createDatabase } from "./db/client.ts";
import { createLogger } from "./logger.ts";
import { rebuild } from "./projection/rebuild.ts";
import type { RebuildScope } from "./projection/rebuild.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";
import { loadConfigOrExit, requireMigrations } from "./runtime/startup-errors.ts";

const USAGE = "usage: npm run rebuild [-- --orders FROM-TO | --since 2026-11-01T00:00:00Z]";

/** The scope from the command line, or a sentence saying what is wrong with it. */
export function scopeOf(argv: readonly string[]): RebuildScope | string {
  let values: { orders?: string | undefined; since?: string | undefined };
  try {
    ({ values } = parseArgs({ args: [...argv], options: { orders: { type: "string" }, since: { type: "string" } }, strict: true }));
  } catch (err) {
    return `${err instanceof Error ? err.message : String(err)}\n${USAGE}`;
  }
  if (values.orders !== undefined && values.since !== undefined) return `--orders and --since exclude each other\n${USAGE}`;
  if (values.orders !== undefined) {
    const m = /^(\d{1,15})-(\d{1,15})$/.exec(values.orders);
    if (!m || Number(m[1]) < 1 || Number(m[1]) > Number(m[2])) return `--orders must be FROM-TO, order ids with FROM ≤ TO (found "${values.orders}")\n${USAGE}`;
    return { fromOrderId: Number(m[1]), toOrderId: Number(m[2]) };
  }
  if (values.since !== undefined) {
    const since = new Date(values.since);
    if (!/^\d{4}-\d{2}-\d{2}/.test(values.since) || Number.isNaN(since.getTime())) return `--since must be an ISO 8601 time (found "${values.since}")\n${USAGE}`;
    return { since };
  }
  return {};
}

async function main(): Promise<void> {
  const scope = scopeOf(process.argv.slice(2));
  if (typeof scope === "string") {
    console.error(scope);
    process.exit(2);
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
    try {
      const result = await rebuild(database.sql, scope, (p) => {
        // One line every few seconds, not one per page.
        if (Date.now() - lastReport < 5000) return;
        lastReport = Date.now();
        const of = { orders: "of the order rows", keys: "of the log's orders read", log: "of the log's events read" }[p.phase];
        const share = p.total > 0 ? ` (${Math.round((100 * p.read) / p.total)} % ${of})` : "";
        log.info({ ...p, seconds: Math.round((Date.now() - started) / 1000) }, `rebuild: ${p.phase}, ${p.orders} orders${share}`);
      });
      log.info({ ...result, scope, seconds: (Date.now() - started) / 1000 }, "rebuild finished");
    } finally {
      await database.close();
      await db.release();
    }
    log.flush();
  };
  await run().catch(fatal(log, config));
}

// Run as a program (npm run rebuild), not when a test imports scopeOf.
if (import.meta.main) void main();
