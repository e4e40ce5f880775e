import { ProviderError } from "./errors.ts";
import { interpret, send } from "./http.ts";
import type { HttpDeps } from "./http.ts";
import { PRODUCT_AUTH } from "./products.ts";
import type { Product } from "./products.ts";
import { OAuthTokenResponseSchema } from "./schemas.ts";
import type { OAuthTokenResponse } from "./schemas.ts";

/**
 * Authorization for provider calls (provider-api.md §5, PRODUCT.md §3).
 *
 * `header()` gives the Authorization value for the next call, or rejects with a
 * ProviderError of stage "token" when no token can be had (the call is then never sent).
 * After a 401 the client calls `invalidate(header)` with the value it used and, when
 * `renewable`, retries once with a fresh `header()`.
 */
export interface ProviderAuth {
  readonly renewable: boolean;
  header(): Promise<string>;
  invalidate(usedHeader: string): void;
}

/** Static token: `Authorization: Token <token>`; it never expires, nothing to renew. */
export function createTokenAuth(token: string): ProviderAuth {
  const value = `Token ${token}`;
  return {
    renewable: false,
    header: () => Promise.resolve(value),
    invalidate: () => {},
  };
}

export interface OAuthOptions {
  clientId: string;
  clientSecret: string;
  product: Product;
  gatewayUrl: string;
  tokenPath: string;
  http: HttpDeps;
  /** Told as each exchange ends: how long it took, and its ProviderError when it failed. */
  onExchange?: (ended: TokenExchangeEnd) => void;
}

/** One OAuth exchange, as it ended: `error` (a stage "token" ProviderError) when it failed. */
export interface TokenExchangeEnd {
  seconds: number;
  error?: unknown;
}

/** `Authorization: Basic base64(client_id:client_secret)` for the token exchange. */
function basicCredentials(clientId: string, clientSecret: string): string {
  return `Basic ${Buffer.from(`${clientId}:${clientSecret}`, "utf8").toString("base64")}`;
}

/**
 * One client-credentials exchange: POST {gateway_url}/oauth/token/ with Basic credentials
 * and `grant_type=client_credentials`. Every failure is a `tokenFailure`.
 */
async function exchangeClientCredentials(options: OAuthOptions): Promise<OAuthTokenResponse> {
  const req = {
    method: "POST" as const,
    baseUrl: options.gatewayUrl,
    path: options.tokenPath,
    headers: { authorization: basicCredentials(options.clientId, options.clientSecret) },
    form: { grant_type: "client_credentials" },
  };
  try {
    const res = await send(options.http, req);
    return interpret(options.http, req, res, OAuthTokenResponseSchema);
  } catch (err) {
    throw err instanceof ProviderError ? tokenFailure(err) : err;
  }
}

/**
 * A failed exchange, as the error of the call that needed the token:
 * - stage "token": that call was never sent (deliveryOf), whatever happened here, so a
 *   place is retried like any unsent call, and its error says `token request failed`;
 * - a refusal (4xx) is an "auth" error: wrong credentials or a product without OAuth do
 *   not get better by retrying; otherwise the kind (and retryability) stays;
 * - no body: a token answer that failed its schema may hold the token itself, and errors
 *   reach logs and job records. The provider's words stay in providerMessage.
 */
function tokenFailure(err: ProviderError): ProviderError {
  return new ProviderError({
    kind: err.kind === "client" ? "auth" : err.kind,
    stage: "token",
    operation: err.operation,
    status: err.status,
    retryAfterMs: err.retryAfterMs,
    providerMessage: err.providerMessage,
    // The socket's error, for a network failure; the first ProviderError would add only the body.
    cause: err.cause,
  });
}

interface CachedToken {
  header: string;
  expiresAt: number;
  renewAt: number;
  response: OAuthTokenResponse;
}

/**
 * When to renew a token of `lifetimeMs`: at 90% of its lifetime or 60 s before expiry,
 * whichever is earlier, but never before half of it has passed (so a very short-lived
 * token is not re-exchanged on every call).
 */
export function renewalDelayMs(lifetimeMs: number): number {
  return Math.max(Math.min(lifetimeMs * 0.9, lifetimeMs - 60_000), lifetimeMs * 0.5);
}

/**
 * OAuth2 client credentials with a cached Bearer token, renewed before expiry on the
 * client's clock (`http.now`). One exchange at a time: concurrent callers share the
 * in-flight promise. When an early renewal fails and the current token has not expired,
 * the current token is used and renewal is tried again on the next call.
 */
export function createOAuthAuth(options: OAuthOptions): ProviderAuth & { exchange(): Promise<OAuthTokenResponse> } {
  const now = options.http.now;
  const defaultLifetimeMs = PRODUCT_AUTH[options.product].oauthLifetimeSeconds * 1000;
  let cached: CachedToken | null = null;
  let inflight: Promise<CachedToken> | null = null;

  function renew(): Promise<CachedToken> {
    if (inflight) return inflight;
    const startedAt = now();
    const started = performance.now();
    const ended = (error?: unknown) => options.onExchange?.({ seconds: (performance.now() - started) / 1000, ...(error === undefined ? {} : { error }) });
    inflight = exchangeClientCredentials(options)
      .then(
        (res) => {
          ended();
          return res;
        },
        (err: unknown) => {
          ended(err);
          throw err;
        },
      )
      .then((res) => {
        const lifetimeMs = res.expires_in === undefined ? defaultLifetimeMs : res.expires_in * 1000;
        const token: CachedToken = {
          header: `Bearer ${res.access_token}`,
          // Measured from when we asked: the gateway started the lifetime no earlier.
          expiresAt: startedAt + lifetimeMs,
          renewAt: startedAt + renewalDelayMs(lifetimeMs),
          response: res,
        };
        cached = token;
        options.http.logger?.info({ lifetimeSeconds: Math.round(lifetimeMs / 1000) }, "provider oauth token obtained");
        return token;
      })
      .finally(() => {
        inflight = null;
      });
    return inflight;
  }

  return {
    renewable: true,
    async header() {
      const current = cached;
      const t = now();
      if (current && t < current.renewAt) return current.header;
      if (current && t < current.expiresAt) {
        try {
          return (await renew()).header;
        } catch (err) {
          options.http.logger?.warn({ error: err instanceof Error ? err.message : String(err) }, "provider oauth early renewal failed");
          return current.header;
        }
      }
      return (await renew()).header;
    },
    invalidate(usedHeader) {
      // Only the token that was refused: a concurrent caller may already hold a new one.
      if (cached && cached.header === usedHeader) cached = null;
    },
    async exchange() {
      cached = null;
      return (await renew()).response;
    },
  };
}
