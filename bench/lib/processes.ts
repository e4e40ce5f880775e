/**
 * Child processes of the benchmark: tracklane's own entry points (`src/web.ts`,
 * `src/worker.ts`), the load generator and the baselines, each a separate Node process.
 */
import { fork, spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { createWriteStream, readFileSync } from "node:fs";
import { resolve } from "node:path";

export const ROOT = resolve(import.meta.dirname, "../..");

/** Every child still running, so an interrupted benchmark can stop them all. */
const live = new Set<ChildProcess>();

function track(child: ChildProcess): ChildProcess {
  live.add(child);
  child.once("exit", () => live.delete(child));
  return child;
}

/** Set once the benchmark is interrupted: waits give up. */
export const interruption = new AbortController();

/** SIGTERM to every child still running (on Ctrl-C). */
function stopAllChildren(): void {
  interruption.abort();
  for (const child of live) child.kill("SIGTERM");
}

/** Ctrl-C (or SIGTERM) stops the children, so the run fails and cleans up; twice exits now. */
export function stopChildrenOnSignal(label: string): void {
  let interrupted = false;
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.on(signal, () => {
      if (interrupted) process.exit(130);
      interrupted = true;
      console.error(`${label}: ${signal}, stopping`);
      stopAllChildren();
    });
  }
}

export interface ServiceProcess {
  name: string;
  pid: number;
  /** The first log line (parsed pino JSON) whose msg matched `readyMsg`. */
  ready: Record<string, unknown>;
  /** Largest VmRSS seen by the sampler and the kernel's VmHWM, in MiB. */
  peakRssMiB(): number;
  stop(): Promise<void>;
}

/** VmRSS or VmHWM of a process, in MiB (NaN once it is gone). */
export function procMemMiB(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status);
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Proportional set size of a process, in MiB (NaN once it is gone): its private memory
 * plus its share of pages it shares with others (the node binary and libraries, ~30 MiB
 * of each node process's RSS). The sum over processes is what they take together.
 */
export function procPssMiB(pid: number): number {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU time (user + system) a process has used, in seconds (0 once it is gone). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/**
 * The node flags of the package's service scripts (`"web": "node <flags> src/web.ts"`), so
 * that the benchmark runs the services exactly as `npm run web` and `npm start` do.
 */
export const SERVICE_NODE_ARGS: string[] = (() => {
  const pkg = JSON.parse(readFileSync(resolve(ROOT, "package.json"), "utf8")) as { scripts: Record<string, string> };
  // The last command of the script (the ones before it check the Node version), from
  // after its `node` up to the script: `exec node <flags> src/web.ts`.
  const words = pkg.scripts["web"]!.split("&&").at(-1)!.trim().split(/\s+/);
  return words.slice(words.indexOf("node") + 1, -1);
})();

/** USER_HZ: Linux reports process times in 1/100 s on every architecture Node runs on. */
const CLOCK_TICKS = 100;

/**
 * Starts `node <script>` with `env`, its output appended to `logFile`, and resolves once
 * it logs a line whose msg is `readyMsg` (fails if it exits or takes over `timeoutMs`).
 */
export async function startService(options: {
  name: string;
  script: string;
  env: Record<string, string>;
  nodeArgs?: string[];
  logFile: string;
  readyMsg: string;
  timeoutMs?: number;
}): Promise<ServiceProcess> {
  const log = createWriteStream(options.logFile, { flags: "a" });
  const child = track(
    spawn(process.execPath, [...(options.nodeArgs ?? []), options.script], {
      cwd: ROOT,
      env: options.env,
      stdio: ["ignore", "pipe", "pipe"],
    }),
  );
  child.stderr!.pipe(log, { end: false });
  let sampled = 0;
  const sampler = setInterval(() => {
    const rss = procMemMiB(child.pid!, "VmRSS");
    if (rss > sampled) sampled = rss;
  }, 200);
  sampler.unref();
  let hwm = NaN;
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));

  const ready = await new Promise<Record<string, unknown>>((resolveReady, rejectReady) => {
    let buffered = "";
    const timer = setTimeout(() => {
      // Not left running: nothing would stop it later.
      child.kill("SIGKILL");
      rejectReady(new Error(`${options.name} not ready after ${options.timeoutMs ?? 60_000} ms (see ${options.logFile})`));
    }, options.timeoutMs ?? 60_000);
    child.stdout!.on("data", (chunk: Buffer) => {
      log.write(chunk);
      buffered += chunk.toString("utf8");
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (!line.includes(options.readyMsg)) continue;
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          if (parsed["msg"] === options.readyMsg) {
            clearTimeout(timer);
            resolveReady(parsed);
          }
        } catch {
          // not JSON: not our line
        }
      }
      // Once ready, keep only the log file.
      if (buffered.length > 65_536) buffered = "";
    });
    void exited.then((code) => {
      clearTimeout(timer);
      rejectReady(new Error(`${options.name} exited with ${code} before it was ready (see ${options.logFile})`));
    });
  });

  const peakRssMiB = () => {
    const now = procMemMiB(child.pid!, "VmHWM");
    if (Number.isFinite(now)) hwm = now;
    return Math.max(sampled, Number.isFinite(hwm) ? hwm : 0);
  };
  return {
    name: options.name,
    pid: child.pid!,
    ready,
    peakRssMiB,
    async stop() {
      peakRssMiB();
      clearInterval(sampler);
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
        await exited;
        clearTimeout(timer);
      }
      log.end();
    },
  };
}

/** Runs a bench script in a forked process and resolves with the one message it sends (its result). */
export function runForked<T>(script: string, config: unknown): Promise<T> {
  return new Promise((resolveRun, rejectRun) => {
    const child = track(fork(resolve(ROOT, script), [JSON.stringify(config)], { cwd: ROOT, serialization: "advanced" }));
    let result: T | undefined;
    child.on("message", (m) => (result = m as T));
    child.on("exit", (code) => {
      if (result !== undefined) resolveRun(result);
      else rejectRun(new Error(`${script} exited with ${code} without a result`));
    });
  });
}

/** A forked server: its URL and pid, a request–answer exchange over IPC, and stop(). */
export interface ForkedServer {
  url: string;
  pid: number;
  /** Sends `message` and resolves with the next message the server sends back. */
  request<T>(message: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** Forks a server script that sends `{url}` once listening; returns it and a stop(). */
export function startForkedServer(script: string): Promise<ForkedServer> {
  return new Promise((resolveStart, rejectStart) => {
    const child = track(fork(resolve(ROOT, script), [], { cwd: ROOT }));
    const exited = new Promise<void>((done) => child.on("exit", () => done()));
    child.once("message", (m) => {
      resolveStart({
        url: (m as { url: string }).url,
        pid: child.pid!,
        request<T>(message: unknown) {
          return new Promise<T>((answered, failed) => {
            const onExit = () => failed(new Error(`${script} exited before answering`));
            child.once("exit", onExit);
            child.once("message", (answer) => {
              child.off("exit", onExit);
              answered(answer as T);
            });
            child.send(message as string);
          });
        },
        async stop() {
          if (child.exitCode === null) child.kill("SIGTERM");
          await exited;
        },
      });
    });
    child.once("exit", (code) => rejectStart(new Error(`${script} exited with ${code}`)));
  });
}
