/**
 * Notification messages (PRODUCT.md §11): list with their delivery state, one with its
 * body and attempts, re-send one, recover an endpoint's failed ones, send a test ping.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { isoOrNull } from "../../domain/iso-time.ts";
import { DELIVERY_STATES, listDeliveries, messageDetail, recoverEndpoint, resendMessage } from "../../notify/deliveries.ts";
import type { DeliveryListRow, MessageDetail } from "../../notify/deliveries.ts";
import { requireEndpoint } from "../../notify/endpoints.ts";
import { recordMessage } from "../../notify/outbox.ts";
import { NOTIFICATION_TYPES } from "../../notify/types.ts";
import { ApiError } from "../errors.ts";
import { pageJson, pageQuery, pageSchema, readCursor } from "../pages.ts";
import { instantField } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";
import { errors } from "./orders.ts";
import { headOf } from "../../domain/text.ts";

const security = [{ Bearer: [] }];

const OrderRefSchema = z.object({ client_order_id: z.string().nullable(), svc_order_id: z.string().nullable() }).nullable();

const MessageSchema = z
  .object({
    id: z.string().openapi({ description: "The webhook-id: the same on every attempt and every endpoint", example: "msg_01JDX3ZK5V0A8E2W4Q6R7T9Y1B" }),
    type: z.enum(NOTIFICATION_TYPES),
    endpoint_id: z.string(),
    order: OrderRefSchema,
    status: z.enum(DELIVERY_STATES),
    attempts: z.number().int(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    next_attempt_at: z.string().nullable(),
    created_at: z.string(),
    delivered_at: z.string().nullable(),
  })
  .openapi("NotificationMessage");

const AttemptSchema = z
  .object({
    endpoint_id: z.string(),
    at: z.string(),
    status_code: z.number().int().nullable(),
    duration_ms: z.number().int(),
    response_excerpt: z.string().nullable(),
    error: z.string().nullable(),
  })
  .openapi("NotificationAttempt");

const MessageDetailSchema = z
  .object({
    id: z.string(),
    type: z.enum(NOTIFICATION_TYPES),
    order: OrderRefSchema,
    created_at: z.string(),
    body: z.record(z.string(), z.unknown()).openapi({ description: "The exact JSON sent: {type, timestamp, data}" }),
    deliveries: z.array(MessageSchema.omit({ id: true, type: true, order: true })),
    attempts: z.array(AttemptSchema),
  })
  .openapi("NotificationMessageDetail");

const orderRef = (r: { client_order_id: string | null; svc_order_id: string | null }) =>
  r.client_order_id === null && r.svc_order_id === null ? null : { client_order_id: r.client_order_id, svc_order_id: r.svc_order_id };

const state = (s: string) => z.enum(DELIVERY_STATES).parse(s);
const kind = (t: string) => z.enum(NOTIFICATION_TYPES).parse(t);

function deliveryJson(r: Omit<DeliveryListRow, "type" | "client_order_id" | "svc_order_id" | "id" | "message_id">) {
  return {
    endpoint_id: r.endpoint_id,
    status: state(r.status),
    attempts: r.attempts,
    last_status_code: r.last_status_code,
    last_error: r.last_error,
    next_attempt_at: r.status === "pending" ? isoOrNull(r.next_attempt_at) : null,
    created_at: r.created_at.toISOString(),
    delivered_at: isoOrNull(r.delivered_at),
  };
}

const messageJson = (r: DeliveryListRow): z.infer<typeof MessageSchema> => ({
  id: r.message_id,
  type: kind(r.type),
  order: orderRef(r),
  ...deliveryJson(r),
});

function detailJson(d: MessageDetail): z.infer<typeof MessageDetailSchema> {
  return {
    id: d.message.id,
    type: kind(d.message.type),
    order: orderRef(d.message),
    created_at: d.message.created_at.toISOString(),
    body: z.record(z.string(), z.unknown()).parse(JSON.parse(d.message.body)),
    deliveries: d.deliveries.map(deliveryJson),
    attempts: d.attempts.map((a) => ({
      endpoint_id: a.endpoint_id,
      at: a.at.toISOString(),
      status_code: a.status_code,
      duration_ms: a.duration_ms,
      response_excerpt: a.response_excerpt,
      error: a.error,
    })),
  };
}

// No length limit: an id that is not a stored message or endpoint is 404, malformed or not (docs/api.md).
const MessageIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "msg_01JDX3ZK5V0A8E2W4Q6R7T9Y1B" }),
});
const EndpointIdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "ep_01JDX3ZK5V0A8E2W4Q6R7T9Y1B" }),
});

const messageNotFound = (id: string) => new ApiError("notification_message_not_found", `no notification message ${headOf(id, 64)}`);

const notFound = (what: string) => ({ description: `No such ${what}`, content: { "application/json": { schema: errors[404].content["application/json"].schema } } });

const disabled = { description: "The endpoint is disabled", content: { "application/json": { schema: errors[404].content["application/json"].schema } } };

const MessageCursor = z.strictObject({ d: z.number().int().positive() });

/** The primary for resends, recoveries and pings, the read pool for the GETs (src/http/app.ts). */
export function notificationMessageRoutes(deps: { sql: Sql; readSql: Sql }) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { sql, readSql } = deps;

  /** Recovering or pinging a disabled endpoint would send nothing: 409 says what to do. */
  const requireEnabled = async (id: string) => {
    const endpoint = await requireEndpoint(sql, id);
    if (!endpoint.enabled) throw new ApiError("conflict", `endpoint ${id} is disabled: enable it first (PATCH {"enabled": true})`);
  };

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/notifications/messages",
      tags: ["notifications"],
      summary: "Messages sent (or being sent) to each endpoint, newest first",
      description: "One item per message and endpoint. Filters: endpoint, order (either id), status, type.",
      security,
      request: {
        query: z.strictObject({
          endpoint: z.string().min(1).max(80).optional(),
          order: z.string().min(1).max(128).optional(),
          status: z.enum(DELIVERY_STATES).optional(),
          type: z.enum(NOTIFICATION_TYPES).optional(),
          ...pageQuery(500, 50),
        }),
      },
      responses: {
        200: { description: "A page of messages", content: { "application/json": { schema: pageSchema(MessageSchema) } } },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const filters = { endpoint: q.endpoint, order: q.order, status: q.status, type: q.type };
      const before = readCursor(q.cursor, MessageCursor, filters);
      const page = await listDeliveries(readSql, { endpointId: q.endpoint, order: q.order, status: q.status, type: q.type, limit: q.limit, beforeId: before?.d });
      return c.json(pageJson(page.rows, messageJson, page.nextId === null ? null : { d: page.nextId }, filters), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/notifications/messages/{id}",
      tags: ["notifications"],
      summary: "One message: its body, its delivery to each endpoint, every attempt",
      security,
      request: { params: MessageIdParams },
      responses: {
        200: { description: "The message", content: { "application/json": { schema: MessageDetailSchema } } },
        400: errors[400],
        401: errors[401],
        404: notFound("message"),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const detail = await messageDetail(readSql, id);
      if (!detail) throw messageNotFound(id);
      return c.json(detailJson(detail), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/notifications/messages/{id}/resend",
      tags: ["notifications"],
      summary: "Send a message again to every enabled endpoint it went to",
      description: "Each delivery starts a new round (attempts from 0); earlier attempts stay recorded. The webhook-id stays the same.",
      security,
      request: { params: MessageIdParams },
      responses: {
        202: { description: "Queued", content: { "application/json": { schema: z.object({ message_id: z.string(), deliveries: z.number().int() }) } } },
        400: errors[400],
        401: errors[401],
        404: notFound("message"),
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      const deliveries = await resendMessage(sql, id);
      if (deliveries === null) throw messageNotFound(id);
      return c.json({ message_id: id, deliveries }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/notifications/endpoints/{id}/recover",
      tags: ["notifications"],
      summary: "Send every failed message of the endpoint since a time again",
      description: "For a receiver that is back: one call re-queues each failed delivery of a message created at or after `since`.",
      security,
      request: {
        params: EndpointIdParams,
        body: { required: true, content: { "application/json": { schema: z.strictObject({ since: instantField().openapi({ example: "2026-11-23T00:00:00Z" }) }) } } },
      },
      responses: {
        202: { description: "Queued", content: { "application/json": { schema: z.object({ count: z.number().int() }) } } },
        400: errors[400],
        401: errors[401],
        404: notFound("endpoint"),
        409: disabled,
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      await requireEnabled(id);
      const count = await recoverEndpoint(sql, id, new Date(c.req.valid("json").since));
      return c.json({ count }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/notifications/endpoints/{id}/test",
      tags: ["notifications"],
      summary: "Send a test.ping to the endpoint",
      security,
      request: { params: EndpointIdParams },
      responses: {
        202: { description: "Queued", content: { "application/json": { schema: z.object({ message_id: z.string() }) } } },
        400: errors[400],
        401: errors[401],
        404: notFound("endpoint"),
        409: disabled,
      },
    }),
    async (c) => {
      const { id } = c.req.valid("param");
      await requireEnabled(id);
      const messageId = await sql.begin((tx) => recordMessage(tx, { type: "test.ping", data: {}, endpointId: id }));
      return c.json({ message_id: messageId! }, 202);
    },
  );

  return app;
}
