import type { z } from "zod";
import type { Logger } from "../logger.ts";
import { excerpt, kindForStatus, parseRetryAfter, ProviderError, providerMessageOf } from "./errors.ts";

/**
 * One HTTP exchange with the provider and the mapping of its outcome to a parsed value or a
 * ProviderError. Shared by the API client and the OAuth token exchange.
 */

export interface HttpDeps {
  fetch: typeof fetch;
  timeoutMs: number;
  now: () => number;
  logger?: Logger;
}

export interface HttpRequest {
  method: "GET" | "POST" | "PUT";
  /** Base address (base_url or gateway_url); `path` is appended. */
  baseUrl: string;
  path: string;
  headers: Record<string, string>;
  /** JSON-encoded unless `form` is set. */
  json?: unknown;
  form?: Record<string, string>;
}

export interface RawResponse {
  status: number;
  headers: Headers;
  text: string;
}

export function operationOf(req: Pick<HttpRequest, "method" | "path">): string {
  return `${req.method} ${req.path}`;
}

/** Sends the request; resolves with any HTTP answer, throws ProviderError network/timeout. */
export async function send(deps: HttpDeps, req: HttpRequest): Promise<RawResponse> {
  const headers: Record<string, string> = { accept: "application/json", ...req.headers };
  let body: string | undefined;
  if (req.form) {
    headers["content-type"] = "application/x-www-form-urlencoded";
    body = new URLSearchParams(req.form).toString();
  } else if (req.json !== undefined) {
    headers["content-type"] = "application/json";
    body = JSON.stringify(req.json);
  }
  const url = joinUrl(req.baseUrl, req.path);
  const started = performance.now();
  const log = { method: req.method, path: req.path };
  // Built first, on its own: fetch refuses a header value with a line break or a character
  // beyond Latin-1 (a token pasted with one), or a URL holding a password, before sending
  // anything, and its words repeat the value. Such a call was never sent (never
  // "ambiguous"), and its error names no header or URL.
  try {
    new Request(url, { method: req.method, headers, body });
  } catch (err) {
    const why = err instanceof Error ? err.name : typeof err;
    deps.logger?.warn({ ...log, error: why }, "provider request could not be built");
    throw new ProviderError({
      kind: "invalid_request",
      operation: operationOf(req),
      providerMessage: `the request could not be built (${why}: a header value or the URL is not valid for HTTP); nothing was sent`,
    });
  }
  try {
    // One signal covers connecting, the headers and the body: a stalled body is a timeout too.
    // A redirect is not followed: fetch would turn a POST answered 301/302 into a GET
    // without its body, or send the body again elsewhere (interpret reads the 3xx).
    const res = await deps.fetch(url, { method: req.method, headers, body, redirect: "manual", signal: AbortSignal.timeout(deps.timeoutMs) });
    const text = await readAtMost(res, RESPONSE_MAX_BYTES);
    deps.logger?.debug({ ...log, status: res.status, durationMs: Math.round(performance.now() - started) }, "provider call");
    if (text === null) {
      // Answered, and not read: a 2xx may hide an action (a place that was made), so it is
      // an invalid response, as one that is not JSON; anything else is what its status says.
      const is2xx = res.status >= 200 && res.status <= 299;
      deps.logger?.warn({ ...log, status: res.status, maxBytes: RESPONSE_MAX_BYTES }, "provider answer too large: not read");
      throw new ProviderError({
        kind: is2xx ? "invalid_response" : kindForStatus(res.status),
        operation: operationOf(req),
        status: res.status,
        retryAfterMs: parseRetryAfter(res.headers.get("retry-after"), deps.now()),
        providerMessage: `the answer is larger than ${RESPONSE_MAX_BYTES} bytes: not read`,
      });
    }
    return { status: res.status, headers: res.headers, text };
  } catch (err) {
    if (err instanceof ProviderError) throw err;
    const timedOut = isTimeout(err);
    deps.logger?.warn(
      { ...log, durationMs: Math.round(performance.now() - started), error: timedOut ? "timeout" : errorText(err) },
      "provider call failed",
    );
    throw new ProviderError({
      kind: timedOut ? "timeout" : "network",
      operation: operationOf(req),
      providerMessage: timedOut ? `no answer within ${deps.timeoutMs} ms` : errorText(err),
      cause: err,
    });
  }
}

/**
 * The one reading of every provider answer (PRODUCT.md §10), shared by all commands:
 * - not 2xx: an error by status, with the provider's words (JSON in any of its shapes,
 *   or an excerpt of an HTML or text body; "empty body" when there is none);
 * - 2xx whose body says `message: "Failure"`: a refusal (`failure`);
 * - 2xx that is JSON but not the expected shape: a refusal with the provider's text when
 *   it gives one and nothing in the answer says it acted ("Order in non-serviceable area";
 *   see `saysItActed`), else `invalid_response`, an answer that may hide an action (so is
 *   ambiguous);
 * - 2xx that is not JSON: `invalid_response`, with an excerpt.
 */
