/**
 * Where the database is: DATABASE_URL, or the embedded PostgreSQL under the data
 * directory. Several tracklane processes on one machine share one embedded server: the
 * first starts it and owns it; later ones (and `npm run rebuild`) connect to it; a server
 * left behind by a killed owner is adopted rather than restarted.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { embeddedUrl, startEmbeddedPostgres } from "../db/embedded.ts";
import { describeTarget } from "../db/url.ts";
import type { Logger } from "../logger.ts";

export interface ResolvedDatabase {
  url: string;
  /** Stops the embedded server when this process owns it; otherwise does nothing. */
  release(): Promise<void>;
  description: string;
}

const DATABASE = "tracklane";

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running postmaster of a data directory: its pid and port, if it is alive. */
function runningPostmaster(dataDir: string): { pid: number; port: number } | null {
  const file = join(dataDir, "postmaster.pid");
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, "utf8").split("\n");
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || !alive(pid)) return null;
  return { pid, port };
}

async function ensureDatabase(serverUrl: (db: string) => string): Promise<void> {
  const admin = postgres(serverUrl("postgres"), { max: 1, onnotice: () => {} });
  try {
    const rows = await admin`select 1 from pg_database where datname = ${DATABASE}`;
    if (rows.length === 0) await admin.unsafe(`create database ${DATABASE}`).catch((err: { code?: string }) => {
      if (err.code !== "42P04") throw err; // created meanwhile by another process
    });
  } finally {
    await admin.end();
  }
}

/**
 * `avoidPorts`: ports the caller will listen on (HTTP, the built-in emulator); a new
 * embedded server never takes one.
 */
export async function resolveDatabase(options: {
  databaseUrl: string | undefined;
  dataDir: string;
  log: Logger;
  avoidPorts?: readonly number[];
}): Promise<ResolvedDatabase> {
  if (options.databaseUrl) {
    // Where it connects (host and port, or a Unix socket), never who or with what password.
    const where = describeTarget(options.databaseUrl);
    return { url: options.databaseUrl, release: async () => {}, description: where === null ? "DATABASE_URL" : `DATABASE_URL (${where})` };
  }
  const dataDir = join(options.dataDir, "pg");
  const ownerFile = join(options.dataDir, "pg-owner.pid");
  const running = runningPostmaster(dataDir);
  const owner = existsSync(ownerFile) ? Number(readFileSync(ownerFile, "utf8")) : NaN;
  const urlFor = (port: number) => (db: string) => embeddedUrl(port, db);

  if (running && Number.isInteger(owner) && owner !== process.pid && alive(owner)) {
    // Another tracklane process owns the server: share it.
    const url = urlFor(running.port);
    await ensureDatabase(url);
    return { url: url(DATABASE), release: async () => {}, description: `embedded PostgreSQL in ${dataDir} (shared)` };
  }
  if (running) {
    // Left behind by an owner that was killed: adopt it and stop it when we stop.
    options.log.warn({ pid: running.pid }, "adopting an embedded PostgreSQL left running by a stopped process");
    writeFileSync(ownerFile, String(process.pid));
    const url = urlFor(running.port);
    await ensureDatabase(url);
    return {
      url: url(DATABASE),
      description: `embedded PostgreSQL in ${dataDir}`,
      release: async () => {
        process.kill(running.pid, "SIGINT");
        for (let i = 0; i < 100 && alive(running.pid); i++) await new Promise((r) => setTimeout(r, 100));
      },
    };
  }
  const server = await startEmbeddedPostgres(dataDir, options.log, { avoid: options.avoidPorts ?? [] });
  writeFileSync(ownerFile, String(process.pid));
  await ensureDatabase(server.url);
  return { url: server.url(DATABASE), release: () => server.stop(), description: `embedded PostgreSQL in ${dataDir}` };
}
