/**
 * zod-openapi's createRoute, with one rule for every /v1 route: a query parameter the
 * route does not define is refused (400 invalid_parameter naming it), on a route that
 * takes none as on the lists (whose query objects are strict already), so that
 * `GET /v1/awb/pool?mode=fresh` or a misspelt filter is never silently ignored.
 */
import { createRoute as openApiRoute, z } from "@hono/zod-openapi";

/** No query schema given: the empty strict one (it adds no parameter to the document). */
function withStrictQuery<R extends { request?: { query?: unknown } }>(config: R): R {
  if (config.request?.query !== undefined) return config;
  return { ...config, request: { ...config.request, query: z.strictObject({}) } };
}

export const createRoute: typeof openApiRoute = (config) => openApiRoute(withStrictQuery(config));
