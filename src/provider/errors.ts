import { rememberJsonLength, scrubSecretText, scrubSecrets } from "../domain/secrets.ts";
import { clipText } from "../domain/text.ts";
import { DuplicateOrderErrorSchema, NotCancellableErrorSchema } from "./schemas.ts";

/**
 * Why a provider call failed.
 * - network: no HTTP answer (connection refused/reset, DNS).
 * - timeout: no complete answer within the client's timeout (also HTTP 408).
 * - rate_limited: 429. server: 5xx.
 * - client: another 4xx (bad request, not found, conflict...), or a redirect (3xx, not
 *   followed: the configured address is not where the provider answers).
 * - auth: 401/403, or a refused OAuth exchange.
 * - failure: HTTP 2xx whose body says `message: "Failure"` (a business refusal).
 * - invalid_response: a 2xx body that is not JSON or does not match the schema (likely a
 *   proxy or gateway glitch), or an unexpected status class.
 * - invalid_request: the client refused to send a body that fails the request schema, or
 *   a request fetch cannot build (a header value or URL it refuses, http.ts).
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
 * Which request failed: the call itself, or the OAuth token exchange it needed first
 * (auth.ts). A call whose token could not be had was never sent.
 */
export type ProviderErrorStage = "call" | "token";

/**
 * The one place that decides whether a failed call may succeed when sent again (STYLE.md
 * example 5). Whether it is SAFE to send again is the other question, answered by
 * `deliveryOf`: for a place it is not when the provider may already have acted.
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

/**
 * What a failed call may have done at the provider (PRODUCT.md §10):
 * - not_sent: the request never reached it (connection refused, DNS, TLS, refused by
 *   our own schema or by fetch before sending, or no OAuth token could be had for it,
 *   however the token endpoint failed: the call itself was never sent);
 * - refused: it answered that it did not act (429, 503, any other 4xx, a redirect but
 *   303, a 2xx that names no order or says "Failure");
 * - ambiguous: it may have acted and the answer was lost (timeout, connection closed
 *   after the request was written, 500/502/504 and other 5xx, an unreadable 2xx, a 303
 *   See Other pointing at the result of what it did).
 * Only an ambiguous place can have created an order; it is never re-sent automatically
 * unless the provider refuses duplicates (PROVIDER_DEDUPES_ORDERS).
 */
export type Delivery = "not_sent" | "refused" | "ambiguous";

/** 5xx answers that say the server did not act on the request. */
const REFUSING_5XX: ReadonlySet<number> = new Set([501, 503, 505]);

/**
 * Error codes of a connection that never carried the request: refused, unreachable, no
 * such host, TLS handshake failures, a connect timeout. Anything else that breaks a
 * connection (reset, "other side closed") may have come after the request was written.
 */
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_NONAME",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
  "CERT_HAS_EXPIRED",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "ERR_SSL_WRONG_VERSION_NUMBER",
]);

/** The error codes along an error's cause chain (fetch wraps the socket's error). */
function errorCodes(err: unknown): string[] {
  const codes: string[] = [];
  for (let e: unknown = err, depth = 0; e !== null && typeof e === "object" && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") codes.push(code);
    e = (e as { cause?: unknown }).cause;
  }
  return codes;
}

export function deliveryOf(kind: ProviderErrorKind, status: number | undefined, cause: unknown, stage: ProviderErrorStage = "call"): Delivery {
  // A timeout or a 502 at the token endpoint says nothing about the call: it was not sent.
  if (stage === "token") return "not_sent";
  switch (kind) {
    case "invalid_request":
      return "not_sent";
    case "network":
      return errorCodes(cause).some((c) => NOT_SENT_CODES.has(c)) ? "not_sent" : "ambiguous";
    case "timeout":
      return status === 408 ? "refused" : "ambiguous";
    case "server":
      return status !== undefined && REFUSING_5XX.has(status) ? "refused" : "ambiguous";
    case "invalid_response":
      return "ambiguous";
    case "client":
      // 303 See Other is how a server answers a POST it has acted on: the result is
      // elsewhere (RFC 9110 §15.4.4). Other redirects (301, 302, 307, 308) send the
      // request somewhere else, unprocessed, as does any 4xx.
      return status === SEE_OTHER ? "ambiguous" : "refused";
    case "rate_limited":
    case "auth":
    case "failure":
      return "refused";
  }
}

const SEE_OTHER = 303;

