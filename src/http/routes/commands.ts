/**
 * Order commands (PRODUCT.md §6): place, edit, cancel, dispatch-ready, stop-reattempt,
 * and the list of commands sent. Each answers 202 once recorded and queued; the worker
 * talks to the provider. Validation and state checks come first, so a bad request never
 * reaches the provider.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { confirmPlacement, createCommand, placeOrder, retryCommand, retryPlacement } from "../../commands/service.ts";
import type { ResendOptions } from "../../commands/service.ts";
import type { OrderCommandKind } from "../../commands/service.ts";
import { COMMAND_KINDS, COMMAND_STATES, commandById, commandsOf, listCommands } from "../../commands/store.ts";
import type { CommandListRow } from "../../commands/store.ts";
import { requireOrder } from "../../orders/read.ts";
import type { OrderRef } from "../../orders/read.ts";
import type { JsonObject } from "../../domain/normalise.ts";
import {
  CancelOrderBodySchema,
  DispatchReadyBodySchema,
  EditOrderBodySchema,
  PlaceOrderBodySchema,
} from "../../provider/schemas.ts";
import { pageJson, pageQuery, pageSchema, readCursor } from "../pages.ts";
import { orderJson } from "../../orders/json.ts";
import { commandJson } from "../../commands/json.ts";
import type { CommandJson } from "../../commands/json.ts";
import { ErrorSchema, OrderSchema } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { optionalJsonBody, validationHook } from "../validation.ts";
import { ORDER_PATHS, errors, orderParams, refFrom } from "./orders.ts";

const CommandSchema = z
  .object({
    id: z.string(),
    kind: z.enum(COMMAND_KINDS),
    state: z.enum(["pending", "succeeded", "failed"]),
    attempts: z.number().int(),
    last_error: z.string().nullable(),
    created_at: z.string(),
    completed_at: z.string().nullable(),
  })
  // Documents the one shape commands/json.ts builds: this fails to compile if the two part.
  .openapi("Command") satisfies z.ZodType<CommandJson>;

/** A command as the API shows it (`order` only in the list across orders). */
export type CommandListJson = CommandJson & { order?: { client_order_id: string | null; svc_order_id: string | null } };

const CommandWithOrderSchema = CommandSchema.extend({
  order: z.object({ client_order_id: z.string().nullable(), svc_order_id: z.string().nullable() }),
}).openapi("CommandWithOrder");

const commandWithOrderJson = (r: CommandListRow): z.infer<typeof CommandWithOrderSchema> => ({
  ...commandJson(r),
  order: { client_order_id: r.client_order_id, svc_order_id: r.svc_order_id },
});

/** Its own key, so that a cursor of another list is refused rather than misread. */
const CommandCursor = z.strictObject({ c: z.number().int().positive() });

const CommandIdParams = z.object({
  id: z
    .string()
    .regex(/^[1-9]\d{0,14}$/, "must be a command id (digits)")
    .openapi({ param: { name: "id", in: "path" }, example: "42" }),
});

const commandErrors = {
  ...errors,
  409: { description: "Not allowed in the order's current state", content: { "application/json": { schema: ErrorSchema } } },
  422: { description: "Invalid body; names each bad field", content: { "application/json": { schema: ErrorSchema } } },
} as const;

const security = [{ Bearer: [] }];

const EditBodySchema = EditOrderBodySchema.omit({ svc_order_id: true }).refine(
  (b) => b.order_details !== undefined || b.product_details !== undefined,
  { message: "nothing to edit: send order_details and/or product_details" },
);

const ConfirmBodySchema = z.strictObject({
  svc_order_id: z
    .union([z.string().trim().min(1).max(128), z.number().int().nonnegative()])
    .transform(String)
    .openapi({ type: "string", example: "31000001", description: "The provider's id of the order found at the provider" }),
});


async function shownCommand(sql: Sql, id: number): Promise<z.infer<typeof CommandSchema>> {
  const row = await commandById(sql, id);
  if (!row) throw new Error(`command ${id} vanished after it was recorded`);
  return commandJson(row);
}

/**
 * The primary for the commands' writes, the read pool for the GETs (src/http/app.ts).
 * `appending` runs the writes that append to the event log (a place, a confirmation, a
 * cancel that withdraws a place), so
 * that a log whose partitions were not made ahead gets them (events/partitions.ts
 * withPartitionsMade) instead of a 500.
 */
