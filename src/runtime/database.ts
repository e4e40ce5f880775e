/**
 * Where the database is: DATABASE_URL, or the embedded PostgreSQL under the data
 * directory. Several tracklane processes on one machine share one embedded server: the
 * first starts it and owns it; later ones (and `npm run rebuild`) connect to it; a server
 * left behind by a killed owner is adopted rather than restarted.
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
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

/** DATA_DIR/pg-start.lock: held by the process deciding whether to start, share or adopt the server. */
const START_LOCK = "pg-start.lock";
/** How long a start waits for another process's (initdb, then a server's recovery: its own limit is 120 s). */
const START_LOCK_WAIT_MS = 180_000;
/** A lock file still empty after this long was left by a process that died as it made it. */
const EMPTY_LOCK_STALE_MS = 5_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits for, then takes, the data directory's start lock; returns what lets it go.
 * Processes started together on one DATA_DIR (two `npm start`, a web and a worker) each
 * found no server running: both ran initdb into the same directory, or one started the
 * server on a cluster the other's initdb was still writing, and the other failed ("lock
 * file postmaster.pid already exists"); one arriving while the first's server came up
 * took it for a server left behind, adopted it, and stopped it under its owner when it
 * stopped. With the lock, the first starts the server and records itself as its owner
 * before the next one looks, and the next one shares it. A lock whose process is gone
 * (killed while starting) is taken over.
 */
async function holdStartLock(dataDir: string, log: Logger): Promise<() => void> {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, START_LOCK);
  const deadline = Date.now() + START_LOCK_WAIT_MS;
  let said = false;
  for (;;) {
    try {
      const fd = openSync(file, "wx", 0o600);
      try {
        writeSync(fd, String(process.pid));
      } finally {
        closeSync(fd);
      }
      return () => rmSync(file, { force: true });
    } catch (err) {
      if ((err as { code?: unknown }).code !== "EEXIST") throw err;
    }
    const holder = lockHolder(file);
    if (holder === "stale") {
      rmSync(file, { force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`another process (pid ${holder ?? "unknown"}) has been starting the embedded PostgreSQL in ${dataDir} for ${START_LOCK_WAIT_MS / 1000} s; stop it, or remove ${file} if no tracklane process is starting`);
    }
    if (!said) {
      log.info({ pid: holder }, "another tracklane process is starting the embedded PostgreSQL: waiting for it, then sharing it");
      said = true;
    }
    await sleep(100);
  }
}

/** The live process holding the start lock (null: its pid is being written), or "stale". */
function lockHolder(file: string): number | null | "stale" {
  let text: string;
  let age: number;
  try {
    text = readFileSync(file, "utf8").trim();
    age = Date.now() - statSync(file).mtimeMs;
  } catch (err) {
    if ((err as { code?: unknown }).code === "ENOENT") return null; // let go meanwhile: try again
    throw err;
  }
  if (text === "") return age > EMPTY_LOCK_STALE_MS ? "stale" : null;
  const pid = Number(text);
  // This very pid in a lock means an earlier life of it (a container restarted with the same pid).
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || !alive(pid)) return "stale";
  return pid;
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
  const letGo = await holdStartLock(options.dataDir, options.log);
  try {
    return await resolveEmbedded(options);
  } finally {
    letGo();
  }
}

/** Under the start lock: share the server another process owns, adopt one left behind, or start one. */
async function resolveEmbedded(options: { dataDir: string; log: Logger; avoidPorts?: readonly number[] | undefined }): Promise<ResolvedDatabase> {
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
