import type { MiddlewareHandler } from "hono";
import { rotatingSecretMatcher } from "../domain/secrets.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { ApiError } from "./errors.ts";

/** How a bearer check names itself: the API's by default; /metrics has its own. */
export interface BearerNames {
  realm: string;
  /** "invalid <what>" when a wrong token is sent. */
  what: string;
  /** The setting holding the token, named when none is sent. */
  setting: string;
}

const API_NAMES: BearerNames = { realm: "tracklane", what: "bearer token", setting: "API_TOKEN" };

/**
 * `Authorization: Bearer <token>` or 401. The token is every printable ASCII byte after
 * the scheme (API_TOKEN's alphabet): other bytes, such as a trailing NBSP or form feed, are
 * part of a wrong credential, not whitespace to trim.
 */
export function bearerAuth(token: string, names: BearerNames = API_NAMES, previous?: PreviousSecret): MiddlewareHandler {
  const matches = rotatingSecretMatcher(token, previous?.secret);
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
    const matched = match ? matches(match[1]!) : null;
    if (matched === null) {
      c.header("www-authenticate", `Bearer realm="${names.realm}"`);
      throw new ApiError("unauthorized", header ? `invalid ${names.what}` : `missing Authorization: Bearer <${names.setting}> header`);
    }
    if (matched === "previous") previous?.used();
    await next();
  };
}

/** A secret being rotated out, still let in, and what to do each time it is. */
export interface PreviousSecret {
  secret: string | undefined;
  used: () => void;
}

/** Between two warnings that a previous secret is still in use, per process. */
const PREVIOUS_SECRET_WARN_EVERY_MS = 10 * 60_000;

/**
 * What happens when a `*_PREVIOUS` secret lets a request in: it is counted (the operator
 * removes the variable once the count stops growing), and a warning says so at once and then
 * at most every 10 minutes, not once per request.
 */
export function previousSecretNotice(log: Logger, metrics: Metrics, variable: string, meaning: string): () => void {
  let warnedAt = -Infinity;
  return () => {
    metrics.previousSecretUsed.inc({ variable });
    const now = performance.now();
    if (now - warnedAt < PREVIOUS_SECRET_WARN_EVERY_MS) return;
    warnedAt = now;
    log.warn({ variable }, `a request carried ${variable}: ${meaning}; unset ${variable} once tracklane_previous_secret_used_total stops growing`);
  };
}
