/** Spawning real tracklane processes (`node src/<entry>.ts`) for end-to-end tests. */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { resolve } from "node:path";
import { after } from "node:test";
import { z } from "zod";
import { freePort } from "./ports.ts";

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

const listeningLine = z.object({ msg: z.string(), url: z.string().url() });

/**
 * The base URL (`http://host:port`) a process started with a port of 0 (PORT=0,
 * METRICS_PORT=0) bound, read from its JSON log line `message` ("web listening", "worker
 * metrics listening", "tracklane running"), which names the port it got. A port picked by the
 * test and released before the process binds it could be taken by another test file's
 * process in between (EADDRINUSE); one the process binds itself cannot. Rejects, with the
 * output, if the process exits first or after `ms`.
 */
export async function listeningUrl(proc: Proc, message: string, ms = 60_000): Promise<string> {
  const line = new RegExp(`^\\{.*"msg":${JSON.stringify(message).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}.*\\}$`, "m");
  const exited = new Promise<never>((_, reject) => {
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      reject(new Error(`the process exited (${signal ?? code}) before "${message}"; output:\n${proc.output().slice(-3000)}`));
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) onExit(proc.child.exitCode, proc.child.signalCode);
    else proc.child.once("exit", onExit);
  });
  exited.catch(() => {}); // only read while waiting below
  const [found] = await Promise.race([proc.waitFor(line, ms), exited]);
  const parsed = listeningLine.parse(JSON.parse(found));
  const url = new URL(parsed.url);
  return `${url.protocol}//${url.host}`;
}

/** The port in a URL from `listeningUrl`. */
export function portOf(url: string): number {
  return Number(new URL(url).port);
}

/**
 * `start(port)` on a port picked with freePort, for a test that must name the port before
 * the start (to see the process use the port it was given). The port is released before
 * the process binds it, so another test file's process may take it in between: the process
 * then exits saying so ("already uses that port", "already in use") and is started again
 * on a fresh port. Resolves once its output matches `ready`.
 */
export async function startOnFreePort(start: (port: number) => Proc, ready: RegExp, ms = 90_000): Promise<{ proc: Proc; port: number }> {
  const taken: number[] = [];
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(taken);
    const proc = start(port);
    const exited = new Promise<"exited">((r) => (proc.child.exitCode !== null ? r("exited") : proc.child.once("exit", () => r("exited"))));
    const waiting = proc.waitFor(ready, ms);
    waiting.catch(() => {}); // raced below; a timeout after an exit is not news
    const outcome = await Promise.race([waiting, exited]);
    if (outcome !== "exited") return { proc, port };
    if (!/already uses that port|already in use|EADDRINUSE/.test(proc.output()) || attempt >= 5) {
      throw new Error(`the process exited (${proc.child.exitCode}) before ${ready}; output:\n${proc.output().slice(-3000)}`);
    }
    taken.push(port);
  }
}
