/**
 * The HTTP app: callbacks, the authenticated /v1 API, ops endpoints, OpenAPI and docs,
 * and the console's pages.
 * Transports stay thin: routes validate, call db/ingest code, and map errors.
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { bodyLimit } from "hono/body-limit";
import { requestId } from "hono/request-id";
import type { Sql } from "postgres";
import type { Config } from "../config.ts";
import type { ProviderClient } from "../provider/client.ts";
import type { Ingestor } from "../ingest/batcher.ts";
import { withPartitionsMade } from "../events/partitions.ts";
import { redactPath } from "../logger.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { bearerAuth, previousSecretNotice } from "./auth.ts";
import { consoleRoutes } from "./console/index.ts";
import { decodedRequestText } from "./charset.ts";
import { decodedRequestBody } from "./content-encoding.ts";
import { ApiError, errorHandler } from "./errors.ts";
import { methodsFor } from "./methods.ts";
import { withCommonResponses } from "./openapi.ts";
import { awbRoutes } from "./routes/awb.ts";
import { callbackRoutes } from "./routes/callbacks.ts";
import { commandRoutes } from "./routes/commands.ts";
import { docsRoutes } from "./routes/docs.ts";
import { exportRoutes } from "./routes/export.ts";
import { notificationEndpointRoutes } from "./routes/notification-endpoints.ts";
import { notificationMessageRoutes } from "./routes/notification-messages.ts";
import { opsRoutes } from "./routes/ops.ts";
import { orderReadRoutes } from "./routes/orders.ts";
import { rejectedRoutes } from "./routes/rejected.ts";
import { sandboxRoutes } from "./routes/sandbox.ts";
import type { AppEnv } from "./types.ts";
import { validationHook } from "./validation.ts";

export interface AppDeps {
  config: Config;
  /** Every write, and every read a write depends on (callbacks, POST/PATCH/DELETE, sessions, readiness, metrics). */
  sql: Sql;
  /**
   * The API's GETs under /v1 and the console's pages: the read pool on DATABASE_READ_URL
   * (maybe behind the primary by a replica's lag), or the primary's pool itself when that is unset.
   */
  readSql: Sql;
  ingestor: Ingestor;
  log: Logger;
  metrics: Metrics;
  /** The provider's API; absent only in tests that need no provider. */
  provider?: ProviderClient | undefined;
}

/** Largest /v1 request body: a place-order body is a few KiB; read no further than this. */
export const API_BODY_MAX_BYTES = 1024 * 1024;

const OPENAPI_OBJECT = {
  openapi: "3.1.0",
  info: {
    title: "tracklane",
    version: "1",
    description:
      "Order tracking for merchants of a hyperlocal delivery provider. Callbacks go to " +
      "POST|PUT /callbacks/{CALLBACK_SECRET} (or /callbacks with X-Callback-Secret); " +
      "everything under /v1 needs Authorization: Bearer <API_TOKEN>. Every error is " +
      '{"error":{"code","message","request_id","issues"?}}; a /v1 path asked with a method it does not have is 405 ' +
      "method_not_allowed with Allow, an unknown path 404 not_found.",
  },
} as const;

