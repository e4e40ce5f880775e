/**
 * The console (PRODUCT.md §12): server-rendered pages for the people who run deliveries,
 * at `/`. Sign-in with the API token makes a session cookie; every page needs it, and every
 * form post carries the session's CSRF token from this site's own pages. Nothing is
 * loaded from anywhere but tracklane itself (the Content-Security-Policy says so too).
 */
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { getCookie } from "hono/cookie";
import { secureHeaders } from "hono/secure-headers";
import type { Sql } from "postgres";
import type { Config } from "../../config.ts";
import { findUnstorable } from "../../domain/normalise.ts";
import { secretMatcher } from "../../domain/secrets.ts";
import { withPartitionsMade } from "../../events/partitions.ts";
import type { Logger } from "../../logger.ts";
import type { ProviderClient } from "../../provider/client.ts";
import { endSession, findSession } from "../../sessions/store.ts";
import { assetRoutes } from "./assets.ts";
import { attentionPages } from "./attention.ts";
import { awbPages } from "./awb.ts";
import { clearSessionCookie, clientAddress, createSignInLimiter, csrfRequired, sameOrigin, SESSION_COOKIE, sessionRequired, signIn } from "./auth.ts";
import type { ConsoleEnv, SignInLimiter } from "./auth.ts";
import { html } from "./html.ts";
import { errorBox, FIELD_ERROR_ID, fieldError, noticeBox, renderPage } from "./layout.ts";
import { notificationPages } from "./notifications.ts";
import { orderPages } from "./orders.ts";
import { systemPages } from "./system.ts";

export interface ConsoleDeps {
  config: Config;
  /** Sign-in, sessions, marks and every form post. */
  sql: Sql;
  /** The pages' reads (pools.ts, pagePool): DATABASE_READ_URL's pool, or the primary's. */
  readSql: Sql;
  log: Logger;
  /** Failed sign-ins per address (tests give their own clock). */
  limiter?: SignInLimiter;
  /** The provider's API, for the AWB pool's Replenish; absent: the page says none is configured. */
  provider?: ProviderClient | undefined;
}

/**
 * The pages' paths: the session and CSRF checks cover exactly these. `/x/*` covers `/x`
 * too; naming both would run each check twice.
 */
export const CONSOLE_PATHS = ["/", "/orders/*", "/commands/*", "/attention/*", "/awb/*", "/notifications/*", "/system/*"];

/** The most bytes a console form may send: its fields are ids, a reason, a count. */
export const CONSOLE_FORM_MAX_BYTES = 16 * 1024;

/**
 * What every console request goes through before a page reads its input. A post must come
 * from this site's pages (Origin; the CSRF token is checked with the session, auth.ts), and
 * its form must parse: neither costs a look at the form's content first. Query strings and
 * posted forms may hold no text PostgreSQL cannot store (a NUL, an unpaired surrogate): a
 * 400 that names the field, as the API's validation gives. The form is parsed once here;
 * the pages' parseBody reads Hono's copy.
 */
const formInput =
  (publicUrl: string): MiddlewareHandler =>
  async (c, next) => {
    const fields: [string, unknown][] = Object.entries(c.req.queries());
    if (c.req.method === "POST") {
      if (!sameOrigin(c, publicUrl)) return c.text("Forbidden: this form was not sent from tracklane's own pages (Origin)", 403);
      try {
        fields.push(...Object.entries(await c.req.parseBody({ all: true })));
      } catch (err) {
        return c.text(`Bad request: the form could not be read (${(err as Error).message})`, 400);
      }
    }
    for (const [name, value] of fields) {
      const bad = findUnstorable({ [name]: value });
      if (bad !== null) return c.text(`Bad request: ${bad.kind === "key" ? "a field's name" : `field ${name}`} holds a character that cannot be stored (NUL or an unpaired surrogate)`, 400);
    }
    await next();
  };

/**
 * Only where a page may come back to after signing in: a path of this site, with no
 * control character (Node refuses one in the Location header: a 500 after a good sign-in).
 */
// eslint-disable-next-line no-control-regex -- the control characters are what it refuses
const safeNext = (next: string | undefined) => (next !== undefined && /^\/(?!\/)[^\\\s\x00-\x1f\x7f]*$/.test(next) ? next : "/");

/** The page a post was sent from (Referer), when it is one of this site's (as sameOrigin reads Origin): else "/". */
function refererPath(c: Context, publicUrl: string): string {
  const referer = c.req.header("referer");
  if (referer === undefined || !URL.canParse(referer)) return "/";
  const url = new URL(referer);
  const ours = url.origin === new URL(publicUrl).origin || url.host === c.req.header("host");
  return ours ? safeNext(url.pathname + url.search) : "/";
}

