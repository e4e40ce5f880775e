/**
 * Notification endpoints (Standard Webhooks): create, list, read, change, delete, and
 * their signing secrets. The secret is shown only when created and by the /secret routes.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { DomainError } from "../../domain/errors.ts";
import {
  checkUrl,
  createEndpoint,
  deleteEndpoint,
  endpointSecret,
  listEndpoints,
  requireEndpoint,
  rotateSecret,
  updateEndpoint,
} from "../../notify/endpoints.ts";
import type { EndpointRow } from "../../notify/endpoints.ts";
import { NOTIFICATION_TYPES, isNotificationType } from "../../notify/types.ts";
import { ErrorSchema } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";
import { headOf } from "../../domain/text.ts";

const security = [{ Bearer: [] }];
const tags = ["notifications"];
const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: ErrorSchema } } });
const errors = {
  401: errorResponse("Missing or wrong bearer token"),
  404: errorResponse("No such notification endpoint"),
} as const;
const bodyErrors = {
  400: errorResponse("invalid_json: the body is not JSON"),
  422: errorResponse("Invalid body (names each bad field), or a URL tracklane will not send to (endpoint_url_forbidden)"),
} as const;

/** `ep_` + 26 characters; any other id is simply not found. */
const ENDPOINT_ID = /^ep_[0-9A-Za-z]{26}$/;

const IdParams = z.object({
  id: z.string().openapi({ param: { name: "id", in: "path" }, example: "ep_01JD5ZQ8W3N4X6Y7Z8A9B0C1D2" }),
});

const typeList = NOTIFICATION_TYPES.join(", ");
const EventType = z.enum(NOTIFICATION_TYPES, {
  error: (issue) => `unknown event type ${JSON.stringify(issue.input)}; known: ${typeList}`,
});
const Events = z.array(EventType).max(50).openapi({ description: "Types sent to this endpoint; empty: every type" });
const Url = z
  .url({ protocol: /^https?$/, error: "must be an http or https URL" })
  .max(2048, "must be at most 2048 characters")
  .openapi({ example: "https://hooks.example.com/tracklane" });
const Description = z.string().max(500, "must be at most 500 characters").nullable();

const CreateBody = z
  .strictObject({ url: Url, events: Events.optional(), description: Description.optional() })
  .openapi("NotificationEndpointCreate");

const PatchBody = z
  .strictObject({ url: Url.optional(), events: Events.optional(), description: Description.optional(), enabled: z.boolean().optional() })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "nothing to change: send url, events, description and/or enabled" })
  .openapi("NotificationEndpointPatch");

