/**
 * zod-openapi's createRoute, with two rules for every /v1 route, so that nothing a client
 * sends is silently ignored:
 * - a query parameter the route does not define is refused (400 invalid_parameter naming
 *   it), on a route that takes none as on the lists (whose query objects are strict
 *   already): `GET /v1/awb/pool?mode=fresh`, a misspelt filter;
 * - a route that takes no body (`…/stop-reattempt`, `…/test`, `…/retry`) refuses one
 *   (422 validation_failed): none, an empty one or `{}` is fine, `{"reason": …}` is not
 *   taken as if it had been read.
 */
import { createRoute as openApiRoute, z } from "@hono/zod-openapi";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";
import { ErrorSchema } from "./schemas.ts";

const NO_BODY = "this route takes no body: send none, or {}";

const noBody: MiddlewareHandler = async (c, next) => {
  const text = (await c.req.text()).trim();
  if (text !== "" && !/^\{\s*\}$/.test(text)) throw new ApiError("validation_failed", `invalid body: ${NO_BODY}`, { issues: [{ path: "body", message: NO_BODY }] });
  await next();
};

interface RouteLike {
  method: string;
  request?: { query?: unknown; body?: unknown };
  responses: object;
  middleware?: MiddlewareHandler | MiddlewareHandler[];
}

function withApiRules<R extends RouteLike>(config: R): R {
  const request = config.request?.query === undefined ? { ...config.request, query: z.strictObject({}) } : config.request;
  if (config.request?.body !== undefined || !["post", "put", "patch"].includes(config.method)) return { ...config, request };
  const given = config.middleware === undefined ? [] : Array.isArray(config.middleware) ? config.middleware : [config.middleware];
  const refused = { description: `validation_failed: ${NO_BODY}`, content: { "application/json": { schema: ErrorSchema } } };
  return { ...config, request, middleware: [noBody, ...given], responses: { 422: refused, ...config.responses } };
}

export const createRoute: typeof openApiRoute = (config) => openApiRoute(withApiRules(config));
