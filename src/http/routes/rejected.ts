import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { listRejected } from "../../ingest/rejected.ts";
import { pageJson, pageQuery, pageSchema, readCursor } from "../pages.ts";
import { RejectedSchema, rejectedJson } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";
import { errors } from "./orders.ts";

/** Its own key (not GET /v1/orders' `id`), so that a cursor of another list is refused rather than misread. */
const RejectedCursor = z.strictObject({ r: z.number().int().positive() });

export function rejectedRoutes(sql: Sql) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/callbacks/rejected",
      tags: ["callbacks"],
      summary: "Callbacks that were refused (bad JSON, no order id, an unknown or corrupt Content-Encoding), newest first",
      security: [{ Bearer: [] }],
      request: { query: z.strictObject(pageQuery(500, 100)) },
      responses: {
        200: {
          description: "Rejected callbacks",
          content: { "application/json": { schema: pageSchema(RejectedSchema) } },
        },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const before = readCursor(q.cursor, RejectedCursor);
      const page = await listRejected(sql, { limit: q.limit, beforeId: before?.r });
      return c.json(pageJson(page.rows, rejectedJson, page.nextId === null ? null : { r: page.nextId }), 200);
    },
  );
  return app;
}