/** Error kind for an HTTP status that is not a success. */
export function kindForStatus(status: number): ProviderErrorKind {
  if (status === 401 || status === 403) return "auth";
  if (status === 408) return "timeout";
  if (status === 429) return "rate_limited";
  if (status >= 500 && status <= 599) return "server";
  if (status >= 400 && status <= 499) return "client";
  if (status >= 300 && status <= 399) return "client";
  return "invalid_response";
}

const MAX_MESSAGE_LENGTH = 500;

export interface ProviderErrorInit {
  kind: ProviderErrorKind;
  /** Default "call"; "token" when the OAuth exchange made for the call failed. */
  stage?: ProviderErrorStage;
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
  /** "token": the OAuth exchange failed, so the call it was for was never sent. */
  readonly stage: ProviderErrorStage;
  readonly retryable: boolean;
  readonly operation: string;
  readonly status?: number;
  /** From a Retry-After header (seconds or HTTP date), when the provider sent one. */
  readonly retryAfterMs?: number;
  /** The provider's own words (message/errors/detail), truncated; "" when it said nothing. */
  readonly providerMessage: string;
  /**
   * Parsed JSON body (or the raw text when not JSON) of the failed answer, with secrets
   * (access_token, client_secret, … at any depth) replaced, here and only here: errors
   * reach logs, job records and API answers. A log line's scrubbing passes over this copy
   * (domain/secrets.ts). The token endpoint's errors carry none (auth.ts).
   */
  readonly body?: unknown;
  /** Whether the provider may have acted on the call (see `deliveryOf`). */
  readonly delivery: Delivery;

  constructor(init: ProviderErrorInit) {
    const providerMessage = truncate(scrubSecretText(init.providerMessage ?? ""));
    const statusPart = init.status === undefined ? "" : ` -> ${init.status}`;
    super(`provider ${init.kind}: ${init.operation}${statusPart}${providerMessage ? `: ${providerMessage}` : ""}`, {
      cause: init.cause,
    });
    this.kind = init.kind;
    this.stage = init.stage ?? "call";
    this.retryable = isRetryable(init.kind);
    this.delivery = deliveryOf(init.kind, init.status, init.cause, this.stage);
    this.operation = init.operation;
    this.status = init.status;
    this.retryAfterMs = init.retryAfterMs;
    this.providerMessage = providerMessage;
    // Measured once here: a log line cuts a long answer short without walking it again.
    this.body = init.body === undefined ? undefined : rememberJsonLength(scrubSecrets(init.body));
  }
}

/**
 * A failure in a few words for a command's, a top-up's or an API error's message: kind,
 * status when there was one, and the provider's own words (or, without them, the error's
 * message), e.g. `client 422: store_code: unknown store`; a failed OAuth exchange says so
 * first: `token request failed: server 502: 502 Bad Gateway`.
 */
export function describeProviderError(err: ProviderError): string {
  const stage = err.stage === "token" ? "token request failed: " : "";
  return `${stage}${err.kind}${err.status ? ` ${err.status}` : ""}: ${err.providerMessage || err.message}`;
}

/**
 * The longest Retry-After read: an hour. Whoever waits may wait less (commands, 5 minutes:
 * commands/execute.ts); none waits longer, and a year's worth would overflow the
 * millisecond counts the waits are scheduled with.
 */
export const RETRY_AFTER_MAX_MS = 3_600_000;

