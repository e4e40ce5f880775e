/**
 * One error type for the whole API. Every failure leaves as
 * `{"error":{"code","message","request_id"}}` with a status decided here, in one switch.
 */
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ZodError } from "zod";
import { databaseBusyReason, isDatabaseUnavailable, isOutOfConnections } from "../db/client.ts";
import { DATABASE_OUTAGE_MS, failureBursts } from "../db/failure-bursts.ts";
import { DomainError } from "../domain/errors.ts";
import type { DomainErrorKind } from "../domain/errors.ts";
import type { Logger } from "../logger.ts";

export type ErrorCode =
  | "invalid_json"
  | "invalid_parameter"
  | "validation_failed"
  | "missing_order_id"
  | "unauthorized"
  | "sandbox_disabled"
  | "not_found"
  | "method_not_allowed"
  | "order_not_found"
  | "command_not_found"
  | "notification_endpoint_not_found"
  | "notification_message_not_found"
  | "conflict"
  | "order_picked_up"
  | "payload_too_large"
  | "unsupported_media_type"
  | "endpoint_url_forbidden"
  | "awb_pool_empty"
  | "provider_error"
  | "provider_rejected"
  | "provider_unavailable"
  | "database_unavailable"
  | "overloaded"
  | "internal_error";

export function statusOf(code: ErrorCode): 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 422 | 500 | 502 | 503 {
  switch (code) {
    case "invalid_json":
    case "invalid_parameter":
      return 400;
    case "unauthorized":
      return 401;
    case "sandbox_disabled":
      return 403;
    case "not_found":
    case "order_not_found":
    case "command_not_found":
    case "notification_endpoint_not_found":
    case "notification_message_not_found":
      return 404;
    case "method_not_allowed":
      return 405;
    case "conflict":
    case "order_picked_up":
      return 409;
    case "payload_too_large":
      return 413;
    case "unsupported_media_type":
      return 415;
    case "missing_order_id":
    case "validation_failed":
    case "provider_rejected":
    case "endpoint_url_forbidden":
      return 422;
    case "provider_error":
      return 502;
    case "awb_pool_empty":
    case "provider_unavailable":
    case "database_unavailable":
    case "overloaded":
      return 503;
    case "internal_error":
      return 500;
  }
}

export interface FieldIssue {
  path: string;
  message: string;
}

export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly issues: FieldIssue[] | undefined;
  readonly headers: Record<string, string> | undefined;
  constructor(code: ErrorCode, message: string, options: { issues?: FieldIssue[]; cause?: unknown; headers?: Record<string, string> } = {}) {
    super(message, { cause: options.cause });
    this.name = "ApiError";
    this.code = code;
    this.issues = options.issues;
    this.headers = options.headers;
  }
}

