/**
 * Read routes for orders: one order, the list, the timeline. Each order route exists
 * twice: by client_order_id (`/v1/orders/{order}`) and by the provider's id
 * (`/v1/orders/by-svc-id/{svc_order_id}`).
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { orderTimeline } from "../../events/log.ts";
import { listOrders, requireOrder } from "../../orders/read.ts";
import type { OrderRef } from "../../orders/read.ts";
import { PLACEMENT_STATES, orderJson } from "../../orders/json.ts";
import { CANONICAL_STATUSES } from "../../domain/statuses.ts";
import { pageJson, pageQuery, pageSchema, readCursor } from "../pages.ts";
import {
  ErrorSchema,
  EventSchema,
  OrderSchema,
  eventJson,
  instantField,
  isApiInstantMicros,
} from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";

export const errors = {
  400: { description: "Invalid input", content: { "application/json": { schema: ErrorSchema } } },
  401: { description: "Missing or wrong bearer token", content: { "application/json": { schema: ErrorSchema } } },
  404: { description: "No such order", content: { "application/json": { schema: ErrorSchema } } },
} as const;

const security = [{ Bearer: [] }];

/** Where an order route's identifier comes from, for both route families. */
export const ORDER_PATHS = [
  { by: "client", prefix: "/v1/orders/{order}", param: "order" },
  { by: "svc", prefix: "/v1/orders/by-svc-id/{svc_order_id}", param: "svc_order_id" },
] as const;

export function orderParams(param: string) {
  return z.object({ [param]: z.string().min(1).max(128).openapi({ param: { name: param, in: "path" } }) });
}

export function refFrom(by: "client" | "svc", params: Record<string, string>, param: string): OrderRef {
  return { by, id: params[param]! };
}

/**
 * A timeline page's cursor: its last event's time in microseconds since the epoch (`m`,
 * as text: exact beyond 2^53) and id, and the order it pages through (`o`: another
 * order's cursor is refused, not read as a position in this timeline). A time outside
 * what the API's instants take is a 400, not a database error.
 */
const EventCursor = z.strictObject({
  m: z
    .string()
    .regex(/^-?\d{1,19}$/)
    .refine((m) => isApiInstantMicros(BigInt(m))),
  i: z.number().int().positive(),
  o: z.string(),
});

/** GET /v1/orders' cursor: the last order's id. */
const OrderCursor = z.strictObject({ id: z.number().int().positive() });

export function orderReadRoutes(sql: Sql) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  // by-svc-id routes first: otherwise "by-svc-id" would be read as a client_order_id.
  for (const { by, prefix, param } of [...ORDER_PATHS].reverse()) {
    const params = orderParams(param);
    app.openapi(
      createRoute({
        method: "get",
        path: prefix,
        tags: ["orders"],
        summary: by === "client" ? "Get an order by client_order_id" : "Get an order by svc_order_id",
        security,
        request: { params },
        responses: {
          200: { description: "The order", content: { "application/json": { schema: OrderSchema } } },
          ...errors,
        },
      }),
      async (c) => {
        const order = await requireOrder(sql, refFrom(by, c.req.valid("param") as Record<string, string>, param));
        return c.json(orderJson(order), 200);
      },
    );

    app.openapi(
      createRoute({
        method: "get",
        path: `${prefix}/events`,
        tags: ["orders"],
        summary: "The order's timeline, in event-time order",
        security,
        request: {
          params,
          query: z.strictObject(pageQuery(1000, 500)),
        },
        responses: {
          200: {
            description: "Events",
            content: { "application/json": { schema: pageSchema(EventSchema) } },
          },
          ...errors,
        },
      }),
      async (c) => {
        const order = await requireOrder(sql, refFrom(by, c.req.valid("param") as Record<string, string>, param));
        const { limit, cursor } = c.req.valid("query");
        const orderKey = String(order.id);
        const after = readCursor(cursor, EventCursor.refine((c) => c.o === orderKey));
        const page = await orderTimeline(sql, order, { limit, after: after && { micros: after.m, id: after.i } });
        return c.json(pageJson(page.rows, eventJson, page.next && { m: page.next.micros, i: page.next.id, o: orderKey }), 200);
      },
    );
  }

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/orders",
      tags: ["orders"],
      summary: "List orders, newest first",
      security,
      request: {
        query: z.strictObject({
          status: z.enum(CANONICAL_STATUSES).optional(),
          store_code: z.string().min(1).max(128).optional(),
          placement: z.enum(PLACEMENT_STATES).optional(),
          updated_after: instantField().optional().openapi({ example: "2026-11-01T00:00:00Z" }),
          ...pageQuery(500, 50),
        }),
      },
      responses: {
        200: {
          description: "A page of orders",
          content: { "application/json": { schema: pageSchema(OrderSchema) } },
        },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const filters = { status: q.status, store_code: q.store_code, placement: q.placement, updated_after: q.updated_after === undefined ? undefined : Date.parse(q.updated_after) };
      const before = readCursor(q.cursor, OrderCursor, filters);
      const page = await listOrders(sql, {
        status: q.status,
        storeCode: q.store_code,
        placement: q.placement,
        updatedAfter: q.updated_after === undefined ? undefined : new Date(q.updated_after),
        limit: q.limit,
        beforeId: before?.id,
      });
      return c.json(pageJson(page.rows, orderJson, page.nextId === null ? null : { id: page.nextId }, filters), 200);
    },
  );

  return app;
}
