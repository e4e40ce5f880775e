/**
 * One webhook delivery attempt: a POST over node:http(s) with the SSRF guard in its DNS lookup,
 * one deadline for the whole exchange, no redirects, and a capped response read. Never logs
 * (headers carry signatures) and never throws for what the network or the receiver does.
 */
import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import { clipText } from "../domain/text.ts";
import { ForbiddenUrlError, guardedLookup, precheckEndpointUrl } from "./url-guard.ts";
import type { LookupAll } from "./url-guard.ts";

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Lifts the SSRF guard (self-hosted receivers on the LAN, tests on loopback). */
  allowPrivate: boolean;
  lookup?: LookupAll;
  /** Response bytes read before the connection is dropped; 64 KiB by default. */
  maxResponseBytes?: number;
}

export interface SendResult {
  outcome: "delivered" | "gone" | "failed";
  statusCode: number | null;
  durationMs: number;
  responseExcerpt: string | null;
  error: string | null;
}

const USER_AGENT = "tracklane-webhooks/1";
const EXCERPT_CHARS = 1000;
/** A UTF-8 character is at most 4 bytes: this many bytes always hold the excerpt's characters. */
const EXCERPT_BYTES = EXCERPT_CHARS * 4;

// Separate pools per guard setting: a socket opened with the guard lifted must never serve a guarded request.
// No cap per host: many endpoints may share one (a hook service), and a send queued in the
// pool behind another endpoint's slow ones used up its own timeout without ever being sent.
// What is in flight is bounded already: 4 per endpoint, and a worker's delivery runs.
const agents = {
  "http:": [new http.Agent({ keepAlive: true }), new http.Agent({ keepAlive: true })],
  "https:": [new https.Agent({ keepAlive: true }), new https.Agent({ keepAlive: true })],
} as const;

class Timeout extends Error {
  constructor(ms: number) {
    super(`timeout after ${ms} ms`);
  }
}

function excerptOf(chunks: readonly Buffer[]): string | null {
  const bytes = Buffer.concat(chunks);
  if (bytes.length === 0) return null;
  // Buffer#toString("utf8") replaces invalid sequences with U+FFFD instead of failing; a
  // NUL, which PostgreSQL's text cannot hold (recording the attempt would fail, and the
  // delivery with it), is replaced the same way.
  return Array.from(bytes.toString("utf8").replaceAll("\u0000", "\uFFFD")).slice(0, EXCERPT_CHARS).join("");
}

/** A short, log-safe description of a network failure. */
function describeError(err: unknown): string {
  if (err instanceof ForbiddenUrlError) return `endpoint_url_forbidden: ${err.reason}`;
  if (err instanceof Timeout) return err.message;
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
      return "connection reset";
    case "ENOTFOUND":
      return "host not found";
    case "EAI_AGAIN":
      return "DNS lookup failed (EAI_AGAIN)";
    case "EHOSTUNREACH":
      return "host unreachable";
    case "ENETUNREACH":
      return "network unreachable";
    case "ETIMEDOUT":
      return "connection timed out";
    case "EPIPE":
      return "connection closed while sending";
  }
  const message = err instanceof Error ? err.message : String(err);
  const text = typeof code === "string" ? `${code}: ${message}` : message;
  return clipText(text, 200);
}

function outcomeOf(status: number): Pick<SendResult, "outcome" | "error"> {
  if (status >= 200 && status < 300) return { outcome: "delivered", error: null };
  if (status === 410) return { outcome: "gone", error: "HTTP 410" };
  if (status >= 300 && status < 400) return { outcome: "failed", error: `HTTP ${status} (redirects are not followed)` };
  return { outcome: "failed", error: `HTTP ${status}` };
}

/** POSTs `body` to `url` once; resolves with what happened. */
export async function sendWebhook(request: SendRequest): Promise<SendResult> {
  const { timeoutMs } = request;
  const maxBytes = request.maxResponseBytes ?? 64 * 1024;
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) throw new RangeError(`timeoutMs must be positive, got ${timeoutMs}`);
  if (!Number.isInteger(maxBytes) || maxBytes < 0) throw new RangeError(`maxResponseBytes must be a whole number, got ${maxBytes}`);
  const started = performance.now();
  const elapsed = (): number => Math.round(performance.now() - started);

  let url: URL;
  try {
    // IP-literal hosts never reach the lookup hook, so they are judged here.
    url = precheckEndpointUrl(request.url, request.allowPrivate);
  } catch (err) {
    if (!(err instanceof ForbiddenUrlError)) throw err;
    return { outcome: "failed", statusCode: null, durationMs: elapsed(), responseExcerpt: null, error: describeError(err) };
  }

  const body = Buffer.from(request.body, "utf8");
  const headers = { "user-agent": USER_AGENT, ...request.headers, "content-length": String(body.length) };
  const isHttps = url.protocol === "https:";
  const agent = agents[isHttps ? "https:" : "http:"][request.allowPrivate ? 1 : 0];
  const options = {
    method: "POST",
    headers,
    agent,
    lookup: guardedLookup({ allowPrivate: request.allowPrivate, ...(request.lookup ? { lookup: request.lookup } : {}) }),
  };

  return new Promise<SendResult>((resolve) => {
    let settled = false;
    let statusCode: number | null = null;
    const chunks: Buffer[] = [];
    let kept = 0;
    let received = 0;

    const finish = (result: Omit<SendResult, "durationMs" | "statusCode">): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, statusCode, durationMs: elapsed() });
    };
    const fail = (err: unknown): void => {
      finish({ outcome: "failed", responseExcerpt: statusCode === null ? null : excerptOf(chunks), error: describeError(err) });
    };
    const answered = (): void => {
      if (statusCode !== null) finish({ ...outcomeOf(statusCode), responseExcerpt: excerptOf(chunks) });
    };

    const onResponse = (res: http.IncomingMessage): void => {
      statusCode = res.statusCode ?? null;
      res.on("data", (chunk: Buffer) => {
        if (settled) return;
        received += chunk.length;
        if (kept < EXCERPT_BYTES) {
          const part = chunk.subarray(0, Math.min(EXCERPT_BYTES - kept, maxBytes - (received - chunk.length)));
          chunks.push(part);
          kept += part.length;
        }
        if (received >= maxBytes) {
          // Enough for the excerpt: no reason to let the receiver make us download more.
          answered();
          res.destroy();
        }
      });
      res.on("end", answered);
      // A receiver that drops the connection mid-body has still answered with its status.
      res.on("close", answered);
      res.on("error", () => {});
    };

    const req = (isHttps ? https : http).request(url, options, onResponse);
    const timer = setTimeout(() => {
      const timeout = new Timeout(timeoutMs);
      fail(timeout);
      req.destroy(timeout);
    }, timeoutMs);
    req.on("error", (err) => {
      if (err instanceof Timeout) return;
      fail(err);
    });
    // A 101 switches the connection to another protocol: a final answer, and not a 2xx.
    // Without a listener Node neither ends the request nor fails it, and the attempt waited
    // out the whole timeout, recorded as one.
    req.on("upgrade", (res: http.IncomingMessage, socket: Duplex) => {
      statusCode = res.statusCode ?? 101;
      socket.destroy();
      finish({ outcome: "failed", responseExcerpt: null, error: `HTTP ${statusCode} (switching protocols is not accepted)` });
    });
    req.end(body);
  });
}
