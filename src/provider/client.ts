import type { z } from "zod";
import type { Logger } from "../logger.ts";
import { createOAuthAuth, createTokenAuth } from "./auth.ts";
import type { ProviderAuth } from "./auth.ts";
import { ProviderError } from "./errors.ts";
import { interpret, operationOf, send } from "./http.ts";
import type { HttpDeps, HttpRequest } from "./http.ts";
import { fillPath, resolvePaths } from "./paths.ts";
import type { PathName, Paths } from "./paths.ts";
import type { Product } from "./products.ts";
import {
  AllotBodySchema,
  AnyObjectResponseSchema,
  CancelOrderBodySchema,
  CancelOrderResponseSchema,
  CollectBodySchema,
  CollectResponseSchema,
  CustomerReturnResponseSchema,
  DeliverBodySchema,
  DispatchReadyBodySchema,
  DoorstepArrivalBodySchema,
  EditOrderBodySchema,
  EditOrderResponseSchema,
  FreeBodySchema,
  FreshAwbAcceptedSchema,
  FreshAwbBodySchema,
  FreshAwbPollSchema,
  MessageResponseSchema,
  OrderStatusResponseSchema,
  PlaceOrderBodySchema,
  PlaceOrderResponseSchema,
  PoolAwbBodySchema,
  PoolAwbResponseSchema,
  RiderLocationBodySchema,
  SANDBOX_ACTIONS,
  StatusMessageResponseSchema,
  StopReattemptBodySchema,
} from "./schemas.ts";
import type {
  AllotBody,
  AnyObjectResponse,
  CancelOrderBody,
  CancelOrderResponse,
  CollectBody,
  CollectResponse,
  CustomerReturnResponse,
  DeliverBody,
  DispatchReadyBody,
  DoorstepArrivalBody,
  EditOrderBody,
  EditOrderResponse,
  FreeBody,
  FreshAwbAccepted,
  FreshAwbBody,
  FreshAwbPoll,
  MessageResponse,
  OAuthTokenResponse,
  OrderStatusResponse,
  PlaceOrderBody,
  PlaceOrderResponse,
  PoolAwbResponse,
  RiderLocationBody,
  SandboxAction,
  StatusMessageResponse,
  StopReattemptBody,
} from "./schemas.ts";

export type ProviderAuthConfig =
  | { method: "token"; token: string }
  | { method: "oauth"; clientId: string; clientSecret: string; product: Product };

export interface ProviderClientOptions {
  /** `{base_url}`: order and sandbox endpoints. */
  baseUrl: string;
  /** `{gateway_url}`: OAuth token and AWB endpoints. Default: baseUrl. */
  gatewayUrl?: string;
  auth: ProviderAuthConfig;
  /** Per call, covering connect, headers and body. Default 10000. */
  timeoutMs?: number;
  /** Clock for token renewal and Retry-After dates. Default Date.now. */
  now?: () => number;
  fetch?: typeof fetch;
  logger?: Logger;
  /** Path overrides (PRODUCT.md §3: each path configurable). */
  paths?: Partial<Paths>;
}

/**
 * Typed client for every provider endpoint. Every method resolves with the zod-parsed
 * response or rejects with a ProviderError (see errors.ts for kinds and retryability);
 * a request body that fails its schema is refused before sending (kind invalid_request).
 */
