/**
 * The provider's products and how each authenticates (provider-api.md §5.3). Config uses
 * this to refuse impossible combinations at start; the client and the emulator use the
 * OAuth token lifetimes.
 */
export const PRODUCTS = [
  "reverse_logistics",
  "forward_logistics",
  "exchange",
  "hyperlocal_marketplace",
  "hyperlocal_dedicated_store",
  "quick_commerce",
] as const;

export type Product = (typeof PRODUCTS)[number];

interface ProductAuth {
  token: boolean;
  oauth: boolean;
  /** OAuth token lifetime when the token response carries no `expires_in`. */
  oauthLifetimeSeconds: number;
}

const HOUR = 3600;

export const PRODUCT_AUTH: Record<Product, ProductAuth> = {
  reverse_logistics: { token: true, oauth: true, oauthLifetimeSeconds: HOUR },
  forward_logistics: { token: true, oauth: true, oauthLifetimeSeconds: HOUR },
  exchange: { token: true, oauth: true, oauthLifetimeSeconds: HOUR },
  hyperlocal_marketplace: { token: true, oauth: true, oauthLifetimeSeconds: 24 * HOUR },
  hyperlocal_dedicated_store: { token: true, oauth: false, oauthLifetimeSeconds: HOUR },
  quick_commerce: { token: false, oauth: true, oauthLifetimeSeconds: HOUR },
};

export type AuthMethod = "token" | "oauth";

/**
 * Which auth method a product uses given the credentials present, or why it cannot work.
 * With both kinds of credentials on a product that supports both, OAuth wins (short-lived
 * tokens are the safer default).
 */
export function chooseAuthMethod(
  product: Product,
  creds: { token: boolean; oauth: boolean },
): { ok: true; method: AuthMethod } | { ok: false; message: string } {
  const support = PRODUCT_AUTH[product];
  if (creds.oauth && support.oauth) return { ok: true, method: "oauth" };
  if (creds.token && support.token) return { ok: true, method: "token" };
  if (creds.oauth && !support.oauth) {
    return { ok: false, message: `${product} does not support OAuth2; set PROVIDER_TOKEN instead of PROVIDER_CLIENT_ID/PROVIDER_CLIENT_SECRET` };
  }
  if (creds.token && !support.token) {
    return { ok: false, message: `${product} supports only OAuth2; set PROVIDER_CLIENT_ID and PROVIDER_CLIENT_SECRET` };
  }
  const wanted = support.token && support.oauth ? "PROVIDER_TOKEN, or PROVIDER_CLIENT_ID and PROVIDER_CLIENT_SECRET" : support.token ? "PROVIDER_TOKEN" : "PROVIDER_CLIENT_ID and PROVIDER_CLIENT_SECRET";
  return { ok: false, message: `${product} needs credentials: set ${wanted}` };
}
