import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

/**
 * Constant-time comparison. Both sides are hashed first, so neither the content nor the
 * length of the secret leaks through timing.
 */
export function safeEqual(given: string, expected: string): boolean {
  const a = createHash("sha256").update(given).digest();
  const b = createHash("sha256").update(expected).digest();
  return timingSafeEqual(a, b) && given.length === expected.length;
}

/** `Authorization: Bearer <API_TOKEN>` or 401. */
export function bearerAuth(token: string): MiddlewareHandler {
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match || !safeEqual(match[1]!, token)) {
      c.header("www-authenticate", 'Bearer realm="tracklane"');
      throw new ApiError("unauthorized", header ? "invalid bearer token" : "missing Authorization: Bearer <API_TOKEN> header");
    }
    await next();
  };
}
