/**
 * The AWB pool (PRODUCT.md §6, §7): hand out a number, show the pool, start a top-up.
 * Thin: validate, call src/awb, map errors.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { enqueueManualReplenish } from "../../awb/jobs.ts";
import { allocateAwb, lastReplenishedAt, listAwbRequests, poolCounts } from "../../awb/pool.ts";
import type { AwbRequestRow } from "../../awb/pool.ts";
import type { Config } from "../../config.ts";
import { isoOrNull } from "../../domain/iso-time.ts";
import type { ProviderClient } from "../../provider/client.ts";
import { MAX_AWB_COUNT, MAX_STRING_LENGTH } from "../../provider/schemas.ts";
import { ApiError } from "../errors.ts";
import { ErrorSchema } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { optionalJsonBody, validationHook } from "../validation.ts";

export interface AwbRouteDeps {
  config: Config;
  sql: Sql;
  /** GET /v1/awb/pool reads here (src/http/app.ts). */
  readSql: Sql;
  provider: ProviderClient | undefined;
}

const security = [{ Bearer: [] }];
const errorResponse = (description: string) => ({ description, content: { "application/json": { schema: ErrorSchema } } });
const unauthorized = { 401: errorResponse("Missing or wrong bearer token") };

const AllocateBody = z
  .strictObject({
    client_order_id: z
      .string()
      .min(1, "must not be empty")
      .max(MAX_STRING_LENGTH, `must be at most ${MAX_STRING_LENGTH} characters`)
      .optional()
      .openapi({ description: "The same client_order_id always gets the same AWB; without one, every call gets a new number." }),
  })
  .openapi("AwbAllocateRequest");

const AllocateResponse = z.object({ awb_number: z.string().openapi({ example: "SF4010224563TST" }) }).openapi("AwbAllocation");

const AwbRequestSchema = z
  .object({
    request_id: z.string().nullable().openapi({ description: "The provider's request_id (fresh mode); null for a replenishment call (pool mode), and for a fresh request being sent or whose answer was lost (see last_error)." }),
    status: z.enum(["pending", "completed", "failed"]),
    count: z.number().int().openapi({ description: "Numbers asked for." }),
    next_poll_at: z.string().nullable(),
    id: z.number().int(),
    mode: z.enum(["pool", "fresh"]),
    received: z.number().int().openapi({ description: "Numbers the provider returned that were kept: well-formed, each once (last_error names the rest)." }),
    added: z.number().int().openapi({ description: "Of those, numbers new to the pool (pool mode returns held numbers again)." }),
    polls: z.number().int(),
    last_error: z.string().nullable(),
    created_at: z.string(),
    completed_at: z.string().nullable(),
  })
  .openapi("AwbRequest");

const PoolResponse = z
  .object({
    available: z.number().int(),
    allocated: z.number().int(),
    low_watermark: z.number().int(),
    target: z.number().int(),
    mode: z.enum(["pool", "fresh"]),
    requests: z.array(AwbRequestSchema).openapi({ description: "Pending requests plus the 10 most recent, newest first." }),
    last_replenished_at: z.string().nullable(),
  })
  .openapi("AwbPool");

const ReplenishBody = z
  .strictObject({
    count: z
      .number()
      .int("must be an integer")
      .min(1, "must be at least 1")
      .max(MAX_AWB_COUNT, `must be at most ${MAX_AWB_COUNT}`)
      .optional()
      .openapi({ description: "Numbers to add. Absent: fill up to AWB_POOL_TARGET." }),
    mode: z.enum(["pool", "fresh"]).optional().openapi({ description: "Absent: AWB_MODE." }),
  })
  .openapi("AwbReplenishRequest");

const ReplenishResponse = z
  .object({
    queued: z.literal(true),
    job_id: z.string(),
    mode: z.enum(["pool", "fresh"]),
    count: z.number().int().nullable().openapi({ description: "null: up to the target" }),
  })
  .openapi("AwbReplenishAccepted");

