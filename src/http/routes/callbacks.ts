/**
 * The provider's callback receiver (PRODUCT.md §4). Order of work, cheapest refusal
 * first: secret (constant time) -> room in the ingest buffer (hold) -> size -> Content-Encoding (size again, decompressed) ->
 * text (UTF-8, or the charset it names: charset.ts) -> JSON -> normalise -> group-commit append -> 200. Nothing is acknowledged
 * before it is committed.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { Sql } from "postgres";
import { databaseBusyReason, isDatabaseUnavailable } from "../../db/client.ts";
import { normaliseCallback } from "../../domain/normalise.ts";
import type { RejectReason } from "../../domain/normalise.ts";
import { rotatingSecretMatcher } from "../../domain/secrets.ts";
import { OverloadedError } from "../../ingest/batcher.ts";
import { recordRejected } from "../../ingest/rejected.ts";
import type { Hold, Ingestor } from "../../ingest/batcher.ts";
import type { Logger } from "../../logger.ts";
import type { Metrics } from "../../metrics.ts";
import { decodeBody } from "../charset.ts";
import { decodeContent, SUPPORTED_ENCODINGS } from "../content-encoding.ts";
import { previousSecretNotice } from "../auth.ts";
import { ApiError } from "../errors.ts";
import type { AppEnv } from "../types.ts";

export const CALLBACK_MAX_BYTES = 256 * 1024;
/** Room first held for a body without a Content-Length (chunked); more is held as it streams in. */
const UNDECLARED_HOLD = 16 * 1024;

export interface CallbackDeps {
  secret: string;
  /** CALLBACK_SECRET_PREVIOUS: accepted too while the provider still sends to the old URL. */
  previousSecret?: string | undefined;
  sql: Sql;
  ingestor: Ingestor;
  log: Logger;
  metrics: Metrics;
  /** IANA zone of provider times without an offset (config.provider.timezone). */
  timeZone: string;
}

/**
 * Reads at most `max` bytes of the body; null when it is larger (nothing kept). With a
 * Content-Length, `declared` (every real callback has one, already checked against `max`),
 * Node's HTTP parser delivers exactly that many bytes, so the body is read in one piece
 * straight off the socket: on @hono/node-server this skips building a web Request and
 * ReadableStream per callback, which was 14% of the web process's CPU under load. Without
 * one (chunked), the body is streamed and cut off at `max`, and `claim` is told the size
 * read so far before each chunk is kept (it throws to refuse it).
 */
