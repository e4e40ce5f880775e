/**
 * Constant-time secret comparison, for the API and metrics tokens, the callback secret and
 * the emulator's credentials: both sides are hashed, so neither the content nor the length
 * of the secret leaks through timing.
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
