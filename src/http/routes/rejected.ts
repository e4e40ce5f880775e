import { OpenAPIHono, createRoute, z } from "@hono/zod-openapi";
import type { Db } from "../../db/client.ts";
import { listRejected } from "../../db/orders.ts";
import { ApiError } from "../errors.ts";
import { RejectedSchema, decodeCursor, encodeCursor, limitParam, rejectedJson } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";
import { errors } from "./orders.ts";

export function rejectedRoutes(db: Db) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/callbacks/rejected",
      tags: ["callbacks"],
      summary: "Callbacks that were refused (bad JSON, no order id), newest first",
      security: [{ Bearer: [] }],
      request: { query: z.object({ limit: limitParam(500, 100), cursor: z.string().max(200).optional() }) },
      responses: {
        200: {
          description: "Rejected callbacks",
          content: {
            "application/json": {
              schema: z.object({ items: z.array(RejectedSchema), next_cursor: z.string().nullable() }),
            },
          },
        },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const before = q.cursor === undefined ? undefined : decodeCursor(q.cursor, z.object({ id: z.number().int() }));
      if (before === null) throw new ApiError("invalid_parameter", "cursor: not a cursor from this endpoint");
      const page = await listRejected(db, { limit: q.limit, beforeId: before?.id });
      return c.json(
        { items: page.rows.map(rejectedJson), next_cursor: page.nextId === null ? null : encodeCursor({ id: page.nextId }) },
        200,
      );
    },
  );
  return app;
}
