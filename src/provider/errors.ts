import { DuplicateOrderErrorSchema, NotCancellableErrorSchema } from "./schemas.ts";

/**
 * Why a provider call failed.
 * - network: no HTTP answer (connection refused/reset, DNS).
 * - timeout: no complete answer within the client's timeout (also HTTP 408).
 * - rate_limited: 429. server: 5xx.
 * - client: another 4xx (bad request, not found, conflict...).
 * - auth: 401/403, or a refused OAuth exchange.
 * - failure: HTTP 2xx whose body says `message: "Failure"` (a business refusal).
 * - invalid_response: a 2xx body that is not JSON or does not match the schema (likely a
 *   proxy or gateway glitch), or an unexpected status class.
 * - invalid_request: the client refused to send a body that fails the request schema.
 */
export type ProviderErrorKind =
  | "network"
  | "timeout"
  | "rate_limited"
  | "server"
  | "client"
  | "auth"
  | "failure"
  | "invalid_response"
  | "invalid_request";

/**
 * The one place that decides whether a failed call may succeed when sent again (STYLE.md
 * example 5). Retrying is safe for every provider call tracklane makes: place-order is
 * protected by the provider's client_order_id uniqueness (see `existingOrderFromError`).
 */
export function isRetryable(kind: ProviderErrorKind): boolean {
  switch (kind) {
    case "network":
    case "timeout":
    case "rate_limited":
    case "server":
    case "invalid_response":
      return true;
    case "client":
    case "auth":
    case "failure":
    case "invalid_request":
      return false;
  }
}

/** Error kind for an HTTP status that is not a success. */
export function kindForStatus(status: number): ProviderErrorKind {
  if (status === 401 || status === 403) return "auth";
  if (status === 408) return "timeout";
  if (status === 429) return "rate_limited";
  if (status >= 500 && status <= 599) return "server";
  if (status >= 400 && status <= 499) return "client";
  return "invalid_response";
}

const MAX_MESSAGE_LENGTH = 500;

export interface ProviderErrorInit {
  kind: ProviderErrorKind;
  /** Method and path of the call, e.g. `PUT /api/v2/orders/1/cancel/`; never a URL with secrets. */
  operation: string;
  status?: number;
  retryAfterMs?: number;
  providerMessage?: string;
  body?: unknown;
  cause?: unknown;
}

export class ProviderError extends Error {
  override readonly name = "ProviderError";
  readonly kind: ProviderErrorKind;
  readonly retryable: boolean;
  readonly operation: string;
  readonly status?: number;
  /** From a Retry-After header (seconds or HTTP date), when the provider sent one. */
  readonly retryAfterMs?: number;
  /** The provider's own words (message/errors/detail), truncated; "" when it said nothing. */
  readonly providerMessage: string;
  /** Parsed JSON body (or the raw text when not JSON) of the failed answer. */
  readonly body?: unknown;

  constructor(init: ProviderErrorInit) {
    const providerMessage = truncate(init.providerMessage ?? "");
    const statusPart = init.status === undefined ? "" : ` -> ${init.status}`;
    super(`provider ${init.kind}: ${init.operation}${statusPart}${providerMessage ? `: ${providerMessage}` : ""}`, {
      cause: init.cause,
    });
    this.kind = init.kind;
    this.retryable = isRetryable(init.kind);
    this.operation = init.operation;
    this.status = init.status;
    this.retryAfterMs = init.retryAfterMs;
    this.providerMessage = providerMessage;
    this.body = init.body;
  }
}

export function isProviderError(err: unknown): err is ProviderError {
  return err instanceof ProviderError;
}

/**
 * Retry-After as milliseconds from `now`: delta-seconds or an HTTP date (RFC 9110 §10.2.3).
 * Undefined when absent or unparsable; never negative.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return undefined;
  return Math.max(0, at - now);
}

/**
 * The provider's error text from a body shaped `{message, errors}`, `{detail}` or an OAuth
 * `{error, error_description}`; for a non-JSON body, its start.
 */
export function providerMessageOf(body: unknown): string {
  if (typeof body === "string") return body.trim();
  if (body === null || typeof body !== "object") return "";
  const record = body as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of ["message", "detail", "error", "error_description"]) {
    const value = record[key];
    if (typeof value === "string" && value !== "") parts.push(value);
  }
  const errors = record["errors"];
  if (errors !== undefined && errors !== null) parts.push(describeErrors(errors));
  return parts.join(": ");
}

function describeErrors(errors: unknown): string {
  if (typeof errors === "string") return errors;
  if (Array.isArray(errors)) return errors.map(describeErrors).join("; ");
  if (typeof errors === "object" && errors !== null) {
    return Object.entries(errors)
      .map(([field, value]) => `${field}: ${describeErrors(value)}`)
      .join("; ");
  }
  return String(errors);
}

function truncate(text: string): string {
  return text.length > MAX_MESSAGE_LENGTH ? `${text.slice(0, MAX_MESSAGE_LENGTH - 1)}…` : text;
}

/**
 * When a place-order failed because the (store_code, client_order_id) pair already has an
 * order, the existing order's ids; else null. A place whose answer was lost (timeout) is
 * retried, and this turns the provider's refusal into "already placed" instead of a second
 * order or a failure.
 */
export function existingOrderFromError(err: unknown): { svc_order_id: string; track_url: string } | null {
  if (!(err instanceof ProviderError) || err.kind !== "client") return null;
  const parsed = DuplicateOrderErrorSchema.safeParse(err.body);
  if (!parsed.success) return null;
  return { svc_order_id: parsed.data.data.svc_order_id, track_url: parsed.data.data.track_url };
}

/**
 * When a cancel was refused because the order is already finished, the order's id and
 * status as the provider states them; else null. Whether that refusal means the cancel is
 * done is the command's decision (see `cancelledByEarlierAttempt` in commands/execute.ts).
 * Either refusal form counts: a 4xx, or a 200 whose body says "Failure".
 */
export function cancelRefusalFromError(err: unknown): { svc_order_id: string; status: string } | null {
  if (!(err instanceof ProviderError) || (err.kind !== "client" && err.kind !== "failure")) return null;
  const parsed = NotCancellableErrorSchema.safeParse(err.body);
  if (!parsed.success) return null;
  return { svc_order_id: parsed.data.data.svc_order_id, status: parsed.data.data.status };
}
