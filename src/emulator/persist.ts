import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { z } from "zod";
import type { Logger } from "../logger.ts";
import { deserialiseState } from "./state.ts";
import type { EmulatorSnapshot, EmulatorState, IdCounters, IdMinter, SavedExtras } from "./state.ts";

/**
 * The emulator's state on disk (`<DATA_DIR>/emulator/state.json`), so a restart keeps
 * orders and their track_urls working. What goes in the file is state.ts's business
 * (serialiseState / deserialiseState); this module only reads, sets aside and writes it.
 */

/** Changes are gathered for this long and written once: a burst of requests costs one write. */
export const SAVE_DELAY_MS = 250;
/**
 * A write blocks the event loop (it is synchronous, see createSaver) for as long as the
 * state takes to stringify: the wait before the next one grows with it, so saving takes
 * at most about a tenth of the time of an emulator under steady load with many orders.
 */
const SAVE_COST_FACTOR = 10;

export function emulatorStateFile(dataDir: string): string {
  return join(dataDir, "emulator", "state.json");
}

type Warn = (fields: Record<string, unknown>, message: string) => void;

function warner(logger: Logger | undefined): Warn {
  if (logger) return (fields, message) => logger.warn(fields, message);
  // Without a logger (library use) a warning still reaches stderr.
  return (fields, message) => process.emitWarning(`${message} ${JSON.stringify(fields)}`);
}

export interface RestoredState {
  state: EmulatorState;
  extras: SavedExtras;
}

/** Renames a file that cannot be used to `<file>.bad-<time>`: kept for a look, never read again. */
function setAside(file: string, problem: string, warn: Warn, what: string): void {
  const aside = `${file}.bad-${new Date().toISOString().replace(/[:.]/g, "-")}`;
  renameSync(file, aside);
  warn({ file, setAsideAs: aside, problem }, what);
}

/** The file's text, or undefined when there is none; a file that cannot be read at all (permissions) throws. */
function readIfPresent(file: string, what: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Error(`cannot read the emulator's ${what} ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * The saved state, or undefined when there is none. `reset` deletes the file first. A file
 * that is not JSON or not a snapshot is renamed to `state.json.bad-<time>` (kept for a
 * look, never read again) and the emulator starts empty. A file that cannot be read at
 * all (permissions) throws: starting empty would overwrite it.
 */
export function loadSavedState(file: string, options: { reset?: boolean; logger?: Logger | undefined } = {}): RestoredState | undefined {
  if (options.reset) {
    rmSync(file, { force: true });
    return undefined;
  }
  const text = readIfPresent(file, "saved state");
  if (text === undefined) return undefined;
  let problem: string;
  try {
    const result = deserialiseState(JSON.parse(text));
    if (result.ok) return { state: result.state, extras: result.extras };
    problem = result.error;
  } catch (err) {
    problem = err instanceof Error ? err.message : String(err);
  }
  setAside(file, problem, warner(options.logger), "emulator state file unreadable: set aside, starting empty");
  return undefined;
}

/**
 * Temp file, fsync, rename: a crash mid-write leaves the previous file, never half a
 * file. The temp name carries the pid so two writers cannot interleave in one temp file.
 */
function writeFileAtomically(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true });
  const temp = `${file}.tmp-${process.pid}`;
  const fd = openSync(temp, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, file);
}

// ---------------------------------------------------------------- id reservations

/**
 * The snapshot follows changes by up to SAVE_DELAY_MS, but an answer naming a new order id
 * or AWB number goes out at once: after a crash in between, a snapshot-only restart would
 * issue those numbers again. So numbers are reserved ahead of use in a small file of their
 * own (`ids.json` beside `state.json`), written synchronously before any number beyond the
 * last reservation goes out, and a start moves every counter past it. Writing the whole
 * snapshot instead would cost a stringify of every order per block. A clean stop shrinks the
 * reservation to what was issued, so a restart goes on where the last run ended. The file
 * outlives `--reset` and an unreadable state.json: numbers are never issued twice.
 */
const IdsFileSchema = z.object({
  version: z.literal(1),
  /** Every number issued so far is at most these. */
  reserved: z.object({ order: z.number().int().nonnegative(), awb: z.number().int().nonnegative(), contact: z.number().int().nonnegative() }),
});

export function emulatorIdsFile(stateFile: string): string {
  return join(dirname(stateFile), "ids.json");
}

/** The reservation on disk; undefined when there is none or it cannot be used (then set aside). */
function loadReservation(file: string, warn: Warn): IdCounters | undefined {
  const text = readIfPresent(file, "id reservations");
  if (text === undefined) return undefined;
  let problem: string;
  try {
    const parsed = IdsFileSchema.safeParse(JSON.parse(text));
    if (parsed.success) return parsed.data.reserved;
    problem = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
  } catch (err) {
    problem = err instanceof Error ? err.message : String(err);
  }
  setAside(file, problem, warn, "emulator id reservations unreadable: set aside, counters from the saved state");
  return undefined;
}

function guardIds(file: string, ids: IdMinter, warn: Warn): void {
  ids.reserveAhead(loadReservation(file, warn), (reserved) => writeFileAtomically(file, JSON.stringify({ version: 1, reserved })));
}

export interface Saver {
  /** Something saved changed: written within SAVE_DELAY_MS (longer for a large state). */
  changed(): void;
  /** Writes now if anything changed since the last write. */
  flush(): void;
  /** Flushes, shrinks the id reservation to what was issued, and stops; later changes are not written. */
  close(): void;
}

/**
 * Writes are synchronous: a save never overlaps a later one or the final flush on close,
 * so the file always holds the newest snapshot. A failed write is logged and retried on
 * the next change; the emulator keeps serving from memory.
 */
export function createSaver(
  file: string,
  snapshot: () => EmulatorSnapshot,
  options: {
    delayMs?: number;
    logger?: Logger | undefined;
    /** The state's id counters: reserved ahead of use in ids.json (guardIds), released on close. */
    ids?: IdMinter;
  } = {},
): Saver {
  const delayMs = options.delayMs ?? SAVE_DELAY_MS;
  const warn = warner(options.logger);
  const ids = options.ids;
  const idsFile = emulatorIdsFile(file);
  if (ids) guardIds(idsFile, ids, warn);
  let dirty = false;
  let closed = false;
  let timer: NodeJS.Timeout | null = null;
  let lastWriteMs = 0;

  function flush(): void {
    if (timer) clearTimeout(timer);
    timer = null;
    if (!dirty) return;
    dirty = false;
    const started = performance.now();
    try {
      writeFileAtomically(file, JSON.stringify(snapshot()));
      lastWriteMs = performance.now() - started;
    } catch (err) {
      dirty = true;
      warn({ file, err: err instanceof Error ? err.message : String(err) }, "emulator state not saved");
    }
  }

  return {
    changed() {
      if (closed) return;
      dirty = true;
      // Not re-armed by later changes: under steady traffic the file still follows within delayMs.
      timer ??= setTimeout(flush, Math.max(delayMs, lastWriteMs * SAVE_COST_FACTOR)).unref();
    },
    flush,
    close() {
      if (closed) return;
      flush();
      try {
        ids?.releaseReservation();
      } catch (err) {
        // The wider reservation stays: the next start skips a few numbers, nothing worse.
        warn({ file: idsFile, err: err instanceof Error ? err.message : String(err) }, "emulator id reservation not released");
      }
      closed = true;
    },
  };
}