export function commandRoutes(deps: { sql: Sql; readSql: Sql; resend: ResendOptions; appending?: <T>(work: () => Promise<T>) => Promise<T> }) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { sql, readSql, resend } = deps;
  const appending = deps.appending ?? (<T>(work: () => Promise<T>) => work());

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/orders",
      tags: ["commands"],
      summary: "Place an order with the provider",
      description: "202: recorded, placement pending. The same body again: 200 with the order. Another body with the same client_order_id: 409.",
      security,
      request: { body: { required: true, content: { "application/json": { schema: PlaceOrderBodySchema } } } },
      responses: {
        200: { description: "Already placed with this body", content: { "application/json": { schema: OrderSchema } } },
        202: { description: "Recorded; placement pending", content: { "application/json": { schema: OrderSchema } } },
        ...commandErrors,
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const result = await appending(() => placeOrder(sql, body));
      const order = await requireOrder(sql, { by: "client", id: body.order_details.client_order_id });
      return c.json(orderJson(order), result.created ? 202 : 200);
    },
  );

  for (const { by, prefix, param } of [...ORDER_PATHS].reverse()) {
    const params = orderParams(param);
    const ref = (p: Record<string, string>) => refFrom(by, p, param);
    const accepted = { 202: { description: "Recorded and queued", content: { "application/json": { schema: CommandSchema } } }, ...commandErrors };
    // Appending: a cancel that withdraws a place not yet sent records tracklane's CANCELLED event.
    const queue = async (r: OrderRef, kind: OrderCommandKind, request: JsonObject) =>
      shownCommand(sql, await appending(async () => createCommand(sql, await requireOrder(sql, r), kind, request)));

    app.openapi(
      createRoute({
        method: "patch",
        path: prefix,
        tags: ["commands"],
        summary: "Edit an order (until the rider picks it up)",
        security,
        request: { params, body: { required: true, content: { "application/json": { schema: EditBodySchema } } } },
        responses: accepted,
      }),
      async (c) => c.json(await queue(ref(c.req.valid("param") as Record<string, string>), "edit", c.req.valid("json") as JsonObject), 202),
    );

    app.openapi(
      createRoute({
        method: "post",
        path: `${prefix}/cancel`,
        tags: ["commands"],
        summary: "Cancel an order",
        security,
        request: { params, body: { required: true, content: { "application/json": { schema: CancelOrderBodySchema.strict() } } } },
        responses: accepted,
      }),
      async (c) => c.json(await queue(ref(c.req.valid("param") as Record<string, string>), "cancel", c.req.valid("json")), 202),
    );

    optionalJsonBody(app, `${prefix}/dispatch-ready`);
    app.openapi(
      createRoute({
        method: "post",
        path: `${prefix}/dispatch-ready`,
        tags: ["commands"],
        summary: "Mark an order ready for dispatch",
        description: "Body optional; shipment_ready_timestamp defaults to now.",
        security,
        request: { params, body: { required: false, content: { "application/json": { schema: DispatchReadyBodySchema.partial().strict() } } } },
        responses: accepted,
      }),
      async (c) => {
        const body = (c.req.valid("json") ?? {}) as { shipment_ready_timestamp?: string | number };
        const request = { shipment_ready_timestamp: body.shipment_ready_timestamp ?? new Date().toISOString() };
        return c.json(await queue(ref(c.req.valid("param") as Record<string, string>), "dispatch_ready", request), 202);
      },
    );

    app.openapi(
      createRoute({
        method: "post",
        path: `${prefix}/stop-reattempt`,
        tags: ["commands"],
        summary: "Stop the next-day re-attempt of an order",
        security,
        request: { params },
        responses: accepted,
      }),
      async (c) => c.json(await queue(ref(c.req.valid("param") as Record<string, string>), "stop_reattempt", {}), 202),
    );

    app.openapi(
      createRoute({
        method: "post",
        path: `${prefix}/placement/confirm`,
        tags: ["commands"],
        summary: "Adopt the order found at the provider for an unconfirmed (or failed) placement",
        description:
          "For a placement whose outcome is unknown (`unconfirmed`): a person found the order at the provider and gives its id. The order becomes placed; recorded as a `confirm_placement` command. The same id again: 200 with the same command. 409 when the placement is pending, already placed with another id, the order was not placed through tracklane, or the provider id belongs to another client order.",
        security,
        request: { params, body: { required: true, content: { "application/json": { schema: ConfirmBodySchema } } } },
        responses: { 200: { description: "Placement confirmed", content: { "application/json": { schema: CommandSchema } } }, ...commandErrors },
      }),
      async (c) => {
        const order = await requireOrder(sql, ref(c.req.valid("param") as Record<string, string>));
        const { commandId } = await appending(() => confirmPlacement(sql, order.id, c.req.valid("json").svc_order_id));
        return c.json(await shownCommand(sql, commandId), 200);
      },
    );

    app.openapi(
      createRoute({
        method: "post",
        path: `${prefix}/placement/retry`,
        tags: ["commands"],
        summary: "Send an unconfirmed (or failed) placement to the provider again",
        description:
          "A person decided the provider has no order for this one: the original place body is sent again as a new `place` command. With a provider that does not refuse duplicates, check first: if the earlier attempt did create an order, this creates a second one. 409 when the placement is pending, placed or not made through tracklane, or when the provider has named the order: with a provider id, or by its client_order_id alone in its callbacks or status answers (then adopt it with …/placement/confirm; with PROVIDER_DEDUPES_ORDERS=true the place is sent, and the provider's refusal naming its order adopts it).",
        security,
        request: { params },
        responses: { 202: { description: "Recorded and queued", content: { "application/json": { schema: CommandSchema } } }, ...commandErrors },
      }),
      async (c) => {
        const order = await requireOrder(sql, ref(c.req.valid("param") as Record<string, string>));
        return c.json(await shownCommand(sql, await retryPlacement(sql, order.id, resend)), 202);
      },
    );

    app.openapi(
      createRoute({
        method: "get",
        path: `${prefix}/commands`,
        tags: ["commands"],
        summary: "Commands sent for this order, oldest first",
        security,
        // No filters: one named anyway (state=) is refused, not ignored.
        request: { params, query: z.strictObject({}) },
        responses: {
          200: { description: "Commands", content: { "application/json": { schema: z.object({ items: z.array(CommandSchema) }) } } },
          ...errors,
        },
      }),
      async (c) => {
        const order = await requireOrder(readSql, ref(c.req.valid("param") as Record<string, string>));
        return c.json({ items: (await commandsOf(readSql, order.id)).map(commandJson) }, 200);
      },
    );
  }

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/commands",
      tags: ["commands"],
      summary: "Commands of every order, newest first",
      description: "Filters: state, kind. Pages with next_cursor (pass it back as cursor).",
      security,
      request: {
        query: z.strictObject({
          state: z.enum(COMMAND_STATES).optional(),
          kind: z.enum(COMMAND_KINDS).optional(),
          ...pageQuery(500, 50),
        }),
      },
      responses: {
        200: {
          description: "A page of commands",
          content: { "application/json": { schema: pageSchema(CommandWithOrderSchema) } },
        },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const filters = { state: q.state, kind: q.kind };
      const before = readCursor(q.cursor, CommandCursor, filters);
      const page = await listCommands(readSql, { state: q.state, kind: q.kind, limit: q.limit, beforeId: before?.c });
      return c.json(pageJson(page.rows, commandWithOrderJson, page.nextId === null ? null : { c: page.nextId }, filters), 200);
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/commands/{id}/retry",
      tags: ["commands"],
      summary: "Run a failed command again",
      description:
        "Re-queues a `failed` command as a new round of the same command (state back to pending, attempts counted from 0, last_error kept until the next attempt). " +
        "The order's state checks apply again. A refused `place` may be retried here (its order's placement goes back to pending); " +
        "a `place` whose outcome is unknown (placement `unconfirmed`) is refused with 409: use POST /v1/orders/{order}/placement/retry or …/placement/confirm. " +
        "A `place` is also 409 once the provider has named its order: with a provider id, or, unless PROVIDER_DEDUPES_ORDERS=true, by its client_order_id alone in its callbacks or status answers.",
      security,
      request: { params: CommandIdParams },
      responses: {
        202: { description: "Re-queued", content: { "application/json": { schema: CommandSchema } } },
        400: errors[400],
        401: errors[401],
        404: { description: "No such command", content: { "application/json": { schema: ErrorSchema } } },
        409: commandErrors[409],
      },
    }),
    async (c) => {
      const id = await retryCommand(sql, Number(c.req.valid("param").id), resend);
      return c.json(await shownCommand(sql, id), 202);
    },
  );
  return app;
}
