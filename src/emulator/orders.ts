import {
  CancelOrderBodySchema,
  DispatchReadyBodySchema,
  EditOrderBodySchema,
  PlaceOrderBodySchema,
  StopReattemptBodySchema,
  pickupOtp,
} from "../provider/schemas.ts";
import { isTerminal, STATUS, transition } from "./lifecycle.ts";
import { failure, notFound, readBody } from "./respond.ts";
import { orderKey } from "./state.ts";
import type { EmulatorOrder } from "./state.ts";
import type { EmulatorApp, EmulatorContext } from "./types.ts";

/** Store order endpoints (provider-api.md §4.2) on {base_url}. */
export function registerOrderRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  const { paths, state, clock, requireAuth } = ctx;

  app.post(paths.placeOrder, requireAuth, async (c) => {
    const parsed = await readBody(c, PlaceOrderBodySchema);
    if (!parsed.ok) return parsed.response;
    const body = parsed.data;
    const key = orderKey(body.store_code, body.order_details.client_order_id);
    const existingId = state.orderKeys.get(key);
    const existing = existingId === undefined ? undefined : state.orders.get(existingId);
    if (existing && !ctx.behaviour.accept_duplicate_orders) {
      // The spec is silent on a repeated client_order_id. Strict (the default), we answer 400
      // Failure naming the field AND carrying the existing order's ids: tracklane retries a
      // place whose answer was lost, and this lets it adopt the first order instead of
      // creating a second. With accept_duplicate_orders (behaviour.ts) a second order is
      // created, as the real provider is reported to do.
      return failure(
        c,
        { client_order_id: ["order with this client_order_id already exists"] },
        400,
        { data: { svc_order_id: Number(existing.svcOrderId), track_url: existing.trackUrl } },
      );
    }
    const now = clock.now();
    const svcOrderId = state.ids.orderId();
    const order: EmulatorOrder = {
      svcOrderId,
      storeCode: body.store_code,
      clientOrderId: body.order_details.client_order_id,
      principalId: c.get("principal").id,
      status: STATUS.created,
      trackUrl: `${new URL(c.req.url).origin}/track/${svcOrderId}`,
      body,
      rider: null,
      pickedUp: false,
      virtualContactNumber: null,
      rtsOrderId: null,
      dispatchReady: null,
      reattempt: null,
      cancel: null,
      lastLocation: null,
      history: [{ status: STATUS.created, at: now }],
      createdAt: now,
      updatedAt: now,
    };
    state.orders.set(svcOrderId, order);
    // The key keeps naming the first order; duplicates are found through state.orders.
    if (!existing) state.orderKeys.set(key, svcOrderId);
    if (ctx.behaviour.place_answer === "sfx") {
      return c.json({ message: "Success", data: { sfx_order_id: Number(svcOrderId) } });
    }
    if (ctx.behaviour.place_answer === "echo") {
      // An answer that repeats the customer back: the written interface leaves `data`'s shape
      // open, and tracklane stores the answer, so its redaction is tested against one.
      const customer = body.customer_details;
      return c.json({
        message: "Success",
        data: {
          sfx_order_id: Number(svcOrderId),
          client_order_id: order.clientOrderId,
          status: order.status,
          drop_details: `${String(customer.name)}, ${String(customer.address_line_1)} (${String(customer.contact_number)})`,
          customer_details: customer,
        },
      });
    }
    // svc_order_id goes out as a number here (and as a string elsewhere): real payloads mix both.
    return c.json({
      message: "Order placed successfully",
      data: {
        svc_order_id: Number(svcOrderId),
        client_order_id: order.clientOrderId,
        store_code: order.storeCode,
        status: order.status,
        track_url: order.trackUrl,
        pickup_otp: pickupOtp(body),
      },
    });
  });

  app.put(paths.editOrder, requireAuth, async (c) => {
    const parsed = await readBody(c, EditOrderBodySchema);
    if (!parsed.ok) return parsed.response;
    const edit = parsed.data;
    const order = state.orders.get(edit.svc_order_id);
    if (!order) return notFound(c, "Order not found.");
    if (order.pickedUp || isTerminal(order)) {
      return failure(c, { svc_order_id: [`order can no longer be edited (status ${order.status}): editable until the rider picks it up`] });
    }
    const details = order.body.order_details;
    if (edit.order_details?.payment_mode !== undefined) details.payment_mode = edit.order_details.payment_mode;
    if (edit.order_details?.order_value !== undefined) details.order_value = edit.order_details.order_value;
    if (edit.product_details) order.body.product_details = edit.product_details;
    order.updatedAt = clock.now();
    if (ctx.behaviour.edit_answer === "sfx") {
      // Like the real provider's place answer: its own id key, no track_url, no store_code.
      return c.json({ message: "Success", data: { sfx_order_id: Number(order.svcOrderId) } });
    }
    return c.json({
      store_code: order.storeCode,
      status: order.status,
      svc_order_id: order.svcOrderId,
      track_url: order.trackUrl,
      order_details: [{ ...details, product_details: order.body.product_details }],
    });
  });

  app.put(paths.cancelOrder, requireAuth, async (c) => {
    const order = state.orders.get(c.req.param("svc_order_id") ?? "");
    if (!order) return notFound(c, "Order not found.");
    const parsed = await readBody(c, CancelOrderBodySchema);
    if (!parsed.ok) return parsed.response;
    if (isTerminal(order)) {
      // The spec is silent here too. Like the duplicate place, the refusal carries the order's
      // status: tracklane retries a cancel whose answer was lost and must tell its own
      // cancel (done) from an order that was finished otherwise.
      return failure(c, { svc_order_id: [`order cannot be cancelled in status ${order.status}`] }, 400, {
        data: { svc_order_id: order.svcOrderId, status: order.status },
      });
    }
    order.cancel = { reason: parsed.data.reason, user: parsed.data.user, at: clock.now() };
    if (order.reattempt) order.reattempt.enabled = false;
    // One CANCELLED status whoever cancels; the callback says who and why.
    transition(ctx, order, STATUS.cancelled, { extra: { cancel_reason: parsed.data.reason, cancelled_by: parsed.data.user } });
    return c.json({
      message: "Order cancelled successfully",
      data: { svc_order_id: order.svcOrderId, client_order_id: order.clientOrderId, status: order.status, cancelled_by: parsed.data.user },
    });
  });

  app.put(paths.dispatchReady, requireAuth, async (c) => {
    const coid = c.req.param("coid") ?? "";
    const matches = [...state.orders.values()].filter((o) => o.clientOrderId === coid);
    // Duplicates accepted under one store (behaviour.ts): the first, like every key lookup.
    const order = matches[0];
    if (!order) return notFound(c, "Order not found.");
    // The path carries no store: a coid used by two stores cannot be resolved.
    if (new Set(matches.map((o) => o.storeCode)).size > 1) {
      return failure(c, { coid: ["client_order_id matches orders in several stores"] });
    }
    const parsed = await readBody(c, DispatchReadyBodySchema);
    if (!parsed.ok) return parsed.response;
    if (isTerminal(order)) return failure(c, { coid: [`order is already ${order.status}`] });
    order.dispatchReady = { at: clock.now(), shipmentReadyTimestamp: parsed.data.shipment_ready_timestamp };
    order.updatedAt = clock.now();
    return c.json({ message: "Order marked dispatch ready", data: { svc_order_id: order.svcOrderId, client_order_id: coid } });
  });

  app.post(paths.stopReattempt, requireAuth, async (c) => {
    const parsed = await readBody(c, StopReattemptBodySchema);
    if (!parsed.ok) return parsed.response;
    const order = state.orders.get(parsed.data.svc_order_id);
    if (!order) return notFound(c, "Order not found.");
    if (!order.reattempt?.enabled || isTerminal(order)) {
      return failure(c, { svc_order_id: ["no next-day re-attempt is scheduled for this order"] });
    }
    order.reattempt.enabled = false;
    if (clock.now() < order.reattempt.scheduledAt) {
      order.updatedAt = clock.now();
      return c.json({ message: "Re-attempt cancelled successfully" });
    }
    transition(ctx, order, STATUS.reattemptCancelled, { extra: { cancel_reason: "re-attempt stopped by client" } });
    return c.json({ message: "Re-attempt cancelled successfully; order cancelled" });
  });
}