export function interpret<S extends z.ZodType>(
  deps: Pick<HttpDeps, "now" | "logger">,
  req: Pick<HttpRequest, "method" | "path">,
  res: RawResponse,
  schema: S,
): z.output<S> {
  const operation = operationOf(req);
  const blank = res.text.trim() === "";
  const is2xx = res.status >= 200 && res.status <= 299;
  // An empty 2xx (e.g. 204) reads as {}: schemas of responses the spec does not show accept
  // it, schemas that need fields still reject it.
  const json: ReturnType<typeof parseJson> = blank && is2xx ? { ok: true, value: {} } : parseJson(res.text);
  const body = json.ok ? json.value : res.text;
  if (!is2xx) {
    const kind = kindForStatus(res.status);
    deps.logger?.warn({ method: req.method, path: req.path, status: res.status, kind }, "provider refused call");
    throw new ProviderError({
      kind,
      operation,
      status: res.status,
      retryAfterMs: parseRetryAfter(res.headers.get("retry-after"), deps.now()),
      providerMessage: isRedirect(res.status) ? redirectMessage(res) : blank ? "empty body" : providerMessageOf(body) || excerpt(res.text),
      body,
    });
  }
  if (!json.ok) {
    throw new ProviderError({
      kind: "invalid_response",
      operation,
      status: res.status,
      providerMessage: `response is not JSON: ${excerpt(res.text)}`,
      body,
    });
  }
  if (isFailureBody(json.value)) {
    throw new ProviderError({ kind: "failure", operation, status: res.status, providerMessage: providerMessageOf(json.value), body });
  }
  const parsed = schema.safeParse(json.value);
  if (!parsed.success) {
    const said = providerMessageOf(json.value);
    if (said !== "" && !saysItActed(res.status, json.value, said)) {
      throw new ProviderError({ kind: "failure", operation, status: res.status, providerMessage: said, body });
    }
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ");
    throw new ProviderError({
      kind: "invalid_response",
      operation,
      status: res.status,
      providerMessage: `unexpected response shape: ${issues}${said === "" ? "" : ` (provider said: ${said})`}`,
      body,
    });
  }
  return parsed.data;
}

/**
 * Words with which a provider announces that it did act. A 2xx saying one of them but
 * missing what we need may still have created an order: ambiguous, never a refusal.
 */
const SUCCESS_WORDS = /\b(success|successful|successfully|placed|created|accepted|received|booked|confirmed|scheduled|submitted|queued|registered|ok|done|updated|cancelled)\b/i;

/** Fields with which an answer reports, beside its words, whether the call succeeded. */
const SUCCESS_FLAGS = ["status", "success", "is_success", "ok"] as const;

/**
 * Whether a 2xx that is not the expected shape says the provider took the call, so that it
 * may hide an order and is never read as a refusal: its status (201 Created, 202 Accepted:
 * taken for processing, whatever its words), a success flag (`success: true`,
 * `status: "Success"`), or its words.
 */
function saysItActed(status: number, value: unknown, said: string): boolean {
  if (status === 201 || status === 202) return true;
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    const record = value as Record<string, unknown>;
    for (const key of SUCCESS_FLAGS) {
      const flag = record[key];
      if (flag === true || (typeof flag === "string" && SUCCESS_WORDS.test(flag))) return true;
    }
  }
  return SUCCESS_WORDS.test(said);
}

const isRedirect = (status: number) => status >= 300 && status <= 399;

/** A redirect names where the provider answers: the configured address is not it. */
function redirectMessage(res: RawResponse): string {
  const location = res.headers.get("location");
  const where = location === null ? "without a Location" : `to ${excerpt(location)}`;
  if (res.status === 303) {
    return `the provider answered 303 See Other (${where}): it may have acted on the call and points to its result, which tracklane does not read. Check PROVIDER_BASE_URL (or PROVIDER_GATEWAY_URL) and the provider's dashboard`;
  }
  return `the provider redirected (${res.status}) ${where}; nothing was done there. Set PROVIDER_BASE_URL (or PROVIDER_GATEWAY_URL) to the address it answers at`;
}

function isFailureBody(value: unknown): boolean {
  return typeof value === "object" && value !== null && (value as Record<string, unknown>)["message"] === "Failure";
}

/**
 * An integer past 2^53 - 1 (a provider's order id, say) would come out of JSON.parse as
 * the nearest double: another id, and a later cancel or edit would name another order.
 * It is kept as the digits the provider sent, a string, which every id schema takes.
 */
function exactIntegers(_key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value !== "number" || Number.isSafeInteger(value) || context?.source === undefined) return value;
  return /^-?\d+$/.test(context.source) ? context.source : value;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text, exactIntegers as (key: string, value: unknown) => unknown) };
  } catch {
    return { ok: false };
  }
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause instanceof Error ? ` (${err.cause.message})` : "";
  return `${err.message}${cause}`;
}

/**
 * The largest answer read from the provider: far above its largest (an AWB batch of
 * 100,000 numbers is a few MB), and a bound on what one answer can make a process hold.
 * Read whole, an endless or enormous body (a wrong PROVIDER_BASE_URL, a proxy's error
 * stream) went on filling memory until the call's timeout, gigabytes at LAN speed.
 */
export const RESPONSE_MAX_BYTES = 32 * 1024 * 1024;

/** The body as text (UTF-8, as Response#text reads it), or null once it passes `max` bytes (the rest is not read). */
export async function readAtMost(res: Response, max: number): Promise<string | null> {
  if (res.body === null) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}

function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}${path}`;
}
