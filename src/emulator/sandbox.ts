import type { Context } from "hono";
import {
  AllotBodySchema,
  CollectBodySchema,
  DeliverBodySchema,
  DoorstepArrivalBodySchema,
  FreeBodySchema,
  RiderLocationBodySchema,
} from "../provider/schemas.ts";
import { isTerminal, riderFor, STATUS, transition } from "./lifecycle.ts";
import { locationCallback } from "./payloads.ts";
import type { Coordinates } from "./payloads.ts";
import { failure, notFound, readBody } from "./respond.ts";
import type { EmulatorOrder } from "./state.ts";
import type { EmulatorApp, EmulatorContext, EmulatorEnv, EmulatorMiddleware } from "./types.ts";

/**
 * Staging sandbox (provider-api.md §4.1): moves orders through the lifecycle and sends the
 * callbacks. In production these paths do not exist (404, before auth). Every step is
 * allowed from any status that is not terminal (the spec's "any").
 */
export function registerSandboxRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  const { paths, state, clock, requireAuth } = ctx;

  const stagingOnly: EmulatorMiddleware = async (c, next) => {
    if (ctx.options.env !== "staging") return notFound(c);
    await next();
  };

  /** The addressed order, or the answer to give when it is unknown or finished. */
  function target(c: Context<EmulatorEnv>): { order: EmulatorOrder } | { response: Response } {
    const order = state.orders.get(c.req.param("svc_order_id") ?? "");
    if (!order) return { response: notFound(c, "Order not found.") };
    if (isTerminal(order)) return { response: failure(c, { svc_order_id: [`order is already ${order.status}`] }) };
    return { order };
  }

  app.put(paths.sandboxAllot, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, AllotBodySchema);
    if (!parsed.ok) return parsed.response;
    const { order } = t;
    const onlyAllot = parsed.data.only_allot === 1 || parsed.data.only_allot === true;
    if (onlyAllot) {
      // §3: only_allot on an order that already has a rider changes nothing and sends no ACCEPTED.
      if (order.rider) return c.json({ message: "Rider already allotted" });
      order.rider = riderFor(parsed.data.rider_id);
      transition(ctx, order, STATUS.accepted);
      return c.json({ message: "Rider allotted successfully" });
    }
    order.rider = riderFor(parsed.data.rider_id);
    transition(ctx, order, STATUS.allotted);
    return c.json({ message: "Rider allotted successfully" });
  });

  // Body not in the spec: any JSON object (or none), ignored.
  app.post(paths.sandboxRiderArrival, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, FreeBodySchema, { emptyAsObject: true });
    if (!parsed.ok) return parsed.response;
    transition(ctx, t.order, STATUS.arrived);
    return c.json({ message: "Rider arrival updated successfully", status: t.order.status });
  });

  app.put(paths.sandboxCollect, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, CollectBodySchema);
    if (!parsed.ok) return parsed.response;
    const { order } = t;
    order.pickedUp = true;
    order.virtualContactNumber ??= state.ids.contactNumber();
    transition(ctx, order, STATUS.collected, { extra: { virtual_contact_number: order.virtualContactNumber } });
    return c.json({ message: "Order collected", virtual_contact_number: order.virtualContactNumber });
  });

  app.put(paths.sandboxDoorstepArrival, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, DoorstepArrivalBodySchema);
    if (!parsed.ok) return parsed.response;
    const b = parsed.data;
    // Where the rider arrived goes into this callback only; it is not a location update.
    const location: Coordinates | null =
      b.arrival_lat !== undefined && b.arrival_lng !== undefined
        ? { latitude: b.arrival_lat, longitude: b.arrival_lng, accuracy: b.arrival_accuracy ?? null }
        : null;
    transition(ctx, t.order, STATUS.doorstep, { location });
    return c.json({ status: t.order.status, message: "Customer doorstep arrival updated" });
  });

  app.put(paths.sandboxDeliver, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, DeliverBodySchema);
    if (!parsed.ok) return parsed.response;
    const partial = parsed.data.is_partial_delivery ?? false;
    transition(ctx, t.order, STATUS.delivered, { extra: { is_partial_delivery: partial } });
    return c.json({ message: "Order delivered" });
  });

  // No body. Mints an RTS order id (the spec says it "may be present"; we always give one).
  app.put(paths.sandboxCustomerReturn, stagingOnly, requireAuth, (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const { order } = t;
    order.rtsOrderId = state.ids.orderId();
    transition(ctx, order, STATUS.cancelledByCustomer, { extra: { rts_order_id: Number(order.rtsOrderId) } });
    return c.json({ status: order.status, message: "Customer return recorded", rts_order_id: order.rtsOrderId });
  });

  // Body, response and resulting status not in the spec: any JSON object (or none); RTS_INITIATED.
  app.put(paths.sandboxSellerReturn, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, FreeBodySchema, { emptyAsObject: true });
    if (!parsed.ok) return parsed.response;
    transition(ctx, t.order, STATUS.rtsInitiated);
    return c.json({ status: t.order.status, message: "Return to seller initiated" });
  });

  // Body not in the spec: {latitude, longitude, accuracy?} (schemas.ts). Needs a rider.
  app.put(paths.sandboxRiderLocation, stagingOnly, requireAuth, async (c) => {
    const t = target(c);
    if ("response" in t) return t.response;
    const parsed = await readBody(c, RiderLocationBodySchema);
    if (!parsed.ok) return parsed.response;
    const { order } = t;
    if (!order.rider) return failure(c, { svc_order_id: ["no rider is allotted to this order"] });
    const at = clock.now();
    order.lastLocation = { latitude: parsed.data.latitude, longitude: parsed.data.longitude, accuracy: parsed.data.accuracy ?? null, at };
    order.updatedAt = at;
    ctx.callbacks.enqueue("location", locationCallback(ctx, order, at));
    return c.json({ message: "Rider location updated" });
  });
}