const EndpointSchema = z
  .object({
    id: z.string().openapi({ example: "ep_01JD5ZQ8W3N4X6Y7Z8A9B0C1D2" }),
    url: z.string(),
    events: z.array(z.enum(NOTIFICATION_TYPES)),
    description: z.string().nullable(),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable().openapi({ description: "Why tracklane disabled the endpoint; null when enabled or disabled by hand" }),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi("NotificationEndpoint");

const SecretSchema = z.object({ secret: z.string().openapi({ example: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }) }).openapi("NotificationEndpointSecret");
const CreatedSchema = EndpointSchema.extend(SecretSchema.shape).openapi("NotificationEndpointCreated");

function endpointJson(row: EndpointRow): z.infer<typeof EndpointSchema> {
  return {
    id: row.id,
    url: row.url,
    events: row.events.filter(isNotificationType),
    description: row.description,
    enabled: row.enabled,
    disabled_reason: row.disabled_reason,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** Each type once, in the order given. */
const unique = <T>(items: readonly T[]): T[] => [...new Set(items)];

function endpointId(params: { id: string }): string {
  if (!ENDPOINT_ID.test(params.id)) throw new DomainError("notification_endpoint_not_found", `no notification endpoint ${headOf(params.id, 64)}`);
  return params.id;
}

/** The primary for the endpoints' writes, the read pool for the GETs (src/http/app.ts). */
export function notificationEndpointRoutes(deps: { sql: Sql; readSql: Sql; allowPrivateUrls: boolean }) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { sql, readSql } = deps;
  const urlOptions = { allowPrivate: deps.allowPrivateUrls };
  const path = "/v1/notifications/endpoints";

  app.openapi(
    createRoute({
      method: "post",
      path,
      tags,
      summary: "Add a notification endpoint",
      description:
        "Notifications are POSTed to `url`, signed the Standard Webhooks way with the returned secret. `events` absent or empty: every type. " +
        "Loopback, private, link-local and metadata addresses are refused (422 endpoint_url_forbidden) unless NOTIFY_ALLOW_PRIVATE_URLS=true.",
      security,
      request: { body: { required: true, content: { "application/json": { schema: CreateBody } } } },
      responses: {
        201: { description: "Created; the only answer besides GET …/secret that shows the secret", content: { "application/json": { schema: CreatedSchema } } },
        401: errors[401],
        ...bodyErrors,
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const url = await checkUrl(body.url, urlOptions);
      const row = await createEndpoint(sql, { url, events: unique(body.events ?? []), description: body.description ?? null });
      return c.json({ ...endpointJson(row), secret: row.secret }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path,
      tags,
      summary: "Notification endpoints, oldest first (without secrets)",
      security,
      // No filters: one named anyway (enabled=) is refused, not ignored.
      request: { query: z.strictObject({}) },
      responses: {
        200: { description: "Every endpoint", content: { "application/json": { schema: z.object({ items: z.array(EndpointSchema) }) } } },
        400: errorResponse("An unknown query parameter (invalid_parameter)"),
        401: errors[401],
      },
    }),
    async (c) => c.json({ items: (await listEndpoints(readSql)).map(endpointJson) }, 200),
  );

  app.openapi(
    createRoute({
      method: "get",
      path: `${path}/{id}`,
      tags,
      summary: "A notification endpoint (without its secret)",
      security,
      request: { params: IdParams },
      responses: { 200: { description: "The endpoint", content: { "application/json": { schema: EndpointSchema } } }, ...errors },
    }),
    async (c) => c.json(endpointJson(await requireEndpoint(readSql, endpointId(c.req.valid("param")))), 200),
  );

  app.openapi(
    createRoute({
      method: "patch",
      path: `${path}/{id}`,
      tags,
      summary: "Change a notification endpoint's url, events, description or enabled",
      description: "A new url is checked as on creation. Enabling an endpoint tracklane disabled clears its disabled_reason.",
      security,
      request: { params: IdParams, body: { required: true, content: { "application/json": { schema: PatchBody } } } },
      responses: { 200: { description: "The changed endpoint", content: { "application/json": { schema: EndpointSchema } } }, ...errors, ...bodyErrors },
    }),
    async (c) => {
      const id = endpointId(c.req.valid("param"));
      const body = c.req.valid("json");
      const url = body.url === undefined ? undefined : await checkUrl(body.url, urlOptions);
      const events = body.events === undefined ? undefined : unique(body.events);
      const row = await updateEndpoint(sql, id, { url, events, description: body.description, enabled: body.enabled });
      return c.json(endpointJson(row), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "delete",
      path: `${path}/{id}`,
      tags,
      summary: "Delete a notification endpoint, with its deliveries",
      security,
      request: { params: IdParams },
      responses: { 204: { description: "Deleted" }, ...errors },
    }),
    async (c) => {
      await deleteEndpoint(sql, endpointId(c.req.valid("param")));
      return c.body(null, 204);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: `${path}/{id}/secret`,
      tags,
      summary: "The endpoint's signing secret",
      security,
      request: { params: IdParams },
      responses: { 200: { description: "The current secret", content: { "application/json": { schema: SecretSchema } } }, ...errors },
    }),
    // The primary's, not the read pool's: a replica a moment behind a rotation would answer
    // the old secret, which stops verifying 24 hours later.
    async (c) => c.json({ secret: await endpointSecret(sql, endpointId(c.req.valid("param"))) }, 200),
  );

  app.openapi(
    createRoute({
      method: "post",
      path: `${path}/{id}/secret/rotate`,
      tags,
      summary: "Replace the endpoint's signing secret",
      description: "Answers the new secret. For 24 hours, messages carry a signature by the old secret as well, so receivers can switch at their pace.",
      security,
      request: { params: IdParams },
      responses: { 200: { description: "The new secret", content: { "application/json": { schema: SecretSchema } } }, ...errors },
    }),
    async (c) => c.json({ secret: await rotateSecret(sql, endpointId(c.req.valid("param"))) }, 200),
  );

  return app;
}
