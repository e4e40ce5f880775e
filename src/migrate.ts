/** Procfile `release` / `npm run migrate`: applies all migrations, then exits. */
import { markPendingMaybeSent } from "./commands/store.ts";
import { createPool } from "./db/client.ts";
import { runMigrations } from "./db/migrate.ts";
import { ensureEventPartitions } from "./events/partitions.ts";
import { createLogger } from "./logger.ts";
import { resolveDatabase } from "./runtime/database.ts";
import { fatal } from "./runtime/lifecycle.ts";
import { commandLine } from "./runtime/cli.ts";
import { loadConfigOrExit } from "./runtime/startup-errors.ts";

const flags = commandLine(
  `usage: npm run migrate [-- --after-restore]
  Applies the pending migrations to DATABASE_URL (or the embedded PostgreSQL), then exits:
  Procfile \`release\`, once per deploy. Safe to run again, and from two places at once.
  --after-restore: once, after restoring an older backup and before any worker starts:
  every command still pending in it may have been sent since the backup was taken, and
  is marked so (a place ends unconfirmed rather than being sent again; docs/operations.md,
  "Backups").`,
  { "after-restore": { type: "boolean" } },
);
const config = loadConfigOrExit();
const log = createLogger({ level: config.logLevel, format: config.logFormat });

/** The commands pending in a restored backup, marked as possibly sent (markPendingMaybeSent). */
async function markRestoredCommands(url: string): Promise<void> {
  const sql = createPool(url, 1, "tracklane-migrate");
  try {
    const marked = await markPendingMaybeSent(sql);
    const places = marked.filter((c) => c.kind === "place").length;
    if (marked.length === 0) {
      log.info("after restore: no command was pending; nothing to mark");
      return;
    }
    log.warn(
      { marked: marked.length, places, commands: marked.map((c) => c.id) },
      places > 0
        ? "after restore: pending commands marked as possibly sent; their places end unconfirmed (GET /v1/orders?placement=unconfirmed): look each up at the provider, then confirm or retry it"
        : "after restore: pending commands marked as possibly sent",
    );
  } finally {
    await sql.end();
  }
}

async function main() {
  const db = await resolveDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, log });
  try {
    await runMigrations(db.url, log);
    await ensureEventPartitions(db.url, config.events.partition, log);
    if (flags["after-restore"] === true) await markRestoredCommands(db.url);
  } finally {
    await db.release();
  }
  log.flush();
}

main().catch(fatal(log, config));
