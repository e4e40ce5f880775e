import type { Context } from "hono";
import type { EmulatorEnv } from "./types.ts";

/**
 * Hanging requests for the timeout faults: the emulator holds the request open until the
 * client gives up (its connection closes), the emulator closes, or `maxHangMs` passes, and
 * then destroys the socket so no answer is ever written. The close faults destroy it at once.
 */
export interface Hangs {
  hang(c: Context<EmulatorEnv>): Promise<void>;
  releaseAll(): void;
}

export function createHangs(maxHangMs: number): Hangs {
  const active = new Set<() => void>();
  return {
    hang(c) {
      return new Promise<void>((resolve) => {
        const signal = c.req.raw.signal;
        const done = () => {
          if (!active.delete(done)) return;
          clearTimeout(timer);
          signal.removeEventListener("abort", done);
          dropConnection(c);
          resolve();
        };
        const timer = setTimeout(done, maxHangMs);
        active.add(done);
        signal.addEventListener("abort", done);
        if (signal.aborted) done();
      });
    },
    releaseAll() {
      for (const done of [...active]) done();
    },
  };
}

/** Unref'd: a pending delay fault never keeps a closing process alive. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Destroys the request's socket, so whatever the handler answers is never written. Only
 * under a real server (startEmulator): `app.request()` has no socket, and answers anyway.
 */
export function dropConnection(c: Context<EmulatorEnv>): void {
  c.env?.outgoing?.destroy();
}