/** RFC 9110's HTTP-date (§5.6.7): IMF-fixdate or the obsolete RFC 850 form, both in GMT. */
const HTTP_DATE_GMT = /^[a-z]{3,9}, \d{2}[ -][a-z]{3}[ -]\d{2}(?:\d{2})? \d{2}:\d{2}:\d{2} GMT$/i;
/** ...or asctime's form, which names no zone: GMT too (Date.parse alone reads it in the host's zone). */
const ASCTIME = /^[a-z]{3} [a-z]{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/i;
/**
 * Other date text that names its zone (GMT, UTC, Z or an offset), as gateways write it
 * (`… UTC`, `… +0000`, ISO 8601's `…Z`): no HTTP-date, but not ambiguous either.
 */
const NAMES_ZONE = /(?:\b(?:GMT|UTC|UT)|\dZ|[+-]\d{2}:?\d{2})$/i;

/**
 * Retry-After as milliseconds from `now`: delta-seconds or an HTTP date (RFC 9110 §10.2.3),
 * at most RETRY_AFTER_MAX_MS. Undefined when absent or unparsable; never negative. Date text
 * that is no HTTP-date is read only when it names its zone: Date.parse would read the rest
 * in the host's zone.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const trimmed = value.trim();
  if (trimmed === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.min(RETRY_AFTER_MAX_MS, Math.round(Number(trimmed) * 1000));
  const at = HTTP_DATE_GMT.test(trimmed) || NAMES_ZONE.test(trimmed) ? Date.parse(trimmed) : ASCTIME.test(trimmed) ? Date.parse(`${trimmed} GMT`) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.min(RETRY_AFTER_MAX_MS, Math.max(0, at - now));
}

/** Keys the provider's own words come under, in the order they are quoted. */
const MESSAGE_KEYS = ["message", "error", "detail", "reason", "error_description"] as const;
/** How much of a body that is not JSON (an HTML error page, plain text) is kept. */
const EXCERPT_LENGTH = 200;

/**
 * The provider's words from any body it sends, as one readable sentence: `message`,
 * `error`, `detail`, `reason` (strings, or objects and arrays of them) and `errors`
 * (a string, an array, or fields with their complaints), joined with ": ". A body that is
 * not JSON gives its text (HTML without its tags), cut short; an empty one, "".
 */
export function providerMessageOf(body: unknown): string {
  if (typeof body === "string") return excerpt(body);
  if (body === null || typeof body !== "object" || Array.isArray(body)) return describeErrors(body);
  const record = body as Record<string, unknown>;
  const parts: string[] = [];
  for (const key of MESSAGE_KEYS) {
    const value = record[key];
    if (value === undefined || value === null || value === "") continue;
    const text = describeErrors(value);
    if (text !== "" && !parts.includes(text)) parts.push(text);
  }
  const errors = record["errors"];
  if (errors !== undefined && errors !== null) {
    const text = describeErrors(errors);
    if (text !== "") parts.push(text);
  }
  return parts.join(": ");
}

/** The readable start of a body that is not JSON: tags and runs of white space removed. */
export function excerpt(text: string): string {
  const plain = text
    .replace(/<(script|style)[^>]*>[\s\S]*?<\/\1>/gi, " ")
    .replace(/<[^>]*>/g, " ")
    .replace(/&nbsp;/g, " ")
    .replace(/\s+/g, " ")
    .trim();
  return clipText(plain, EXCERPT_LENGTH);
}

function describeErrors(errors: unknown): string {
  if (errors === null || errors === undefined) return "";
  if (typeof errors === "string") return errors.trim();
  if (Array.isArray(errors)) return errors.map(describeErrors).filter((t) => t !== "").join("; ");
  if (typeof errors === "object") {
    return Object.entries(errors)
      .map(([field, value]) => {
        const text = describeErrors(value);
        return text === "" ? "" : `${field}: ${text}`;
      })
      .filter((t) => t !== "")
      .join("; ");
  }
  return String(errors);
}

function truncate(text: string): string {
  return clipText(text, MAX_MESSAGE_LENGTH);
}

/**
 * When a place was refused because the (store_code, client_order_id) pair already has an
 * order and the refusal names it (`errors.client_order_id` with the order under `data`):
 * the existing order, which the place then adopts instead of failing. This is the
 * evidence a provider that refuses duplicates gives for a place whose answer was lost.
 */
export function existingOrderFromError(err: unknown): { svc_order_id: string; track_url: string | null } | null {
  if (!(err instanceof ProviderError) || err.delivery !== "refused") return null;
  const parsed = DuplicateOrderErrorSchema.safeParse(err.body);
  if (!parsed.success) return null;
  return { svc_order_id: parsed.data.data.svc_order_id, track_url: parsed.data.data.track_url };
}

/**
 * When a cancel was refused and the refusal names the order with its status (`data`),
 * that id and status; else null. Whether it means the cancel is done is the command's
 * decision (commands/execute.ts). Either refusal form counts: a 4xx, or a 2xx refusal.
 */
export function cancelRefusalFromError(err: unknown): { svc_order_id: string; status: string } | null {
  if (!(err instanceof ProviderError) || err.delivery !== "refused") return null;
  const parsed = NotCancellableErrorSchema.safeParse(err.body);
  if (!parsed.success) return null;
  return { svc_order_id: parsed.data.data.svc_order_id, status: parsed.data.data.status };
}