function requestJson(r: AwbRequestRow): z.infer<typeof AwbRequestSchema> {
  return {
    request_id: r.request_id,
    status: z.enum(["pending", "completed", "failed"]).parse(r.status),
    count: r.count,
    next_poll_at: isoOrNull(r.next_poll_at),
    id: r.id,
    mode: z.enum(["pool", "fresh"]).parse(r.mode),
    received: r.received,
    added: r.added,
    polls: r.polls,
    last_error: r.last_error,
    created_at: r.created_at.toISOString(),
    completed_at: isoOrNull(r.completed_at),
  };
}

export function awbRoutes(deps: AwbRouteDeps) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { lowWatermark, target, mode } = deps.config.awb;

  optionalJsonBody(app, "/v1/awb/allocate");
  optionalJsonBody(app, "/v1/awb/replenish");
  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/awb/allocate",
      tags: ["awb"],
      summary: "Hand out an AWB number",
      description:
        "Never the same number twice. Idempotent per client_order_id; if an order with that " +
        "client_order_id exists, its awb_number is set. 503 awb_pool_empty starts a top-up.",
      security,
      request: { body: { required: false, content: { "application/json": { schema: AllocateBody } } } },
      responses: {
        200: { description: "The allocated number", content: { "application/json": { schema: AllocateResponse } } },
        400: errorResponse("invalid_json: the body is not JSON"),
        ...unauthorized,
        422: errorResponse("Invalid body"),
        503: errorResponse("awb_pool_empty: no number available (a top-up has started)"),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      const allocation = await allocateAwb(deps.sql, { clientOrderId: body.client_order_id, lowWatermark });
      if (!allocation) {
        throw new ApiError("awb_pool_empty", "no AWB number is available; a top-up has started, retry shortly", {
          headers: { "retry-after": "5" },
        });
      }
      return c.json({ awb_number: allocation.awbNumber }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/awb/pool",
      tags: ["awb"],
      summary: "The AWB pool: levels, settings and top-up requests",
      security,
      responses: {
        200: { description: "The pool", content: { "application/json": { schema: PoolResponse } } },
        ...unauthorized,
      },
    }),
    async (c) => {
      const [counts, requests, last] = await Promise.all([poolCounts(deps.readSql), listAwbRequests(deps.readSql), lastReplenishedAt(deps.readSql)]);
      return c.json(
        {
          available: counts.available,
          allocated: counts.allocated,
          low_watermark: lowWatermark,
          target,
          mode,
          requests: requests.map(requestJson),
          last_replenished_at: isoOrNull(last),
        },
        200,
      );
    },
  );

  app.openapi(
    createRoute({
      method: "post",
      path: "/v1/awb/replenish",
      tags: ["awb"],
      summary: "Start a top-up now",
      description:
        "Queues a top-up job: `count` new numbers, or up to AWB_POOL_TARGET without it; " +
        "in `mode` (default AWB_MODE). Top-ups run one at a time. 503 provider_unavailable " +
        "when no provider is configured.",
      security,
      request: { body: { required: false, content: { "application/json": { schema: ReplenishBody } } } },
      responses: {
        202: { description: "Queued", content: { "application/json": { schema: ReplenishResponse } } },
        400: errorResponse("invalid_json: the body is not JSON"),
        ...unauthorized,
        422: errorResponse("Invalid body (count 1..100000, mode pool or fresh)"),
        503: errorResponse("provider_unavailable: no provider configured"),
      },
    }),
    async (c) => {
      const body = c.req.valid("json");
      if (!deps.provider) throw new ApiError("provider_unavailable", "no provider configured (PROVIDER_BASE_URL): AWB numbers cannot be replenished");
      const jobId = await enqueueManualReplenish(deps.sql, { count: body.count, mode: body.mode });
      return c.json({ queued: true as const, job_id: jobId, mode: body.mode ?? mode, count: body.count ?? null }, 202);
    },
  );

  return app;
}
