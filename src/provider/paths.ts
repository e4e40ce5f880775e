/**
 * Every provider path in one table, used by the client (to call) and by the emulator (to
 * route), so the two cannot disagree. Order and sandbox paths live on the base URL, OAuth
 * and AWB paths on the gateway URL.
 */
export const PATHS = {
  // {base_url}: store orders (§4.2)
  placeOrder: "/api/v2/stores/orders/",
  editOrder: "/api/v1/stores/edit-order/",
  cancelOrder: "/api/v2/orders/:svc_order_id/cancel/",
  dispatchReady: "/api/v2/orders/:coid/dispatch-ready/",
  stopReattempt: "/api/v2/orders/stop-reattempt/",
  /** Not in provider-api.md: the status endpoint public integrations use (PRODUCT.md §10). */
  orderStatus: "/api/v2/orders/:svc_order_id/status/",
  // {base_url}: staging sandbox (§4.1)
  sandboxAllot: "/app/v3/sandbox/clusters/orders/:svc_order_id/allot/",
  sandboxRiderArrival: "/app/v3/sandbox/order/:svc_order_id/update-rider-arrival/",
  sandboxCollect: "/app/v3/sandbox/order/:svc_order_id/collect/",
  sandboxDoorstepArrival: "/app/v3/sandbox/order/:svc_order_id/customer-doorstep-arrival/",
  sandboxDeliver: "/app/v3/sandbox/order/:svc_order_id/deliver/",
  sandboxCustomerReturn: "/app/v3/sandbox/order/:svc_order_id/customer-return/",
  sandboxSellerReturn: "/app/v3/sandbox/order/:svc_order_id/seller-return/",
  sandboxRiderLocation: "/app/v3/sandbox/order/:svc_order_id/update-rider-location/",
  // {gateway_url}: auth (§5.2) and AWBs (§4.3)
  oauthToken: "/oauth/token/",
  awbPool: "/v3/clients/generate_marketplace_awb/",
  awbFresh: "/v1/clients/awb/",
  awbFreshPoll: "/v1/clients/awb/:request_id/",
} as const;

export type PathName = keyof typeof PATHS;
export type Paths = Record<PathName, string>;

const PATH_NAMES = Object.keys(PATHS) as PathName[];
const paramsOf = (template: string) => (template.match(/:[A-Za-z_]+/g) ?? []).sort().join(",");

/** Every path: the defaults with `overrides` in place of theirs. */
export function resolvePaths(overrides: Partial<Paths> = {}): Paths {
  return { ...PATHS, ...overrides };
}

/**
 * PROVIDER_PATHS, `name=/path,name=/path` (names as in PATHS, e.g.
 * `oauthToken=/auth/token/,awbPool=/v2/awb/generate/`), into the paths it replaces, or the
 * problems with it, one sentence each. A path starts with `/`, has no spaces, query or
 * fragment, and names the same `:parameters` as the path it replaces.
 */
export function parsePathOverrides(raw: string): { paths: Partial<Paths>; problems: string[] } {
  const paths: Partial<Paths> = {};
  const problems: string[] = [];
  for (const entry of raw.split(",").map((e) => e.trim()).filter((e) => e !== "")) {
    const eq = entry.indexOf("=");
    const name = (eq < 0 ? entry : entry.slice(0, eq)).trim();
    const path = eq < 0 ? "" : entry.slice(eq + 1).trim();
    if (!(PATH_NAMES as string[]).includes(name)) {
      problems.push(`"${name}" is not a provider path; the names are ${PATH_NAMES.join(", ")}`);
      continue;
    }
    const key = name as PathName;
    if (key in paths) problems.push(`${key} is given twice`);
    else if (!/^\/[^\s?#]*$/.test(path)) problems.push(`${key} must be a path starting with / (no spaces, query or fragment), e.g. ${key}=${PATHS[key]}`);
    else if (paramsOf(path) !== paramsOf(PATHS[key])) {
      problems.push(`${key} must name ${paramsOf(PATHS[key]) || "no :parameters"}, as ${PATHS[key]} does`);
    } else paths[key] = path;
  }
  return { paths, problems };
}

/** `fillPath("/a/:id/b/", { id: "x y" })` -> `/a/x%20y/b/`. Throws on a missing parameter. */
export function fillPath(template: string, params: Record<string, string> = {}): string {
  return template.replace(/:([A-Za-z_]+)/g, (_match, name: string) => {
    const value = params[name];
    if (value === undefined || value === "") throw new Error(`missing path parameter ${name}`);
    return encodeURIComponent(value);
  });
}
