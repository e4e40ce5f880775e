/** Spawning real tracklane processes (`node src/<entry>.ts`) for end-to-end tests. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { after } from "node:test";

const root = resolve(import.meta.dirname, "../..");

export interface Proc {
  child: ChildProcess;
  output(): string;
  /** Resolves when the output matches, rejects after `ms`. */
  waitFor(pattern: RegExp, ms?: number): Promise<RegExpMatchArray>;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * `group`: the process leads a process group of its own, as a command started in a
 * terminal does, and `kill` signals the whole group, as Ctrl-C in that terminal does.
 */
export function startProcess(entry: string, env: Record<string, string>, options: { group?: boolean } = {}): Proc {
  const child = spawn(process.execPath, [resolve(root, entry)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: options.group === true,
  });
  let out = "";
  const listeners = new Set<() => void>();
  const onData = (d: Buffer) => {
    out += d.toString("utf8");
    listeners.forEach((l) => l());
  };
  child.stdout!.on("data", onData);
  child.stderr!.on("data", onData);
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return {
    child,
    output: () => out,
    waitFor(pattern, ms = 60_000) {
      return new Promise((resolveMatch, reject) => {
        const check = () => {
          const m = out.match(pattern);
          if (m) {
            listeners.delete(check);
            clearTimeout(timer);
            resolveMatch(m);
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${pattern}; output:\n${out.slice(-3000)}`));
        }, ms);
        listeners.add(check);
        check();
      });
    },
    async kill(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) {
        if (options.group === true) process.kill(-child.pid!, signal);
        else child.kill(signal);
      }
      return await exited;
    },
  };
}

/**
 * Cleanups run (newest first, errors ignored) after the test file's tests, whatever
 * happened; push onto the returned list.
 */
export function cleanupsAfterAll(): (() => Promise<void>)[] {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });
  return cleanups;
}

/** Starts `node src/<entry>.ts`; the process is SIGKILLed by `cleanups` at the end whatever happens. */
export function startService(cleanups: (() => Promise<void>)[], entry: "web" | "worker", env: Record<string, string>): Proc {
  const proc = startProcess(`src/${entry}.ts`, env);
  cleanups.push(async () => void (await proc.kill("SIGKILL")));
  return proc;
}
