/**
 * Summarises a V8 .cpuprofile (`node --cpu-prof`): self time per function and per area
 * (tracklane's own directories, each npm package, Node internals, GC, idle).
 */
import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { ROOT } from "./processes.ts";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileRow {
  name: string;
  ms: number;
  /** Share of the non-idle time. */
  pct: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  idleMs: number;
  functions: ProfileRow[];
  areas: ProfileRow[];
}

function where(url: string): string {
  if (url === "") return "";
  const path = url.startsWith("file://") ? new URL(url).pathname : url;
  return path.startsWith("/") ? relative(ROOT, path) : path;
}

function area(url: string, fn: string): string {
  if (url === "") return fn.startsWith("(") ? fn : "(native)";
  const path = where(url);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return pkg[1]!;
  if (path.startsWith("node:")) return "node internals";
  const own = /^(src\/[^/]+|bench|test)/.exec(path);
  return own ? own[1]! : path;
}

export function summariseProfile(file: string, top = 25): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const fns = new Map<string, number>();
  const areas = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    total += us;
    if (functionName === "(idle)") {
      idle += us;
      continue;
    }
    const name = `${functionName || "(anonymous)"}${url ? ` ${where(url)}:${lineNumber + 1}` : ""}`;
    fns.set(name, (fns.get(name) ?? 0) + us);
    const a = area(url, functionName);
    areas.set(a, (areas.get(a) ?? 0) + us);
  }
  const busy = total - idle;
  const rows = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .sort((x, y) => y[1] - x[1])
      .slice(0, n)
      .map(([name, us]) => ({ name, ms: Math.round(us / 100) / 10, pct: Math.round((1000 * us) / busy) / 10 }));
  return { file, totalMs: Math.round(total / 1000), idleMs: Math.round(idle / 1000), functions: rows(fns, top), areas: rows(areas, 15) };
}

export function formatProfile(p: ProfileSummary): string {
  const lines = [
    `CPU profile ${relative(ROOT, p.file)}: ${p.totalMs} ms sampled, ${p.idleMs} ms idle; shares below are of the ${p.totalMs - p.idleMs} ms busy`,
    "  by area (self time):",
    ...p.areas.map((r) => `    ${r.pct.toFixed(1).padStart(5)}%  ${String(r.ms).padStart(8)} ms  ${r.name}`),
    "  top functions (self time):",
    ...p.functions.map((r) => `    ${r.pct.toFixed(1).padStart(5)}%  ${String(r.ms).padStart(8)} ms  ${r.name}`),
  ];
  return lines.join("\n");
}
