/**
 * The provider's staging sandbox, proxied (PRODUCT.md §6): move an order through its
 * lifecycle to see callbacks arrive. Refused in production.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { requireOrder } from "../../orders/read.ts";
import type { ProviderClient } from "../../provider/client.ts";
import { ProviderError, describeProviderError } from "../../provider/errors.ts";
import { SANDBOX_ACTION_NAMES } from "../../provider/schemas.ts";
import { ApiError } from "../errors.ts";
import { ErrorSchema } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { optionalJsonBody, validationHook } from "../validation.ts";
import { errors, refFrom } from "./orders.ts";

const IssuesSchema = z.array(z.looseObject({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).min(1);

/** A provider failure as the one error model: refused -> 422 with its message, unreachable -> 502. */
function providerFailure(err: unknown): ApiError {
  if (!(err instanceof ProviderError)) return err instanceof ApiError ? err : new ApiError("internal_error", "internal error", { cause: err });
  if (err.kind === "invalid_request") {
    // The client refused the body before sending it: its schema's issues, as every 422 lists them.
    const issues = IssuesSchema.safeParse(err.body);
    const listed = issues.success ? { issues: issues.data.map((i) => ({ path: i.path.join(".") || "body", message: i.message })) } : {};
    return new ApiError("validation_failed", err.providerMessage || err.message, listed);
  }
  const message = `provider ${describeProviderError(err)}`;
  return err.retryable || err.kind === "auth" ? new ApiError("provider_error", message) : new ApiError("provider_rejected", message);
}

export function sandboxRoutes(deps: { sql: Sql; provider: ProviderClient | undefined; env: "staging" | "production" }) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const paths = [
    { by: "client", path: "/v1/sandbox/orders/{order}/{action}", param: "order" },
    { by: "svc", path: "/v1/sandbox/orders/by-svc-id/{svc_order_id}/{action}", param: "svc_order_id" },
  ] as const;
  for (const { by, path, param } of [...paths].reverse()) {
    optionalJsonBody(app, path);
    app.openapi(
      createRoute({
        method: "post",
        path,
        tags: ["sandbox"],
        summary: "Drive an order through the provider's staging sandbox",
        description: `action: ${SANDBOX_ACTION_NAMES.join(", ")}. The body is the provider's sandbox body for the action: allot {rider_id, only_allot?}; collect {status: "COLLECTED", pickup_lat?, pickup_lng?}; doorstep-arrival {time_arrival?, arrival_lat?, arrival_lng?, arrival_accuracy?}; deliver {status: "DELIVERED", delivery_latitude?, delivery_longitude?, is_partial_delivery?}; rider-location {latitude, longitude, accuracy? (metres)}; rider-arrival and seller-return take any object, passed on as it is; customer-return takes none. A body refused before it is sent is 422 listing its fields. Staging only (403 sandbox_disabled in production).`,
        security: [{ Bearer: [] }],
        request: {
          params: z.object({
            [param]: z.string().min(1).max(128).openapi({ param: { name: param, in: "path" } }),
            action: z.enum(SANDBOX_ACTION_NAMES).openapi({ param: { name: "action", in: "path" } }),
          }),
          body: { required: false, content: { "application/json": { schema: z.record(z.string(), z.unknown()) } } },
        },
        responses: {
          200: { description: "The provider's response", content: { "application/json": { schema: z.record(z.string(), z.unknown()) } } },
          403: { description: "Production: sandbox disabled", content: { "application/json": { schema: ErrorSchema } } },
          ...errors,
          409: { description: "conflict: the order is not placed with the provider yet (no svc_order_id)", content: { "application/json": { schema: ErrorSchema } } },
          422: { description: "validation_failed: a body refused before it is sent; provider_rejected: the provider refused the call", content: { "application/json": { schema: ErrorSchema } } },
          502: { description: "provider_error: the provider failed or could not be reached", content: { "application/json": { schema: ErrorSchema } } },
          503: { description: "provider_unavailable: no provider configured", content: { "application/json": { schema: ErrorSchema } } },
        },
      }),
      async (c) => {
        if (deps.env === "production") throw new ApiError("sandbox_disabled", "the sandbox exists in staging only (PROVIDER_ENV=production)");
        if (!deps.provider) throw new ApiError("provider_unavailable", "no provider configured (PROVIDER_BASE_URL)");
        const params = c.req.valid("param") as Record<string, string> & { action: (typeof SANDBOX_ACTION_NAMES)[number] };
        const order = await requireOrder(deps.sql, refFrom(by, params, param));
        if (!order.svc_order_id) throw new ApiError("conflict", "the order has no svc_order_id yet: it is not placed with the provider");
        // By provider id: the provider order named, which may be the order's second one.
        const svc = by === "svc" ? params[param]! : order.svc_order_id;
        try {
          return c.json(await deps.provider.sandbox(params.action, svc, c.req.valid("json") ?? {}), 200);
        } catch (err) {
          throw providerFailure(err);
        }
      },
    );
  }
  return app;
}
