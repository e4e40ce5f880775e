import type { z } from "zod";
import type { Logger } from "../logger.ts";
import { createOAuthAuth, createTokenAuth } from "./auth.ts";
import type { ProviderAuth, TokenExchangeEnd } from "./auth.ts";
import { ProviderError } from "./errors.ts";
import { interpret, operationOf, send } from "./http.ts";
import type { HttpDeps, HttpRequest } from "./http.ts";
import { PATHS, fillPath, resolvePaths } from "./paths.ts";
import type { PathName, Paths } from "./paths.ts";
import type { Product } from "./products.ts";
import {
  AnyObjectResponseSchema,
  CancelOrderBodySchema,
  CancelOrderResponseSchema,
  DispatchReadyBodySchema,
  EditOrderBodySchema,
  EditOrderResponseSchema,
  FreshAwbAcceptedSchema,
  FreshAwbBodySchema,
  FreshAwbPollSchema,
  MessageResponseSchema,
  OrderStatusResponseSchema,
  PlaceOrderBodySchema,
  PlaceOrderResponseSchema,
  PoolAwbBodySchema,
  PoolAwbResponseSchema,
  SANDBOX_ACTIONS,
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

/**
 * A call's timeout unless told otherwise (PROVIDER_TIMEOUT_MS's default too). Longer than
 * the 10 s in which fetch gives up connecting (UND_ERR_CONNECT_TIMEOUT): a connection never
 * made then reads as not sent, and a place is retried. Cut short by a shorter timeout, the
 * same wait is a timeout like any other, and a place that meets it becomes unconfirmed.
 * Shorter than the 15 s a stopping worker gives its running jobs.
 */
export const DEFAULT_TIMEOUT_MS = 12_000;

export interface ProviderClientOptions {
  /** `{base_url}`: order and sandbox endpoints. */
  baseUrl: string;
  /** `{gateway_url}`: OAuth token and AWB endpoints. Default: baseUrl. */
  gatewayUrl?: string;
  auth: ProviderAuthConfig;
  /** Per call, covering connect, headers and body. Default DEFAULT_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Clock for token renewal and Retry-After dates. Default Date.now. */
  now?: () => number;
  fetch?: typeof fetch;
  logger?: Logger;
  /** Paths that differ from the defaults (PROVIDER_PATHS). */
  paths?: Partial<Paths>;
}

/**
 * Typed client for every provider endpoint. Every method resolves with the zod-parsed
 * response or rejects with a ProviderError (see errors.ts for kinds and retryability);
 * a request body that fails its schema is refused before sending (kind invalid_request).
 */
export interface ProviderClient {
  /**
   * Has the next call's authorization at hand: with OAuth, exchanges a token unless one is
   * cached. Rejects as a call would when none can be had (a ProviderError of stage
   * "token"): a caller that must record "sending" before a call (a place) asks first, so
   * that a failed exchange is never taken for a call that may have been sent.
   */
  authorize(): Promise<void>;
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
  /**
   * Has `observer` told as each OAuth token exchange ends, whichever call needed it (none
   * with token auth): for /metrics (observed.ts), where an exchange is a call of its own.
   */
  observeTokenExchanges(observer: (ended: TokenExchangeEnd) => void): void;
}

interface CallSpec<S extends z.ZodType> {
  method: HttpRequest["method"];
  path: PathName;
  params?: Record<string, string>;
  /** The JSON body and the schema it must pass before it is sent; undefined sends none. */
  body?: { schema: z.ZodType; value: unknown };
  schema: S;
}

/** One row of SANDBOX_ACTIONS: the typed sandbox methods and `sandbox` all call through it. */
interface SandboxSpec<S extends z.ZodType> {
  method: HttpRequest["method"];
  path: PathName;
  body: z.ZodType | null;
  response: S;
}
type SandboxResponseSchema = (typeof SANDBOX_ACTIONS)[SandboxAction]["response"];

const GATEWAY_PATHS: ReadonlySet<PathName> = new Set(["oauthToken", "awbPool", "awbFresh", "awbFreshPoll"]);

export function createProviderClient(options: ProviderClientOptions): ProviderClient {
  const http: HttpDeps = {
    fetch: options.fetch ?? fetch,
    timeoutMs: options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    now: options.now ?? Date.now,
    logger: options.logger?.child({ component: "provider" }),
  };
  const baseUrl = options.baseUrl;
  const gatewayUrl = options.gatewayUrl ?? options.baseUrl;
  const paths = resolvePaths(options.paths);
  const exchangeObservers: ((ended: TokenExchangeEnd) => void)[] = [];
  const oauth =
    options.auth.method === "oauth"
      ? createOAuthAuth({
          clientId: options.auth.clientId,
          clientSecret: options.auth.clientSecret,
          product: options.auth.product,
          gatewayUrl,
          tokenPath: paths.oauthToken,
          http,
          onExchange: (ended) => {
            for (const observer of exchangeObservers) observer(ended);
          },
        })
      : null;
  const auth: ProviderAuth = oauth ?? createTokenAuth(options.auth.method === "token" ? options.auth.token : "");

  async function call<S extends z.ZodType>(spec: CallSpec<S>): Promise<z.output<S>> {
    const req: HttpRequest = {
      method: spec.method,
      baseUrl: GATEWAY_PATHS.has(spec.path) ? gatewayUrl : baseUrl,
      path: filledPath(spec.method, spec.path, spec.params),
      headers: {},
      json: spec.body === undefined ? undefined : validBody(spec.method, spec.path, spec.body),
    };
    let authRetried = false;
    for (;;) {
      // Rejects with a stage "token" error (never sent) when the OAuth exchange fails.
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

  /**
   * The call's path with its parameters in place, or an invalid_request ProviderError (never
   * sent) for a parameter of "." or "..": percent-encoding leaves dots as they are, and URL
   * parsing reads such a segment as a step (`/api/v2/orders/../dispatch-ready/` is sent as
   * `/api/v2/dispatch-ready/`), so the request would go to another endpoint.
   */
  function filledPath(method: HttpRequest["method"], path: PathName, params: Record<string, string> | undefined): string {
    const dotted = Object.entries(params ?? {}).find(([, value]) => value === "." || value === "..");
    if (dotted) {
      throw new ProviderError({
        kind: "invalid_request",
        operation: operationOf({ method, path: PATHS[path] }),
        providerMessage: `${dotted[0]} "${dotted[1]}" cannot go in the provider's URL path: a segment "${dotted[1]}" addresses another path`,
      });
    }
    return fillPath(paths[path], params);
  }

  /** The parsed body, or an invalid_request ProviderError: a body that fails its schema is never sent. */
  function validBody(method: HttpRequest["method"], path: PathName, body: { schema: z.ZodType; value: unknown }): unknown {
    const parsed = body.schema.safeParse(body.value);
    if (parsed.success) return parsed.data;
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
    throw new ProviderError({
      kind: "invalid_request",
      operation: operationOf({ method, path: PATHS[path] }),
      providerMessage: `invalid request body: ${issues}`,
      body: parsed.error.issues,
    });
  }

  const svc = (svcOrderId: string) => ({ svc_order_id: svcOrderId });

  /** A sandbox action as SANDBOX_ACTIONS describes it (a missing body is `{}`). */
  async function sandboxCall<S extends z.ZodType>(spec: SandboxSpec<S>, svcOrderId: string, value?: unknown): Promise<z.output<S>> {
    const body = spec.body === null ? undefined : { schema: spec.body, value: value ?? {} };
    return call({ method: spec.method, path: spec.path, params: svc(svcOrderId), body, schema: spec.response });
  }

  return {
    authorize: async () => {
      await auth.header();
    },
    placeOrder: async (b) =>
      call({ method: "POST", path: "placeOrder", body: { schema: PlaceOrderBodySchema, value: b }, schema: PlaceOrderResponseSchema }),
    editOrder: async (b) => call({ method: "PUT", path: "editOrder", body: { schema: EditOrderBodySchema, value: b }, schema: EditOrderResponseSchema }),
    cancelOrder: async (id, b) =>
      call({ method: "PUT", path: "cancelOrder", params: svc(id), body: { schema: CancelOrderBodySchema, value: b }, schema: CancelOrderResponseSchema }),
    dispatchReady: async (coid, b) =>
      call({ method: "PUT", path: "dispatchReady", params: { coid }, body: { schema: DispatchReadyBodySchema, value: b }, schema: AnyObjectResponseSchema }),
    stopReattempt: async (b) =>
      call({ method: "POST", path: "stopReattempt", body: { schema: StopReattemptBodySchema, value: b }, schema: MessageResponseSchema }),
    orderStatus: async (id) => call({ method: "GET", path: "orderStatus", params: svc(id), schema: OrderStatusResponseSchema }),
    allot: async (id, b) => sandboxCall(SANDBOX_ACTIONS.allot, id, b),
    riderArrival: async (id, b) => sandboxCall(SANDBOX_ACTIONS["rider-arrival"], id, b),
    collect: async (id, b) => sandboxCall(SANDBOX_ACTIONS.collect, id, b),
    doorstepArrival: async (id, b) => sandboxCall(SANDBOX_ACTIONS["doorstep-arrival"], id, b),
    deliver: async (id, b) => sandboxCall(SANDBOX_ACTIONS.deliver, id, b),
    customerReturn: async (id) => sandboxCall(SANDBOX_ACTIONS["customer-return"], id),
    sellerReturn: async (id, b) => sandboxCall(SANDBOX_ACTIONS["seller-return"], id, b),
    riderLocation: async (id, b) => sandboxCall(SANDBOX_ACTIONS["rider-location"], id, b),
    sandbox: async (action, id, b) => sandboxCall<SandboxResponseSchema>(SANDBOX_ACTIONS[action], id, b),
    generatePoolAwbs: async (count) =>
      call({ method: "POST", path: "awbPool", body: { schema: PoolAwbBodySchema, value: { count } }, schema: PoolAwbResponseSchema }),
    requestFreshAwbs: async (b = {}) =>
      call({ method: "POST", path: "awbFresh", body: { schema: FreshAwbBodySchema, value: b }, schema: FreshAwbAcceptedSchema }),
    pollFreshAwbs: async (requestId) =>
      call({ method: "GET", path: "awbFreshPoll", params: { request_id: requestId }, schema: FreshAwbPollSchema }),
    exchangeToken: async () => {
      if (!oauth) throw new Error("exchangeToken: this client uses token auth");
      return oauth.exchange();
    },
    observeTokenExchanges: (observer) => {
      exchangeObservers.push(observer);
    },
  };
}
