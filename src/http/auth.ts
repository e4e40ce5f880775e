import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

/**
 * Constant-time comparison. Both sides are hashed first, so neither the content nor the
 * length of the secret leaks through timing. Hashed as UTF-16 code units: UTF-8 would turn
 * every unpaired surrogate into the same U+FFFD, making different strings equal.
 */
export function safeEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given, "utf16le").digest();
  const b = createHash("sha256").update(expected, "utf16le").digest();
  return timingSafeEqual(a, b) && given.length === expected.length;
}

/**
 * `Authorization: Bearer <API_TOKEN>` or 401. The token is every printable ASCII byte after
 * the scheme (API_TOKEN's alphabet): other bytes, such as a trailing NBSP or form feed, are
 * part of a wrong credential, not whitespace to trim.
 */
export function bearerAuth(token: string): MiddlewareHandler {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
    if (!match || !safeEqual(match[1]!, token)) {
      c.header("www-authenticate", 'Bearer realm="tracklane"');
      throw new ApiError("unauthorized", header ? "invalid bearer token" : "missing Authorization: Bearer <API_TOKEN> header");
    }
    await next();
  };
}