export interface ProviderClient {
  readonly authMethod: "token" | "oauth";
  placeOrder(body: PlaceOrderBody): Promise<PlaceOrderResponse>;
  editOrder(body: EditOrderBody): Promise<EditOrderResponse>;
  cancelOrder(svcOrderId: string, body: CancelOrderBody): Promise<CancelOrderResponse>;
  dispatchReady(clientOrderId: string, body: DispatchReadyBody): Promise<AnyObjectResponse>;
  stopReattempt(body: StopReattemptBody): Promise<MessageResponse>;
  /** The order's current status at the provider (PRODUCT.md §10; used by reconciliation). */
  orderStatus(svcOrderId: string): Promise<OrderStatusResponse>;
  // staging sandbox
  allot(svcOrderId: string, body: AllotBody): Promise<MessageResponse>;
  riderArrival(svcOrderId: string, body?: FreeBody): Promise<AnyObjectResponse>;
  collect(svcOrderId: string, body: CollectBody): Promise<CollectResponse>;
  doorstepArrival(svcOrderId: string, body: DoorstepArrivalBody): Promise<StatusMessageResponse>;
  deliver(svcOrderId: string, body: DeliverBody): Promise<MessageResponse>;
  customerReturn(svcOrderId: string): Promise<CustomerReturnResponse>;
  sellerReturn(svcOrderId: string, body?: FreeBody): Promise<AnyObjectResponse>;
  riderLocation(svcOrderId: string, body: RiderLocationBody): Promise<AnyObjectResponse>;
  /** Any sandbox action by its tracklane name; `body` is validated against its schema. */
  sandbox(action: SandboxAction, svcOrderId: string, body?: unknown): Promise<Record<string, unknown>>;
  // AWBs
  generatePoolAwbs(count?: number): Promise<PoolAwbResponse>;
  requestFreshAwbs(body?: FreshAwbBody): Promise<FreshAwbAccepted>;
  pollFreshAwbs(requestId: string): Promise<FreshAwbPoll>;
  /** Forces an OAuth exchange now (and caches the token). Rejects for token auth. */
  exchangeToken(): Promise<OAuthTokenResponse>;
}

interface CallSpec<S extends z.ZodType> {
  method: HttpRequest["method"];
  path: PathName;
  params?: Record<string, string>;
  /** JSON body; undefined sends none. */
  json?: unknown;
  schema: S;
}

const GATEWAY_PATHS: ReadonlySet<PathName> = new Set(["oauthToken", "awbPool", "awbFresh", "awbFreshPoll"]);

