import { randomBytes } from "node:crypto";
import type { Context } from "hono";
import { safeEqual } from "../domain/secrets.ts";
import { PRODUCT_AUTH } from "../provider/products.ts";
import type { EmulatorState, Principal } from "./state.ts";
import type { Clock } from "./clock.ts";
import type { EmulatorApp, EmulatorContext, EmulatorEnv, EmulatorMiddleware, ResolvedOptions } from "./types.ts";

/**
 * Provider auth (provider-api.md §5, PRODUCT.md §3): `Token <token>` and OAuth2 client
 * credentials issuing Bearer tokens that expire on the emulator clock. The product matrix
 * is enforced: a product without token auth refuses tokens with 401, a product without
 * OAuth refuses the exchange (400 unauthorized_client, RFC 6749 §5.2) and every Bearer.
 */

function unauthorized(c: Context<EmulatorEnv>, detail: string, scheme: string) {
  c.header("WWW-Authenticate", scheme);
  return c.json({ detail }, 401);
}

export function createRequireAuth(options: ResolvedOptions, state: EmulatorState, clock: Clock): EmulatorMiddleware {
  const support = PRODUCT_AUTH[options.product];
  const scheme = support.token ? "Token" : "Bearer";
  return async (c, next) => {
    const header = c.req.header("authorization") ?? "";
    const [kind = "", value = ""] = header.trim().split(/\s+/, 2);
    let principal: Principal | null = null;
    if (header === "") return unauthorized(c, "Authentication credentials were not provided.", scheme);
    if (kind.toLowerCase() === "token") {
      if (!support.token) return unauthorized(c, `Token authentication is not available for ${options.product}; use OAuth2.`, scheme);
      const index = options.tokens.findIndex((t) => safeEqual(value, t));
      if (index >= 0) principal = { id: `token-${index + 1}`, method: "token" };
    } else if (kind.toLowerCase() === "bearer") {
      if (!support.oauth) return unauthorized(c, `OAuth2 is not available for ${options.product}.`, scheme);
      const issued = state.oauthTokens.get(value);
      if (issued && clock.now() >= issued.expiresAt) return unauthorized(c, "Token has expired.", scheme);
      if (issued) principal = { id: issued.principalId, method: "oauth" };
    }
    if (!principal) return unauthorized(c, "Invalid token.", scheme);
    c.set("principal", principal);
    await next();
  };
}

function parseBasic(header: string | undefined): { clientId: string; clientSecret: string } | null {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (!match?.[1]) return null;
  const decoded = Buffer.from(match[1], "base64").toString("utf8");
  const colon = decoded.indexOf(":");
  if (colon < 0) return null;
  return { clientId: decoded.slice(0, colon), clientSecret: decoded.slice(colon + 1) };
}

/** POST {gateway_url}/oauth/token/ (form `grant_type=client_credentials`, Basic credentials). */
export function registerOAuthRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  const { options, state, clock } = ctx;
  app.post(ctx.paths.oauthToken, async (c) => {
    const creds = parseBasic(c.req.header("authorization"));
    const client = creds && options.clients.find((k) => safeEqual(creds.clientId, k.clientId) && safeEqual(creds.clientSecret, k.clientSecret));
    if (!client) {
      c.header("WWW-Authenticate", 'Basic realm="oauth"');
      return c.json({ error: "invalid_client", detail: "Invalid client credentials." }, 401);
    }
    if (!PRODUCT_AUTH[options.product].oauth) {
      return c.json({ error: "unauthorized_client", detail: `OAuth2 is not available for ${options.product}; use token authentication.` }, 400);
    }
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    if (form["grant_type"] !== "client_credentials") {
      return c.json({ error: "unsupported_grant_type", detail: "grant_type must be client_credentials." }, 400);
    }
    const accessToken = randomBytes(24).toString("hex");
    const lifetime = options.oauth.lifetimeSeconds;
    state.oauthTokens.set(accessToken, { principalId: `client-${client.clientId}`, expiresAt: clock.now() + lifetime * 1000 });
    const body: Record<string, unknown> = { access_token: accessToken, token_type: "Bearer" };
    if (!options.oauth.omitExpiresIn) body["expires_in"] = lifetime;
    c.header("Cache-Control", "no-store");
    return c.json(body, 200);
  });
}
