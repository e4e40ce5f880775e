/**
 * Where the database is: DATABASE_URL, or the embedded PostgreSQL under the data
 * directory. Several tracklane processes on one machine share one embedded server: the
 * first starts it and owns it; later ones (and `npm run rebuild`) connect to it; a server
 * left behind by a killed owner is adopted rather than restarted. The server stops with
 * the last process using it, not under the others (DATA_DIR/pg-users/: one file per pid).
 */
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import postgres from "postgres";
import { embeddedUrl, startEmbeddedPostgres } from "../db/embedded.ts";
import type { EmbeddedServer } from "../db/embedded.ts";
import { describeTarget } from "../db/url.ts";
import type { Logger } from "../logger.ts";

export interface ResolvedDatabase {
  url: string;
  /**
   * Stops the embedded server when no other tracklane process uses it any more (this one
   * owned it, or its owner left it running for the others); otherwise does nothing.
   */
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

/** The postmaster a data directory's postmaster.pid names (one that died unstopped leaves it), alive or not. */
function recordedPostmaster(dataDir: string): { pid: number; port: number } | null {
  const file = join(dataDir, "postmaster.pid");
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, "utf8").split("\n");
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || port <= 0) return null;
  return { pid, port };
}

/** The running postmaster of a data directory: its pid and port, if it is alive. */
function runningPostmaster(dataDir: string): { pid: number; port: number } | null {
  const recorded = recordedPostmaster(dataDir);
  return recorded !== null && alive(recorded.pid) ? recorded : null;
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

/** DATA_DIR/pg-users/: a file named by the pid of each process using the embedded server. */
const USERS = "pg-users";

function addUser(dataDir: string): void {
  mkdirSync(join(dataDir, USERS), { recursive: true });
  writeFileSync(join(dataDir, USERS, String(process.pid)), "");
}

/** The other live processes using the server; the files of dead ones (killed) are removed. */
function otherUsers(dataDir: string): number[] {
  let names: string[];
  try {
    names = readdirSync(join(dataDir, USERS));
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const name of names) {
    const pid = Number(name);
    if (pid === process.pid) continue;
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) pids.push(pid);
    else rmSync(join(dataDir, USERS, name), { force: true });
  }
  return pids;
}

function ownerOf(ownerFile: string): number {
  return existsSync(ownerFile) ? Number(readFileSync(ownerFile, "utf8")) : NaN;
}

/** Under the start lock: share the server another process owns, adopt one left behind, or start one. */
async function resolveEmbedded(options: { dataDir: string; log: Logger; avoidPorts?: readonly number[] | undefined }): Promise<ResolvedDatabase> {
  const dataDir = join(options.dataDir, "pg");
  const ownerFile = join(options.dataDir, "pg-owner.pid");
  const running = runningPostmaster(dataDir);
  const owner = ownerOf(ownerFile);
  const urlFor = (port: number) => (db: string) => embeddedUrl(port, db);

  /**
   * This process is done with the server (under the start lock, so that none starts to use
   * it meanwhile). Others still using it keep it: its owner leaves it running (no longer
   * restarting it should it exit), and the last of them stops it, or a process starting
   * later adopts it. Stopped under them, they were left without a database, and a new
   * owner would start it on another port, where they never looked.
   */
  const release = (server?: EmbeddedServer) => async () => {
    const letGo = await holdStartLock(options.dataDir, options.log);
    try {
      rmSync(join(options.dataDir, USERS, String(process.pid)), { force: true });
      const others = otherUsers(options.dataDir);
      const ownerNow = ownerOf(ownerFile);
      const owned = ownerNow === process.pid;
      if (others.length > 0) {
        if (owned) {
          server?.leave();
          options.log.info({ processes: others }, "embedded PostgreSQL left running for the other tracklane processes using it; the last of them stops it");
        }
        return;
      }
      if (!owned && Number.isInteger(ownerNow) && alive(ownerNow)) return; // its owner stops it
      if (server) {
        await server.stop();
        return;
      }
      const postmaster = runningPostmaster(dataDir);
      if (postmaster === null) return;
      process.kill(postmaster.pid, "SIGINT");
      for (let i = 0; i < 100 && alive(postmaster.pid); i++) await new Promise((r) => setTimeout(r, 100));
      options.log.info("embedded PostgreSQL stopped");
    } finally {
      letGo();
    }
  };

  if (running && Number.isInteger(owner) && owner !== process.pid && alive(owner)) {
    // Another tracklane process owns the server: share it.
    const url = urlFor(running.port);
    await ensureDatabase(url);
    addUser(options.dataDir);
    return { url: url(DATABASE), release: release(), description: `embedded PostgreSQL in ${dataDir} (shared)` };
  }
  if (running) {
    // Left behind by an owner that was killed, or left running by one that stopped while
    // others used it: adopt it and stop it when we stop, unless others use it then.
    options.log.warn({ pid: running.pid }, "adopting an embedded PostgreSQL left running by a stopped process");
    writeFileSync(ownerFile, String(process.pid));
    const url = urlFor(running.port);
    await ensureDatabase(url);
    addUser(options.dataDir);
    return { url: url(DATABASE), description: `embedded PostgreSQL in ${dataDir}`, release: release() };
  }
  // A server that died unstopped (killed, or crashed with no owner left to restart it) comes
  // back on its port, if free: processes still using it (a rolling deploy) look there.
  const server = await startEmbeddedPostgres(dataDir, options.log, { avoid: options.avoidPorts ?? [], prefer: recordedPostmaster(dataDir)?.port });
  writeFileSync(ownerFile, String(process.pid));
  await ensureDatabase(server.url);
  addUser(options.dataDir);
  return { url: server.url(DATABASE), release: release(server), description: `embedded PostgreSQL in ${dataDir}` };
}