export function createProviderClient(options: ProviderClientOptions): ProviderClient {
  const paths = resolvePaths(options.paths);
  const http: HttpDeps = {
    fetch: options.fetch ?? fetch,
    timeoutMs: options.timeoutMs ?? 10_000,
    now: options.now ?? Date.now,
    logger: options.logger?.child({ component: "provider" }),
  };
  const baseUrl = options.baseUrl;
  const gatewayUrl = options.gatewayUrl ?? options.baseUrl;
  const oauth =
    options.auth.method === "oauth"
      ? createOAuthAuth({
          clientId: options.auth.clientId,
          clientSecret: options.auth.clientSecret,
          product: options.auth.product,
          gatewayUrl,
          tokenPath: paths.oauthToken,
          http,
        })
      : null;
  const auth: ProviderAuth = oauth ?? createTokenAuth(options.auth.method === "token" ? options.auth.token : "");

  async function call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.output<S>> {
    const req: HttpRequest = {
      method: spec.method,
      baseUrl: GATEWAY_PATHS.has(spec.path) ? gatewayUrl : baseUrl,
      path: fillPath(paths[spec.path], spec.params),
      headers: {},
      json: spec.json,
    };
    let authRetried = false;
    for (;;) {
      const header = await auth.header();
      const res = await send(http, { ...req, headers: { authorization: header } });
      // An OAuth token can expire early on the provider's clock: renew once and retry once.
      if (res.status === 401 && auth.renewable && !authRetried) {
        auth.invalidate(header);
        authRetried = true;
        http.logger?.info({ method: req.method, path: req.path }, "provider refused token; renewing");
        continue;
      }
      return interpret(http, req, res, spec.schema);
    }
  }

  function body<S extends z.ZodType>(schema: S, value: unknown, method: HttpRequest["method"], path: PathName): z.output<S> {
    const parsed = schema.safeParse(value);
    if (parsed.success) return parsed.data;
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
    throw new ProviderError({
      kind: "invalid_request",
      operation: operationOf({ method, path: paths[path] }),
      providerMessage: `invalid request body: ${issues}`,
      body: parsed.error.issues,
    });
  }

  const svc = (svcOrderId: string) => ({ svc_order_id: svcOrderId });

  async function sandbox(action: SandboxAction, svcOrderId: string, value?: unknown): Promise<Record<string, unknown>> {
    const spec = SANDBOX_ACTIONS[action];
    const json = spec.body === null ? undefined : body(spec.body, value ?? {}, spec.method, spec.path);
    return call({ method: spec.method, path: spec.path, params: svc(svcOrderId), json, schema: spec.response });
  }

  return {
    authMethod: auth.method,
    placeOrder: async (b) =>
      call({ method: "POST", path: "placeOrder", json: body(PlaceOrderBodySchema, b, "POST", "placeOrder"), schema: PlaceOrderResponseSchema }),
    editOrder: async (b) =>
      call({ method: "PUT", path: "editOrder", json: body(EditOrderBodySchema, b, "PUT", "editOrder"), schema: EditOrderResponseSchema }),
    cancelOrder: async (id, b) =>
      call({
        method: "PUT",
        path: "cancelOrder",
        params: svc(id),
        json: body(CancelOrderBodySchema, b, "PUT", "cancelOrder"),
        schema: CancelOrderResponseSchema,
      }),
    dispatchReady: async (coid, b) =>
      call({
        method: "PUT",
        path: "dispatchReady",
        params: { coid },
        json: body(DispatchReadyBodySchema, b, "PUT", "dispatchReady"),
        schema: AnyObjectResponseSchema,
      }),
    stopReattempt: async (b) =>
      call({
        method: "POST",
        path: "stopReattempt",
        json: body(StopReattemptBodySchema, b, "POST", "stopReattempt"),
        schema: MessageResponseSchema,
      }),
    orderStatus: async (id) => call({ method: "GET", path: "orderStatus", params: svc(id), schema: OrderStatusResponseSchema }),
    allot: async (id, b) =>
      call({ method: "PUT", path: "sandboxAllot", params: svc(id), json: body(AllotBodySchema, b, "PUT", "sandboxAllot"), schema: MessageResponseSchema }),
    riderArrival: async (id, b = {}) =>
      call({
        method: "POST",
        path: "sandboxRiderArrival",
        params: svc(id),
        json: body(FreeBodySchema, b, "POST", "sandboxRiderArrival"),
        schema: AnyObjectResponseSchema,
      }),
    collect: async (id, b) =>
      call({ method: "PUT", path: "sandboxCollect", params: svc(id), json: body(CollectBodySchema, b, "PUT", "sandboxCollect"), schema: CollectResponseSchema }),
    doorstepArrival: async (id, b) =>
      call({
        method: "PUT",
        path: "sandboxDoorstepArrival",
        params: svc(id),
        json: body(DoorstepArrivalBodySchema, b, "PUT", "sandboxDoorstepArrival"),
        schema: StatusMessageResponseSchema,
      }),
    deliver: async (id, b) =>
      call({ method: "PUT", path: "sandboxDeliver", params: svc(id), json: body(DeliverBodySchema, b, "PUT", "sandboxDeliver"), schema: MessageResponseSchema }),
    customerReturn: async (id) => call({ method: "PUT", path: "sandboxCustomerReturn", params: svc(id), schema: CustomerReturnResponseSchema }),
    sellerReturn: async (id, b = {}) =>
      call({
        method: "PUT",
        path: "sandboxSellerReturn",
        params: svc(id),
        json: body(FreeBodySchema, b, "PUT", "sandboxSellerReturn"),
        schema: AnyObjectResponseSchema,
      }),
    riderLocation: async (id, b) =>
      call({
        method: "PUT",
        path: "sandboxRiderLocation",
        params: svc(id),
        json: body(RiderLocationBodySchema, b, "PUT", "sandboxRiderLocation"),
        schema: AnyObjectResponseSchema,
      }),
    sandbox,
    generatePoolAwbs: async (count) =>
      call({ method: "POST", path: "awbPool", json: body(PoolAwbBodySchema, { count }, "POST", "awbPool"), schema: PoolAwbResponseSchema }),
    requestFreshAwbs: async (b = {}) =>
      call({ method: "POST", path: "awbFresh", json: body(FreshAwbBodySchema, b, "POST", "awbFresh"), schema: FreshAwbAcceptedSchema }),
    pollFreshAwbs: async (requestId) =>
      call({ method: "GET", path: "awbFreshPoll", params: { request_id: requestId }, schema: FreshAwbPollSchema }),
    exchangeToken: async () => {
      if (!oauth) throw new Error("exchangeToken: this client uses token auth");
      return oauth.exchange();
    },
  };
}
