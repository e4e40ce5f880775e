/**
 * Who may use the console: a session cookie made at sign-in with the API token, and a
 * CSRF check on every form post (the session's token in the form, and an Origin of this
 * site). Failed sign-ins are rate-limited per client address.
 */
import { isIP } from "node:net";
import { getConnInfo } from "@hono/node-server/conninfo";
import type { Context, MiddlewareHandler } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { Sql } from "postgres";
import { forwardedClient, ipv6Groups } from "../../domain/addresses.ts";
import type { AddressBlock } from "../../domain/addresses.ts";
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
  const token = await startSession(sql, ttlMs, settings.apiToken);
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

/**
 * The client's address, for the sign-in limit and its log lines: the socket's peer, or,
 * when that is one of `trustedProxies` (TRUSTED_PROXIES), the client its X-Forwarded-For
 * names (forwardedClient). Without trusted proxies the header is never read: a client
 * could write any address in it.
 */
export function clientAddress(c: Context, trustedProxies: readonly AddressBlock[]): string {
  let peer: string;
  try {
    peer = getConnInfo(c).remote.address ?? "unknown";
  } catch {
    peer = "unknown"; // no socket (app.request in tests)
  }
  return forwardedClient(peer, c.req.header("x-forwarded-for"), trustedProxies);
}

/** Failed sign-ins by client address (clientAddress); an IPv6 address counts with its /64 (limitKey). */
export interface SignInLimiter {
  /** Seconds until `address` may try again; 0 when it may now. */
  retryAfterS(address: string): number;
  failed(address: string): void;
  succeeded(address: string): void;
}

/**
 * Whose failures an address counts with: an IPv4 address its own (also written as
 * ::ffff:a.b.c.d, as a dual-stack socket reports it); an IPv6 address its /64, the
 * smallest block a network hands one host, which can take any address in it (else every
 * one of its 2^64 addresses would get five tries of its own).
 */
export function limitKey(address: string): string {
  if (isIP(address) !== 6) return address;
  const g = ipv6Groups(address);
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return `${g[6]! >> 8}.${g[6]! & 0xff}.${g[7]! >> 8}.${g[7]! & 0xff}`;
  return `${g.slice(0, 4).map((x) => x.toString(16)).join(":")}::/64`;
}

/** Most addresses the limiter remembers (about 1 MB; makeRoom says which go first). */
const LIMITER_MAX_KEYS = 10_000;

/**
 * At most `max` failed sign-ins per address (limitKey: an IPv6 /64) in `windowMs`; then
 * none until the oldest failure leaves the window. In memory, per process: a restart
 * forgets, and each web process counts on its own. A flood of addresses cannot grow it
 * without end, nor wipe what it holds: past LIMITER_MAX_KEYS the addresses whose failures
 * have left the window go first, then those not refused, longest quiet first; an address
 * still refused only when every one remembered is.
 */
export function createSignInLimiter(max = 5, windowMs = 5 * 60_000, now: () => number = Date.now): SignInLimiter {
  // In the order of each address's latest failure (failed() moves it to the end).
  const failures = new Map<string, number[]>();
  const recent = (key: string) => {
    const since = now() - windowMs;
    const kept = (failures.get(key) ?? []).filter((t) => t > since);
    if (kept.length === 0) failures.delete(key);
    else failures.set(key, kept);
    return kept;
  };
  const makeRoom = () => {
    const since = now() - windowMs;
    for (const [key, times] of failures) if (times[times.length - 1]! <= since) failures.delete(key);
    // Addresses still refused are forgotten last: forgetting one would give it its tries back.
    // A tenth is freed at once, so that a flood pays for this walk once per thousand addresses.
    for (const spare of [(times: number[]) => times.filter((t) => t > since).length < max, () => true]) {
      for (const [key, times] of failures) {
        if (failures.size < LIMITER_MAX_KEYS * 0.9) return;
        if (spare(times)) failures.delete(key);
      }
    }
  };
  return {
    retryAfterS(address) {
      const kept = recent(limitKey(address));
      if (kept.length < max) return 0;
      return Math.max(1, Math.ceil((kept[kept.length - max]! + windowMs - now()) / 1000));
    },
    failed(address) {
      const key = limitKey(address);
      const kept = recent(key);
      failures.delete(key);
      if (failures.size >= LIMITER_MAX_KEYS) makeRoom();
      failures.set(key, [...kept, now()]);
    },
    succeeded(address) {
      failures.delete(limitKey(address));
    },
  };
}