export function createApp(deps: AppDeps) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });

  app.use(requestId());
  app.use(async (c, next) => {
    const started = performance.now();
    await next();
    const status = c.res.status;
    // Accepted callbacks are the hot path: one info line each would dominate the log. So
    // are callbacks refused with 503 while the database is away or the buffer full: their
    // burst has its own lines (errorHandler).
    const level = (status < 400 || status === 503) && c.req.path.startsWith("/callbacks") ? "debug" : "info";
    if (!deps.log.isLevelEnabled(level)) return;
    const ms = Math.round((performance.now() - started) * 10) / 10;
    deps.log[level]({ requestId: c.get("requestId"), method: c.req.method, path: redactPath(c.req.path), status, ms }, "request");
  });

  app.route(
    "/",
    callbackRoutes({
      secret: deps.config.callbackSecret,
      previousSecret: deps.config.callbackSecretPrevious,
      sql: deps.sql,
      ingestor: deps.ingestor,
      log: deps.log,
      metrics: deps.metrics,
      timeZone: deps.config.provider.timezone,
    }),
  );
  // Readiness and the metrics' figures are the primary's: /readyz says whether this process
  // can take callbacks, whatever the read server's state.
  app.route("/", opsRoutes(deps.sql, deps.metrics, { metricsToken: deps.config.metricsToken }));

  app.use(
    "/v1/*",
    bearerAuth(deps.config.apiToken, undefined, {
      secret: deps.config.apiTokenPrevious,
      used: previousSecretNotice(deps.log, deps.metrics, "API_TOKEN_PREVIOUS", "a client still uses the old API token"),
    }),
  );
  app.use(
    "/v1/*",
    bodyLimit({
      maxSize: API_BODY_MAX_BYTES,
      onError: () => {
        throw new ApiError("payload_too_large", `request body is larger than ${API_BODY_MAX_BYTES} bytes`);
      },
    }),
  );
  // A compressed body is decoded here, its limit the same once decompressed.
  app.use("/v1/*", decodedRequestBody(API_BODY_MAX_BYTES));
  // Its text read strictly: UTF-8, or the charset it names (charset.ts), never with U+FFFD.
  app.use("/v1/*", decodedRequestText);
  // Every GET under /v1 reads the read pool; everything else writes, on the primary. Route modules
  // that only read get the read pool as their one pool.
  // Before the order routes: there "export" would be an order's id.
  app.route("/", exportRoutes({ sql: deps.readSql, log: deps.log }));
  app.route("/", orderReadRoutes(deps.readSql));
  app.route("/", rejectedRoutes(deps.readSql));
  const appending = <T>(work: () => Promise<T>) => withPartitionsMade(deps.sql, deps.config.events.partition, deps.log, work);
  app.route("/", commandRoutes({ sql: deps.sql, readSql: deps.readSql, resend: { dedupesOrders: deps.config.provider.dedupesOrders }, appending }));
  app.route("/", sandboxRoutes({ sql: deps.sql, provider: deps.provider, env: deps.config.provider.env }));
  app.route("/", awbRoutes({ config: deps.config, sql: deps.sql, readSql: deps.readSql, provider: deps.provider }));
  app.route("/", notificationEndpointRoutes({ sql: deps.sql, readSql: deps.readSql, allowPrivateUrls: deps.config.notify.allowPrivateUrls }));
  app.route("/", notificationMessageRoutes({ sql: deps.sql, readSql: deps.readSql }));

  app.openAPIRegistry.registerComponent("securitySchemes", "Bearer", { type: "http", scheme: "bearer" });
  // Built on the first request (every route is registered by then) and kept: generating it
  // takes about 10 ms of CPU, which anyone, unauthenticated, could otherwise make the
  // process spend on every request, at the callbacks' expense.
  let openApiDocument: string | undefined;
  app.get("/openapi.json", (c) => {
    openApiDocument ??= JSON.stringify(withCommonResponses(app.getOpenAPI31Document(OPENAPI_OBJECT)));
    return c.body(openApiDocument, 200, { "content-type": "application/json" });
  });
  app.route("/", docsRoutes());
  app.route("/", consoleRoutes({ config: deps.config, sql: deps.sql, readSql: deps.readSql, log: deps.log, provider: deps.provider }));

  // A /v1 path that exists with other methods: 405 with Allow, not a 404 saying there is no such resource.
  const apiMethods = methodsFor(() => app.routes.filter((r) => r.path.startsWith("/v1/")));
  app.notFound((c) => {
    const allowed = c.req.path.startsWith("/v1/") ? apiMethods(c.req.path) : [];
    if (allowed.length > 0) {
      throw new ApiError("method_not_allowed", `${c.req.method} is not allowed on ${redactPath(c.req.path)}; allowed: ${allowed.join(", ")}`, {
        headers: { allow: allowed.join(", ") },
      });
    }
    throw new ApiError("not_found", `no route for ${c.req.method} ${redactPath(c.req.path)}`);
  });
  app.onError(errorHandler(deps.log));
  return app;
}
