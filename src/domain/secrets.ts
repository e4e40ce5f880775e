/**
 * Secrets: constant-time comparison, for the API and metrics tokens, the callback secret
 * and the emulator's credentials (both sides are hashed, so neither the content nor the
 * length of the secret leaks through timing); and scrubbing them out of values bound for
 * logs and records (a provider's answers kept on errors, errors in log lines).
 */
import { hash, timingSafeEqual } from "node:crypto";

/**
 * Hashed as UTF-16 code units: UTF-8 would turn every unpaired surrogate into the same
 * U+FFFD, making different strings equal.
 */
const digest = (s: string): Buffer => hash("sha256", Buffer.from(s, "utf16le"), "buffer");

/** Whether `given` is `expected`, in time independent of where they differ. */
export function safeEqual(given: string, expected: string): boolean {
  return secretMatcher(expected)(given);
}

/** safeEqual against one fixed secret, hashed once instead of on every call (hot paths). */
export function secretMatcher(expected: string): (given: string) => boolean {
  const expectedDigest = digest(expected);
  return (given) => timingSafeEqual(digest(given), expectedDigest) && given.length === expected.length;
}

/** Which secret a credential matched: the one in force, the one it replaces, or neither. */
export type SecretMatch = "current" | "previous" | null;

/**
 * secretMatcher for a secret being rotated: `given` is compared with both, each in constant
 * time, whichever matches, so the answer's timing says nothing of which one it was.
 */
export function rotatingSecretMatcher(current: string, previous: string | undefined): (given: string) => SecretMatch {
  const isCurrent = secretMatcher(current);
  const isPrevious = previous === undefined ? () => false : secretMatcher(previous);
  return (given) => {
    const currentMatched = isCurrent(given);
    const previousMatched = isPrevious(given);
    return currentMatched ? "current" : previousMatched ? "previous" : null;
  };
}

/**
 * Keys whose values are secrets wherever they sit, compared without case, `_` or `-`
 * (`access_token`, `accessToken`, `Access-Token`). The redact paths above reach one level
 * down only; errors carry answers and causes nested deeper, so `scrubSecrets` walks them.
 */
const SECRET_KEYS: ReadonlySet<string> = new Set([
  "accesstoken",
  "refreshtoken",
  "idtoken",
  "token",
  "apitoken",
  "apitokenprevious",
  "clientsecret",
  "secret",
  "callbacksecret",
  "callbacksecretprevious",
  "xcallbacksecret",
  "password",
  "authorization",
  "cookie",
]);
/** What a scrubbed secret reads. */
export const CENSOR = "[redacted]";
const MAX_DEPTH = 12;

/** Secrets written into text: a JSON member (`"access_token": "…"`) or a form field (`access_token=…`). */
const SECRET_JSON_MEMBER = /("(?:access_token|refresh_token|id_token|token|api_token|client_secret|password)"\s*:\s*")[^"]*(")/gi;
const SECRET_FORM_FIELD = /\b((?:access_token|refresh_token|id_token|client_secret|password)=)[^&\s"']+/gi;

export function scrubSecretText(text: string): string {
  return text.replace(SECRET_JSON_MEMBER, `$1${CENSOR}$2`).replace(SECRET_FORM_FIELD, `$1${CENSOR}`);
}

/**
 * The copies scrubSecrets made, passed over when met again: a provider's answer is
 * scrubbed once, when its ProviderError is made, not a second time when a log line
 * serialises that error. Nothing writes a value into a copy (pino tags an error-like
 * object with a symbol while serialising it, which is why they are not frozen).
 */
const scrubbedCopies = new WeakSet<object>();

/** JSON lengths of scrubbed copies, measured once (rememberJsonLength): a log line reads it instead of walking the copy. */
const jsonLengths = new WeakMap<object, number>();

/** Measures `value` as JSON once, for jsonLengthOf; returns it. */
export function rememberJsonLength<T>(value: T): T {
  if (value !== null && typeof value === "object") jsonLengths.set(value, JSON.stringify(value)?.length ?? 0);
  return value;
}

/** `value`'s length as JSON: remembered when rememberJsonLength measured it, else measured now. */
export function jsonLengthOf(value: unknown): number {
  if (value !== null && typeof value === "object") {
    const known = jsonLengths.get(value);
    if (known !== undefined) return known;
  }
  return JSON.stringify(value)?.length ?? 0;
}

/**
 * A copy of JSON-like `value` with the value of every secret key (SECRET_KEYS, at any
 * depth) replaced by "[redacted]", and secrets written into strings too. For answers kept
 * on errors and for errors on their way into a log line. A copy made here, met again (at
 * any depth), is kept as it is.
 */
export function scrubSecrets(value: unknown): unknown {
  return scrub(value, 0, new WeakSet());
}

function scrub(value: unknown, depth: number, seen: WeakSet<object>): unknown {
  if (typeof value === "string") return scrubSecretText(value);
  if (value === null || typeof value !== "object") return value;
  if (scrubbedCopies.has(value)) return value;
  if (seen.has(value) || depth >= MAX_DEPTH) return "[…]";
  // Dates, URLs, Buffers: as JSON.stringify would write them.
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === "function") return scrub(toJSON.call(value), depth + 1, seen);
  seen.add(value);
  try {
    const copy = Array.isArray(value)
      ? value.map((v) => scrub(v, depth + 1, seen))
      : // Entries, not assignments: a `__proto__` key of an answer stays a key.
        Object.fromEntries(
          Object.entries(value).map(([key, v]) => [key, SECRET_KEYS.has(key.toLowerCase().replace(/[-_]/g, "")) && v !== null && v !== undefined ? CENSOR : scrub(v, depth + 1, seen)]),
        );
    scrubbedCopies.add(copy);
    return copy;
  } finally {
    seen.delete(value);
  }
}
