/**
 * Who may use the console: a session cookie made at sign-in with the API token, and a
 * CSRF check on every form post (the session's token in the form, and an Origin of this
 * site). Failed sign-ins are rate-limited per client address.
 */
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Sql } from "postgres";
import { safeEqual } from "../../domain/secrets.ts";
import { findSession, startSession } from "../../sessions/store.ts";
import type { Session } from "../../sessions/store.ts";

export const SESSION_COOKIE = "tracklane_session";
/** The form field every state-changing form carries. */
export const CSRF_FIELD = "_csrf";

export interface ConsoleEnv {
  Variables: { session: Session; requestId: string };
}

export interface CookieSettings {
  /** PUBLIC_URL: its origin is accepted in Origin, and https makes the cookie Secure. */
  publicUrl: string;
  sessionHours: number;
  /** API_TOKEN: a session is only good with the token it was signed in with (sessions/store.ts). */
  apiToken: string;
}

/** Signs in: a new session and its cookie (HttpOnly, SameSite=Strict, Secure behind https). */
export async function signIn(c: Context, sql: Sql, settings: CookieSettings): Promise<void> {
  const ttlMs = settings.sessionHours * 3_600_000;
  const { token } = await startSession(sql, ttlMs, settings.apiToken);
  setCookie(c, SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: "Strict",
    secure: settings.publicUrl.startsWith("https:"),
    path: "/",
    maxAge: ttlMs / 1000,
  });
}

export function clearSessionCookie(c: Context, settings: CookieSettings): void {
  deleteCookie(c, SESSION_COOKIE, { path: "/", secure: settings.publicUrl.startsWith("https:") });
}

/**
 * Pages need a live session; without one a GET goes to the sign-in page (and comes back
 * after), anything else gets `refused` (a 403 that says why; the default, plain text).
 */
export function sessionRequired(
  sql: Sql,
  apiToken: string,
  refused: (c: Context) => Response | Promise<Response> = (c) => c.text("Forbidden: sign in first", 403),
): MiddlewareHandler<ConsoleEnv> {
  return async (c, next) => {
    const token = getCookie(c, SESSION_COOKIE);
    const session = token ? await findSession(sql, token, apiToken) : undefined;
    if (!session) {
      if (c.req.method === "GET" || c.req.method === "HEAD") {
        const url = new URL(c.req.url);
        return c.redirect(`/sign-in?next=${encodeURIComponent(url.pathname + url.search)}`, 303);
      }
      return await refused(c);
    }
    c.set("session", session);
    await next();
  };
}

/** The Origin header names this site: PUBLIC_URL's origin, or the host the request was sent to. */
export function sameOrigin(c: Context, publicUrl: string): boolean {
  const origin = c.req.header("origin");
  if (!origin || origin === "null") return false;
  if (origin === new URL(publicUrl).origin) return true;
  const host = c.req.header("host");
  return host !== undefined && (origin === `http://${host}` || origin === `https://${host}`);
}

/**
 * Every POST carries the session's CSRF token: 403 without it. That it comes from this
 * site's pages (Origin) was checked before its form was read (index.ts formInput).
 */
export function csrfRequired(): MiddlewareHandler<ConsoleEnv> {
  return async (c, next) => {
    if (c.req.method !== "POST") return next();
    const form = await c.req.parseBody();
    const token = form[CSRF_FIELD];
    if (typeof token !== "string" || !safeEqual(token, c.get("session").csrfToken)) {
      return c.text("Forbidden: missing or wrong CSRF token; reload the page", 403);
    }
    await next();
  };
}

/** The client's address, for the sign-in limit (the socket's; behind a proxy every client is one). */
export function clientAddress(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? "unknown";
  } catch {
    return "unknown"; // no socket (app.request in tests)
  }
}

export interface SignInLimiter {
  /** Seconds until `key` may try again; 0 when it may now. */
  retryAfterS(key: string): number;
  failed(key: string): void;
  succeeded(key: string): void;
}

/**
 * At most `max` failed sign-ins per address in `windowMs`; then none until the oldest
 * failure leaves the window. In memory, per process: a restart forgets, and each web
 * process counts on its own.
 */
export function createSignInLimiter(max = 5, windowMs = 5 * 60_000, now: () => number = Date.now): SignInLimiter {
  const failures = new Map<string, number[]>();
  const recent = (key: string) => {
    const since = now() - windowMs;
    const kept = (failures.get(key) ?? []).filter((t) => t > since);
    if (kept.length === 0) failures.delete(key);
    else failures.set(key, kept);
    return kept;
  };
  return {
    retryAfterS(key) {
      const kept = recent(key);
      if (kept.length < max) return 0;
      return Math.max(1, Math.ceil((kept[kept.length - max]! + windowMs - now()) / 1000));
    },
    failed(key) {
      // Bounded: a flood of addresses cannot grow the map without end.
      if (failures.size > 10_000) failures.clear();
      failures.set(key, [...recent(key), now()]);
    },
    succeeded(key) {
      failures.delete(key);
    },
  };
}
