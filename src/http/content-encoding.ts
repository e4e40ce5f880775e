/**
 * Request bodies sent with a Content-Encoding (RFC 9110 §8.4): gzip, deflate and br are
 * undone, with the size limit applied to what comes out, so a small compressed body
 * cannot inflate into a large one (a decompression bomb): inflating stops as soon as the
 * output passes the limit.
 */
import { promisify } from "node:util";
import { brotliDecompress, gunzip, inflate } from "node:zlib";
import type { ZlibOptions } from "node:zlib";

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
