import type { Context } from "hono";
import type { z } from "zod";
import type { PathName } from "../provider/paths.ts";
import { FreeBodySchema, SANDBOX_ACTIONS } from "../provider/schemas.ts";
import { isTerminal, riderFor, STATUS, transition } from "./lifecycle.ts";
import { locationCallback } from "./payloads.ts";
import type { Coordinates } from "./payloads.ts";
import { failure, notFound, readBody } from "./respond.ts";
import type { EmulatorOrder } from "./state.ts";
import type { EmulatorApp, EmulatorContext, EmulatorEnv, EmulatorMiddleware } from "./types.ts";

function refusePickedUp(c: Context<EmulatorEnv>, order: EmulatorOrder, what: string): Response {
  return failure(c, { svc_order_id: [`order is already picked up (status ${order.status}): ${what}`] });
}

/** A row of SANDBOX_ACTIONS: where a step is, and the schema of its body (null: none). */
interface StepSpec<B extends z.ZodType | null> {
  method: "PUT" | "POST";
  path: PathName;
  body: B;
}

/**
 * Staging sandbox (provider-api.md §4.1): moves orders through the lifecycle and sends the
 * callbacks. In production these paths do not exist (404, before auth). Every step is
 * allowed from any status that is not terminal (the spec's "any"), but those before pickup:
 * allot and rider arrival are refused once the rider has the parcel (`pickedUp`), as they
 * would move the status backwards (the state table allots placed or allotted orders).
 */
export function registerSandboxRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  const { paths, state, clock, requireAuth } = ctx;

  const stagingOnly: EmulatorMiddleware = async (c, next) => {
    if (ctx.options.env !== "staging") return notFound(c);
    await next();
  };

  /**
   * One step, at the method and path SANDBOX_ACTIONS gives it (the client's table): staging
   * only, authenticated, on an order that exists and is not finished, with its body read
   * by the step's schema (a free body, FreeBodySchema, may be left out: `{}`).
   */
  function step(spec: StepSpec<null>, handle: (c: Context<EmulatorEnv>, order: EmulatorOrder) => Response): void;
  function step<B extends z.ZodType>(spec: StepSpec<B>, handle: (c: Context<EmulatorEnv>, order: EmulatorOrder, body: z.output<B>) => Response): void;
  function step(spec: StepSpec<z.ZodType | null>, handle: (c: Context<EmulatorEnv>, order: EmulatorOrder, body?: unknown) => Response): void {
    app.on(spec.method, paths[spec.path], stagingOnly, requireAuth, async (c) => {
      const order = state.orders.get(c.req.param("svc_order_id") ?? "");
      if (!order) return notFound(c, "Order not found.");
      if (isTerminal(order)) return failure(c, { svc_order_id: [`order is already ${order.status}`] });
      if (spec.body === null) return handle(c, order);
      const parsed = await readBody(c, spec.body, { emptyAsObject: spec.body === FreeBodySchema });
      return parsed.ok ? handle(c, order, parsed.data) : parsed.response;
    });
  }

  step(SANDBOX_ACTIONS.allot, (c, order, b) => {
    const onlyAllot = b.only_allot === 1 || b.only_allot === true;
    // §3: only_allot on an order that already has a rider changes nothing and sends no ACCEPTED.
    if (onlyAllot && order.rider) return c.json({ message: "Rider already allotted" });
    if (order.pickedUp) return refusePickedUp(c, order, "a rider can no longer be allotted");
    order.rider = riderFor(b.rider_id);
    transition(ctx, order, onlyAllot ? STATUS.accepted : STATUS.allotted);
    return c.json({ message: "Rider allotted successfully" });
  });

  // Body not in the spec: any JSON object (or none), ignored.
  step(SANDBOX_ACTIONS["rider-arrival"], (c, order) => {
    if (order.pickedUp) return refusePickedUp(c, order, "the rider can no longer arrive at pickup");
    transition(ctx, order, STATUS.arrived);
    return c.json({ message: "Rider arrival updated successfully", status: order.status });
  });

  step(SANDBOX_ACTIONS.collect, (c, order) => {
    order.virtualContactNumber ??= state.ids.contactNumber();
    transition(ctx, order, STATUS.collected, { extra: { virtual_contact_number: order.virtualContactNumber } });
    return c.json({ message: "Order collected", virtual_contact_number: order.virtualContactNumber });
  });

  step(SANDBOX_ACTIONS["doorstep-arrival"], (c, order, b) => {
    // Where the rider arrived goes into this callback only; it is not a location update.
    const location: Coordinates | null =
      b.arrival_lat !== undefined && b.arrival_lng !== undefined
        ? { latitude: b.arrival_lat, longitude: b.arrival_lng, accuracy: b.arrival_accuracy ?? null }
        : null;
    transition(ctx, order, STATUS.doorstep, { location });
    return c.json({ status: order.status, message: "Customer doorstep arrival updated" });
  });

  step(SANDBOX_ACTIONS.deliver, (c, order, b) => {
    transition(ctx, order, STATUS.delivered, { extra: { is_partial_delivery: b.is_partial_delivery ?? false } });
    return c.json({ message: "Order delivered" });
  });

  // No body. Mints an RTS order id (the spec says it "may be present"; we always give one).
  step(SANDBOX_ACTIONS["customer-return"], (c, order) => {
    order.rtsOrderId = state.ids.orderId();
    transition(ctx, order, STATUS.cancelledByCustomer, { extra: { rts_order_id: Number(order.rtsOrderId) } });
    return c.json({ status: order.status, message: "Customer return recorded", rts_order_id: order.rtsOrderId });
  });

  // Body, response and resulting status not in the spec: any JSON object (or none); RTS_INITIATED.
  step(SANDBOX_ACTIONS["seller-return"], (c, order) => {
    transition(ctx, order, STATUS.rtsInitiated);
    return c.json({ status: order.status, message: "Return to seller initiated" });
  });

  // Body not in the spec: {latitude, longitude, accuracy?} (schemas.ts). Needs a rider.
  step(SANDBOX_ACTIONS["rider-location"], (c, order, b) => {
    if (!order.rider) return failure(c, { svc_order_id: ["no rider is allotted to this order"] });
    const at = clock.now();
    order.lastLocation = { latitude: b.latitude, longitude: b.longitude, accuracy: b.accuracy ?? null, at };
    order.updatedAt = at;
    ctx.callbacks.enqueue("location", locationCallback(ctx, order, at));
    return c.json({ message: "Rider location updated" });
  });
}
