/**
 * Request bodies sent with a Content-Encoding (RFC 9110 §8.4): gzip, deflate and br are
 * undone, with the size limit applied to what comes out, so a small compressed body
 * cannot inflate into a large one (a decompression bomb): inflating stops as soon as the
 * output passes the limit.
 */
import { promisify } from "node:util";
import { brotliDecompress, gunzip, inflate } from "node:zlib";
import type { ZlibOptions } from "node:zlib";
import type { MiddlewareHandler } from "hono";
import { ApiError } from "./errors.ts";

type Inflate = (body: Uint8Array, options: ZlibOptions) => Promise<Buffer>;

// `deflate` is the zlib format (RFC 1950); `x-gzip` is gzip's old name, which RFC 9110
// asks recipients to take as gzip.
const DECODERS: Record<string, { name: string; inflate: Inflate }> = {
  gzip: { name: "gzip", inflate: promisify(gunzip) as Inflate },
  "x-gzip": { name: "gzip", inflate: promisify(gunzip) as Inflate },
  deflate: { name: "deflate", inflate: promisify(inflate) as Inflate },
  br: { name: "br", inflate: promisify(brotliDecompress) as Inflate },
};

export const SUPPORTED_ENCODINGS = ["gzip", "deflate", "br"] as const;

export type Decoded =
  | { ok: true; body: Uint8Array }
  /** More than `max` bytes once decompressed (nothing past the limit was inflated). */
  | { ok: false; problem: "too_large" }
  /** A coding other than identity, gzip, deflate or br (several codings included). */
  | { ok: false; problem: "unsupported"; encoding: string }
  /** The body is not a valid stream of its coding (corrupt or cut short). */
  | { ok: false; problem: "corrupt"; encoding: string; message: string };

/**
 * `body` decoded as `header` (the Content-Encoding) says; no header, an empty one or
 * `identity` leaves it as it is. At most `max` bytes are produced.
 */
export async function decodeContent(body: Uint8Array, header: string | undefined, max: number): Promise<Decoded> {
  const encoding = header?.trim().toLowerCase() ?? "";
  if (encoding === "" || encoding === "identity") return { ok: true, body };
  const decoder = DECODERS[encoding];
  if (!decoder) return { ok: false, problem: "unsupported", encoding: header!.trim().slice(0, 100) };
  try {
    return { ok: true, body: await decoder.inflate(body, { maxOutputLength: max }) };
  } catch (err) {
    if ((err as { code?: unknown }).code === "ERR_BUFFER_TOO_LARGE") return { ok: false, problem: "too_large" };
    return { ok: false, problem: "corrupt", encoding: decoder.name, message: (err as Error).message };
  }
}

/**
 * The /v1 API's bodies, decoded as the callbacks' are: a client that compresses what it
 * sends (some HTTP libraries do when asked, or a gateway in front) gets the same answer as
 * one that sends it plain, not a 400 `invalid_json` for bytes never meant to be read as
 * JSON. `max` (the API's body limit) holds for the body decompressed, as for what
 * travels. After this, the request is a plain one: no Content-Encoding, its body decoded.
 */
export function decodedRequestBody(max: number): MiddlewareHandler {
  return async (c, next) => {
    const header = c.req.header("content-encoding");
    if (c.req.raw.body === null || header === undefined) return next();
    const decoded = await decodeContent(new Uint8Array(await c.req.arrayBuffer()), header, max);
    if (!decoded.ok) {
      switch (decoded.problem) {
        case "too_large":
          throw new ApiError("payload_too_large", `request body is larger than ${max} bytes once decompressed`);
        case "unsupported":
          throw new ApiError("unsupported_media_type", `unsupported Content-Encoding "${decoded.encoding}": send the body uncompressed or as ${SUPPORTED_ENCODINGS.join(", ")}`);
        case "corrupt":
          throw new ApiError("invalid_json", `request body is not valid ${decoded.encoding} as its Content-Encoding says: ${decoded.message}`);
      }
    }
    const headers = new Headers(c.req.raw.headers);
    headers.delete("content-encoding");
    headers.delete("content-length");
    c.req.raw = new Request(c.req.raw.url, { method: c.req.raw.method, headers, body: decoded.body, signal: c.req.raw.signal });
    c.req.bodyCache = {};
    await next();
  };
}
