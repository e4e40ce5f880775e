import { providerTime } from "./behaviour.ts";
import { STEP_TIME_FIELDS, stepTimeField } from "./lifecycle.ts";
import { riderDetails } from "./payloads.ts";
import { notFound } from "./respond.ts";
import type { EmulatorOrder } from "./state.ts";
import type { EmulatorApp, EmulatorContext, EmulatorMiddleware } from "./types.ts";

/**
 * GET /api/v2/orders/{svc_order_id}/status/: not in provider-api.md, but public
 * integrations of the real provider use it (PRODUCT.md §10). It only reads: no callback.
 * With `status_endpoint` off it answers as a server without the route (Django's HTML
 * 404), which is how a client learns that the provider does not offer it.
 */

const HTML_NOT_FOUND =
  '<!doctype html>\n<html lang="en">\n<head>\n  <title>Not Found</title>\n</head>\n<body>\n  <h1>Not Found</h1><p>The requested resource was not found on this server.</p>\n</body>\n</html>\n';

/** Every step time key, null until the order reaches that step; a repeated step keeps its latest time. */
function orderDetails(ctx: EmulatorContext, order: EmulatorOrder): Record<string, string | null> {
  const times: Record<string, string | null> = Object.fromEntries(STEP_TIME_FIELDS.map((f) => [f, null]));
  for (const step of order.history) {
    const field = stepTimeField(step.status);
    if (field in times) times[field] = providerTime(ctx.behaviour, step.at);
  }
  return times;
}

function statusAnswer(ctx: EmulatorContext, order: EmulatorOrder): Record<string, unknown> {
  const rider = riderDetails(order, order.lastLocation);
  return {
    status: order.status,
    sfx_order_id: Number(order.svcOrderId),
    client_order_id: order.clientOrderId,
    track_url: order.trackUrl,
    ...(rider ? { rider_details: rider } : {}),
    order_details: orderDetails(ctx, order),
  };
}

export function registerStatusRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  // Before auth: a server without the route answers 404 whoever asks.
  const routeExists: EmulatorMiddleware = async (c, next) => {
    if (!ctx.behaviour.status_endpoint) return c.html(HTML_NOT_FOUND, 404);
    await next();
  };

  app.get(ctx.paths.orderStatus, routeExists, ctx.requireAuth, (c) => {
    const order = ctx.state.orders.get(c.req.param("svc_order_id") ?? "");
    if (!order) return notFound(c);
    return c.json({ message: "Success", data: statusAnswer(ctx, order) });
  });
}
