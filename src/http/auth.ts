import type { MiddlewareHandler } from "hono";
import { secretMatcher } from "../domain/secrets.ts";
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
export function bearerAuth(token: string, names: BearerNames = API_NAMES): MiddlewareHandler {
  const matches = secretMatcher(token);
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
    if (!match || !matches(match[1]!)) {
      c.header("www-authenticate", `Bearer realm="${names.realm}"`);
      throw new ApiError("unauthorized", header ? `invalid ${names.what}` : `missing Authorization: Bearer <${names.setting}> header`);
    }
    await next();
  };
}
