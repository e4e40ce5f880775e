/**
 * A fix for graphile-worker 0.18.0's local queue (the jobs a runner fetches ahead of its
 * free slots), made before any runner starts (runner.ts).
 *
 * Released while it holds such jobs (mode WAITING: every slot busy, more jobs due, as under
 * load when a deploy sends SIGTERM), LocalQueue.setModeReleased sets the mode to RELEASED
 * first and only then hands the jobs back, through `background`, which refuses any work
 * once the queue is RELEASED with none in progress: "Cannot background something when the
 * queue is already released". The hand-back's query was already under way and usually
 * lands, but the queue never finishes, the runner's graceful stop fails into a forceful one,
 * and five error lines with stacks were logged for an ordinary stop. Should the runner's
 * pool close first, the jobs stayed locked until the stop unlocked them with the attempt
 * their fetch counted spent: a job allowed one attempt (the cron's sweeps and drains) was
 * then never run. Counting the release itself as work in progress lets the hand-back be
 * taken as the code intends (its comment: "this will add to backgroundCount"), and the
 * queue finishes once it has landed.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";

/** The members of LocalQueue the fix touches (graphile-worker's dist/localQueue.js). */
interface LocalQueueInternals {
  mode: string;
  backgroundCount: number;
  decreaseBackgroundCount: () => void;
  setModeReleased: () => void;
}

const FIXED = Symbol.for("tracklane.localQueueReleaseFixed");

function isPrototype(value: unknown): value is LocalQueueInternals & Record<symbol, unknown> {
  return typeof value === "object" && value !== null && typeof (value as { setModeReleased?: unknown }).setModeReleased === "function";
}

/**
 * Applies the fix once per process. The module is not among the package's exports, so it
 * is imported by its file, the very module graphile-worker's own imports resolve to. A
 * release without the method (another version's shape) is left as it is.
 */
export async function fixLocalQueueRelease(): Promise<boolean> {
  const index = createRequire(import.meta.url).resolve("graphile-worker");
  const module: unknown = await import(pathToFileURL(join(dirname(index), "localQueue.js")).href);
  const prototype: unknown = (module as { LocalQueue?: { prototype?: unknown } }).LocalQueue?.prototype;
  if (!isPrototype(prototype)) return false;
  if (prototype[FIXED] === true) return true;
  const release = prototype.setModeReleased;
  prototype.setModeReleased = function (this: LocalQueueInternals) {
    if (this.mode !== "WAITING") {
      release.call(this);
      return;
    }
    this.backgroundCount++;
    try {
      release.call(this);
    } finally {
      // The queue finishes when this was the last work in progress (the hand-back landed).
      this.decreaseBackgroundCount();
    }
  };
  prototype[FIXED] = true;
  return true;
}
