/**
 * Which methods a path has routes for, so that a request with another method is told 405
 * with `Allow` (RFC 9110 §15.5.6) instead of a 404 that says the resource is not there.
 */

interface RouteLike {
  method: string;
  path: string;
}

interface Compiled {
  method: string;
  segments: readonly (string | null)[];
}

/** `/v1/orders/:order/events` as its segments, a parameter as null; a wildcard route is left out. */
function compile(route: RouteLike): Compiled | undefined {
  if (route.method === "ALL" || route.path.includes("*")) return undefined;
  return { method: route.method, segments: route.path.split("/").map((s) => (s.startsWith(":") ? null : s)) };
}

/**
 * A lookup of the methods routed for a path, built once from the app's routes (all of them
 * are registered before the first request). GET brings HEAD, which Hono answers with it.
 */
export function methodsFor(routes: () => readonly RouteLike[]): (path: string) => string[] {
  let compiled: Compiled[] | undefined;
  return (path) => {
    compiled ??= routes().flatMap((r) => compile(r) ?? []);
    const segments = path.split("/");
    const methods = new Set<string>();
    for (const route of compiled) {
      if (route.segments.length !== segments.length) continue;
      if (route.segments.every((s, i) => s === null ? segments[i] !== "" : s === segments[i])) methods.add(route.method);
    }
    if (methods.has("GET")) methods.add("HEAD");
    return [...methods].sort();
  };
}