/** zod issues as `[{path, message}]`, and one sentence naming every bad field. */
export function fromZodError(error: ZodError, code: ErrorCode = "validation_failed", where = "body"): ApiError {
  // An unknown key is named as the field itself (`stauts`), one issue each, not as the object holding it.
  const issues = error.issues.flatMap((i) =>
    i.code === "unrecognized_keys"
      ? i.keys.map((key) => ({ path: [...i.path, key].join("."), message: `unknown ${where === "query" ? "parameter" : "field"}` }))
      : [{ path: i.path.length ? i.path.join(".") : where, message: i.message }],
  );
  return new ApiError(code, `invalid ${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, { issues });
}

function errorBody(err: ApiError, requestId: string) {
  return {
    error: {
      code: err.code,
      message: err.message,
      request_id: requestId,
      ...(err.issues ? { issues: err.issues } : {}),
    },
  };
}

/** The code each refusal of the core answers with (its status: statusOf). */
const DOMAIN_CODES: Record<DomainErrorKind, ErrorCode> = {
  order_not_found: "order_not_found",
  command_not_found: "command_not_found",
  conflict: "conflict",
  order_picked_up: "order_picked_up",
  notification_endpoint_not_found: "notification_endpoint_not_found",
  endpoint_url_forbidden: "endpoint_url_forbidden",
};

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof DomainError) return new ApiError(DOMAIN_CODES[err.kind], err.message, { cause: err });
  if (isOutOfConnections(err)) {
    // The server is up and said why: saying "unavailable" sent operators looking for an outage.
    const message = "the database refused a new connection: too many connections (SQLSTATE 53300); retry later";
    return new ApiError("database_unavailable", message, { cause: err, headers: { "retry-after": "1" } });
  }
  if (isDatabaseUnavailable(err)) {
    return new ApiError("database_unavailable", "the database is unavailable; retry later", { cause: err, headers: { "retry-after": "1" } });
  }
  const busy = databaseBusyReason(err);
  if (busy !== null) {
    return new ApiError("database_unavailable", `the database could not complete the request (${busy}); retry later`, { cause: err, headers: { "retry-after": "1" } });
  }
  if (err instanceof HTTPException) {
    const status = err.status;
    if (status === 413) return new ApiError("payload_too_large", err.message || "request body too large");
    // zod-openapi's media-type gate: a body that is not declared JSON (or has no Content-Type).
    if (status === 415) return new ApiError("unsupported_media_type", "unsupported Content-Type: send the body as application/json");
    if (status === 401) return new ApiError("unauthorized", err.message || "unauthorized");
    if (status === 404) return new ApiError("not_found", err.message || "not found");
    if (/json/i.test(err.message)) return new ApiError("invalid_json", "request body is not valid JSON");
    if (status >= 400 && status < 500) return new ApiError("invalid_parameter", err.message || "bad request");
  }
  return new ApiError("internal_error", "internal error", { cause: err });
}

/** What lies under a refusal (a database outage's own error, say) in a line, without its stack. */
function causeOf(err: ApiError): { cause?: string } {
  const cause = err.cause;
  if (cause === undefined || cause === null) return {};
  if (!(cause instanceof Error)) return { cause: String(cause) };
  if (cause.message === err.message) return {};
  const code = (cause as { code?: unknown }).code;
  return { cause: `${cause.name}: ${cause.message}${typeof code === "string" ? ` (${code})` : ""}` };
}

/** 503s that come in floods while the database is away or slow: logged once per burst. */
const BURST_CODES = new Set<ErrorCode>(["database_unavailable", "overloaded"]);

export function errorHandler(log: Logger) {
  const bursts = failureBursts(log, "requests refused", { escalateAfterMs: DATABASE_OUTAGE_MS });
  return (err: unknown, c: Context) => {
    // The client hung up, or was cut off for being too slow, while its body was read: the
    // stream's ECONNRESET says nothing about the database, and no one is left to answer.
    const clientGone = c.req.raw.signal.aborted && !(err instanceof ApiError);
    const apiError = clientGone
      ? new ApiError("invalid_parameter", "the client closed the connection before its request was read", { cause: err })
      : toApiError(err);
    const status = statusOf(apiError.code);
    const requestId = c.get("requestId") ?? "";
    // Only an error nobody foresaw (internal_error, 500) is an error, with its stack. A 5xx
    // with a known code is the state of something tracklane depends on (503 awb_pool_empty,
    // database_unavailable, …; 502 provider_error): a warning, with its cause, no stack. A
    // 4xx is the caller's doing: the request line (at info) says enough.
    if (apiError.code === "internal_error") log.error({ err, requestId, code: apiError.code }, "request failed");
    // One line per burst of refusals for one reason (db/failure-bursts.ts), not one each.
    else if (BURST_CODES.has(apiError.code)) bursts.failed(apiError.message.replace(/; retry (later|shortly)$/, ""), { requestId, code: apiError.code, status, message: apiError.message, ...causeOf(apiError) }, "request refused");
    else if (status >= 500) log.warn({ requestId, code: apiError.code, status, message: apiError.message, ...causeOf(apiError) }, "request refused");
    for (const [k, v] of Object.entries(apiError.headers ?? {})) c.header(k, v);
    return c.json(errorBody(apiError, requestId), status);
  };
}