export function consoleRoutes(deps: ConsoleDeps) {
  const { config, sql, readSql, log } = deps;
  // Pages read through pagePool (pools.ts). Sessions stay on the primary pool (below):
  // a session written at sign-in must be found by the very next request, which a replica
  // may not have replayed yet (a sign-in loop).
  const pools = { sql, readSql };
  const limiter = deps.limiter ?? createSignInLimiter();
  const matches = secretMatcher(config.apiToken);
  const cookies = { publicUrl: config.publicUrl, sessionHours: config.console.sessionHours, apiToken: config.apiToken };
  const app = new Hono<ConsoleEnv>();

  const headers = secureHeaders({
    contentSecurityPolicy: {
      defaultSrc: ["'self'"],
      scriptSrc: ["'self'"],
      styleSrc: ["'self'"],
      imgSrc: ["'self'", "data:"],
      connectSrc: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
      objectSrc: ["'none'"],
    },
    referrerPolicy: "same-origin",
    strictTransportSecurity: config.publicUrl.startsWith("https:") ? "max-age=31536000" : false,
  });
  for (const path of [...CONSOLE_PATHS, "/sign-in", "/sign-out", "/assets/*"]) app.use(path, headers);
  app.route("/", assetRoutes());
  // Before anything reads a form: its size, then what it holds (formInput).
  for (const path of [...CONSOLE_PATHS, "/sign-in", "/sign-out"]) {
    app.use(path, bodyLimit({ maxSize: CONSOLE_FORM_MAX_BYTES, onError: (c) => c.text(`Payload too large: a form of the console holds at most ${CONSOLE_FORM_MAX_BYTES} bytes`, 413) }));
    app.use(path, formInput(config.publicUrl));
  }

  /** `tokenRefused`: the error is about the token typed (the field is marked and focused). */
  const signInPage = (c: Context, o: { next: string; error?: string | undefined; tokenRefused?: boolean; notice?: string | undefined; status?: 200 | 403 | 429 }) =>
    renderPage(c, {
      title: "Sign in",
      status: o.status ?? 200,
      body: html`<div class="signin">
        <h1>Sign in to tracklane</h1>
        ${o.error ? errorBox(o.error, o.tokenRefused ? FIELD_ERROR_ID : undefined) : null}
        ${o.notice ? noticeBox(o.notice) : null}
        <form method="post" action="/sign-in">
          <input type="hidden" name="next" value=${o.next} />
          <label>API token<input name="token" type="password" autocomplete="current-password" required ...${fieldError(o.tokenRefused === true)} /></label>
          <button type="submit">Sign in</button>
        </form>
        <p>The token is tracklane's API_TOKEN (printed at the first start, or in DATA_DIR/api-token).</p>
      </div>`,
    });

  /**
   * A post without a live session (it expired while the page was open, or the API token
   * changed): nothing was done, and the sign-in form says so, coming back to the page the
   * post was sent from. Signing out needs no session to have ended.
   */
  const expired = (c: Context) => {
    if (c.req.path === "/sign-out") return c.redirect("/sign-in?signed-out=1", 303);
    return signInPage(c, {
      next: refererPath(c, config.publicUrl),
      status: 403,
      error: "Your session has ended, so that was not done: sign in, then do it again.",
    });
  };

  app.get("/sign-in", async (c) => {
    const next = safeNext(c.req.query("next"));
    const token = getCookie(c, SESSION_COOKIE);
    if (token && (await findSession(sql, token, config.apiToken))) return c.redirect(next, 303);
    return signInPage(c, { next, notice: c.req.query("signed-out") === "1" ? "Signed out." : undefined });
  });

  // formInput refused a post from elsewhere before its form was read.
  app.post("/sign-in", async (c) => {
    const form = await c.req.parseBody();
    const next = safeNext(typeof form["next"] === "string" ? form["next"] : undefined);
    const who = clientAddress(c, config.console.trustedProxies);
    const wait = limiter.retryAfterS(who);
    if (wait > 0) {
      c.header("retry-after", String(wait));
      return signInPage(c, { next, status: 429, error: `Too many failed sign-ins from your address: try again in ${wait} s.` });
    }
    const token = form["token"];
    if (typeof token !== "string" || !matches(token)) {
      limiter.failed(who);
      // The address, never the token: a mistyped token is usually most of the real one.
      log.warn({ address: who }, "console sign-in failed");
      return signInPage(c, { next, status: 403, error: "That is not the API token.", tokenRefused: true });
    }
    limiter.succeeded(who);
    await signIn(c, sql, cookies);
    return c.redirect(next, 303);
  });

  app.post("/sign-out", sessionRequired(sql, config.apiToken, expired), csrfRequired(), async (c) => {
    await endSession(sql, c.get("session").id);
    clearSessionCookie(c, cookies);
    return c.redirect("/sign-in?signed-out=1", 303);
  });

  for (const path of CONSOLE_PATHS) {
    app.use(path, sessionRequired(sql, config.apiToken, expired));
    app.use(path, csrfRequired());
    // Pages hold order data: neither proxies nor the back button should keep them. The
    // time from here to the response (queries and rendering) goes out in Server-Timing,
    // which the console bench reads.
    app.use(path, async (c, next) => {
      const started = performance.now();
      await next();
      if (!c.res.headers.has("cache-control")) c.header("cache-control", "no-store");
      c.res.headers.append("server-timing", `page;dur=${(performance.now() - started).toFixed(1)}`);
    });
  }
  const appending = <T>(work: () => Promise<T>) => withPartitionsMade(sql, config.events.partition, log, work);
  app.route("/", orderPages({ ...pools, timeZone: config.provider.timezone, resend: { dedupesOrders: config.provider.dedupesOrders }, appending }));
  app.route("/", attentionPages({ ...pools, timeZone: config.provider.timezone, stuckAfterMin: config.console.stuckAfterMin, lowWatermark: config.awb.lowWatermark }));
  app.route("/", awbPages({ ...pools, timeZone: config.provider.timezone, settings: config.awb, provider: deps.provider }));
  app.route("/", notificationPages({ ...pools, timeZone: config.provider.timezone }));
  app.route("/", systemPages({ ...pools, timeZone: config.provider.timezone }));
  return app;
}