async function readBounded(c: Context, declared: number, max: number, claim: (size: number) => void): Promise<Uint8Array | null> {
  if (Number.isFinite(declared)) {
    return new Uint8Array(await c.req.arrayBuffer());
  }
  const body = c.req.raw.body;
  if (!body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > max) return null;
    claim(size);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * What a body is charged in the ingest buffer (maxPendingBytes): its size, plus 48 bytes
 * for each `{`, `[` and `,` (about one per JSON value, more when strings hold them). Parsed,
 * a value costs far more than its bytes: a 256 KiB body of `[{},{},…]` is 87,000 objects,
 * some 5 MB of heap, and twenty of them buffered at their size ran a web process under
 * --max-old-space-size=96 out of memory.
 */
function bufferWeight(raw: Uint8Array): number {
  let values = 0;
  for (let i = 0; i < raw.length; i++) {
    const b = raw[i];
    if (b === 0x2c || b === 0x7b || b === 0x5b) values++;
  }
  return raw.byteLength + values * 48;
}

// Decoding holds no state between calls (no `stream` option): one serves all.
const lenientUtf8 = new TextDecoder("utf-8", { fatal: false });

export function callbackRoutes(deps: CallbackDeps) {
  const app = new Hono<AppEnv>();
  const { metrics } = deps;
  const secretMatches = rotatingSecretMatcher(deps.secret, deps.previousSecret);
  const previousUsed = previousSecretNotice(deps.log, metrics, "CALLBACK_SECRET_PREVIOUS", "the provider still sends callbacks to the old callback URL");

  /**
   * Records the refused callback and throws its 4xx. `raw` is the body as it was read, after
   * any Content-Encoding was undone (the JSON at fault is what an operator needs to see); one
   * whose coding is unknown or corrupt is kept as it arrived.
   */
  const reject = async (c: Context, reason: RejectReason | "unsupported_media_type", message: string, raw: Uint8Array, decodedText?: string) => {
    // As read (in the charset it named), when it could be: a body in ISO-8859-1 kept as
    // UTF-8 would show U+FFFD for each accented letter.
    const text = (decodedText ?? lenientUtf8.decode(raw)).replaceAll("\u0000", "\uFFFD");
    try {
      await recordRejected(deps.sql, { reason, contentType: c.req.header("content-type") ?? null, text, bytes: raw.byteLength });
    } catch (err) {
      // Database down or busy: 503 like any callback then (PRODUCT.md §4), not a 4xx
      // without its record. The sender's retry finds the database back and records it.
      if (isDatabaseUnavailable(err) || databaseBusyReason(err) !== null) {
        metrics.callbacks.inc({ result: "unavailable" });
        throw err;
      }
      // Anything else: the sender gets its 4xx, as a retry would be refused again.
      deps.log.error({ err, reason }, "could not record rejected callback");
    }
    metrics.callbacks.inc({ result: `rejected_${reason}` });
    throw new ApiError(reason, message);
  };

  const tooLarge = (how: string) => {
    metrics.callbacks.inc({ result: "too_large" });
    return new ApiError("payload_too_large", `callback body is larger than ${CALLBACK_MAX_BYTES} bytes${how}`);
  };
  const overloaded = () => new ApiError("overloaded", "too many callbacks in flight; retry shortly", { headers: { "retry-after": "1" } });

  const receive = (location: boolean) => async (c: Context<AppEnv>) => {
    const given = c.req.param("secret") ?? c.req.header("x-callback-secret") ?? "";
    const matched = secretMatches(given);
    if (matched === null) {
      metrics.callbacks.inc({ result: "unauthorized" });
      throw new ApiError("unauthorized", "wrong or missing callback secret");
    }
    if (matched === "previous") previousUsed();
    // The body's room in the ingest buffer is held before it is read (batcher.ts hold): a
    // burst of large bodies is refused at once rather than read, decoded and parsed all
    // together. Without a Content-Length, a first slice, and more as the body streams in; a
    // compressed one, the most a body may be, as its few bytes may inflate to that much
    // before it is parsed.
    const header = c.req.header("content-length");
    const declared = header === undefined ? NaN : Number(header);
    if (Number.isFinite(declared) && declared > CALLBACK_MAX_BYTES) throw tooLarge("");
    const coding = c.req.header("content-encoding")?.trim().toLowerCase() ?? "";
    const plain = coding === "" || coding === "identity";
    const held = !plain ? CALLBACK_MAX_BYTES : Number.isFinite(declared) ? declared : UNDECLARED_HOLD;
    const hold = deps.ingestor.hold(held);
    if (hold === null) {
      metrics.callbacks.inc({ result: "unavailable" });
      throw overloaded();
    }
    try {
      return await accept(c, location, declared, hold, held);
    } finally {
      hold.release();
    }
  };

  const accept = async (c: Context<AppEnv>, location: boolean, declared: number, hold: Hold, initiallyHeld: number) => {
    let held = initiallyHeld;
    const received = await readBounded(c, declared, CALLBACK_MAX_BYTES, (size) => {
      if (size <= held) return;
      if (!hold.grow(size - held)) {
        metrics.callbacks.inc({ result: "unavailable" });
        throw overloaded();
      }
      held = size;
    });
    if (received === null) throw tooLarge("");
    // The limit holds for the body once decompressed too: a body of a few KiB can inflate
    // to gigabytes, and inflating stops at the limit. Compressed, a callback is stored as it
    // would have been sent plain (the same event, the same dedupe key).
    const decoded = await decodeContent(received, c.req.header("content-encoding"), CALLBACK_MAX_BYTES);
    if (!decoded.ok) {
      switch (decoded.problem) {
        case "too_large":
          throw tooLarge(" once decompressed");
        case "unsupported":
          return reject(c, "unsupported_media_type", `unsupported Content-Encoding "${decoded.encoding}": send the body uncompressed or as ${SUPPORTED_ENCODINGS.join(", ")}`, received);
        case "corrupt":
          return reject(c, "invalid_json", `body is not valid ${decoded.encoding} as its Content-Encoding says: ${decoded.message}`, received);
      }
    }
    const raw = decoded.body;
    const decodedText = decodeBody(raw, c.req.header("content-type"));
    if (!decodedText.ok) return reject(c, "invalid_json", decodedText.message, raw);
    const text = decodedText.text;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (err) {
      return reject(c, "invalid_json", `body is not JSON: ${(err as Error).message}`, raw, text);
    }
    const normalised = normaliseCallback(body, { forceLocation: location, receivedAt: new Date(), timeZone: deps.timeZone });
    if (!normalised.ok) return reject(c, normalised.reason, normalised.message, raw, text);
    try {
      hold.release(); // submit counts the body from here
      const result = await deps.ingestor.submit({ event: normalised.event, payload: body as Record<string, unknown> }, bufferWeight(raw));
      metrics.callbacks.inc({ result: result.duplicate ? "duplicate" : "stored" });
      return c.json({ ok: true, event_id: result.eventId, duplicate: result.duplicate });
    } catch (err) {
      metrics.callbacks.inc({ result: "unavailable" });
      if (err instanceof OverloadedError) throw overloaded();
      throw err; // onError maps database outages to 503
    }
  };

  // Full paths (the app is mounted at "/"), each with a trailing slash too: the provider's
  // own paths end in one, and a callback URL registered so must not lose every callback to
  // a 404 (the real provider does not retry).
  for (const method of ["POST", "PUT"] as const) {
    for (const slash of ["", "/"]) {
      app.on(method, `/callbacks${slash}`, receive(false));
      app.on(method, `/callbacks/location${slash}`, receive(true));
      app.on(method, `/callbacks/:secret/location${slash}`, receive(true));
      app.on(method, `/callbacks/:secret${slash}`, receive(false));
    }
  }
  return app;
}
