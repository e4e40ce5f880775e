/**
 * Bodies as text. JSON travels in UTF-8 (RFC 8259 §8.1), and that is what is read first,
 * strictly: invalid bytes are refused, never turned into U+FFFD (a name would reach the
 * provider, or the event log, with its letters lost and nobody told). A sender that says
 * what else it sends is read in that: a UTF-16 body (its byte-order mark, or a `charset`
 * of utf-16*), or a body that is not UTF-8 whose `charset` names an encoding the WHATWG
 * Encoding Standard knows (iso-8859-1, windows-1252, shift_jis…). A body that is valid
 * UTF-8 is read as UTF-8 whatever other label it has (a utf-16 one is always obeyed):
 * servers that label everything ISO-8859-1 while sending UTF-8 are common, and reading
 * their bytes as Latin-1 would store mojibake ("à¤•" for "क"). A UTF-8 byte-order mark
 * is skipped.
 */
import { TextDecoder } from "node:util";
import type { MiddlewareHandler } from "hono";
import { headOf } from "../domain/text.ts";
import { ApiError } from "./errors.ts";

export type DecodedText = { ok: true; text: string } | { ok: false; message: string };

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The `charset` parameter of a Content-Type, lower-cased and unquoted; null when there is none. */
function charsetOf(contentType: string | null | undefined): string | null {
  const match = /;\s*charset\s*=\s*("?)([^";\s]*)\1/i.exec(contentType ?? "");
  return match?.[2] ? match[2].toLowerCase() : null;
}

/** A decoder for `label` (fatal on invalid bytes); null when the Encoding Standard does not know it. */
function decoderFor(label: string): TextDecoder | null {
  try {
    return new TextDecoder(label, { fatal: true });
  } catch {
    return null;
  }
}

function decodeWith(decoder: TextDecoder, bytes: Uint8Array, name: string): DecodedText {
  try {
    return { ok: true, text: decoder.decode(bytes) };
  } catch {
    return { ok: false, message: `body is not valid ${name}` };
  }
}

/** `bytes` as text, as the module comment says; `contentType` is the request's header. */
export function decodeBody(bytes: Uint8Array, contentType: string | null | undefined): DecodedText {
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return decodeWith(new TextDecoder("utf-16le", { fatal: true }), bytes, "UTF-16LE");
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return decodeWith(new TextDecoder("utf-16be", { fatal: true }), bytes, "UTF-16BE");
  const label = charsetOf(contentType);
  const declared = label === null ? null : decoderFor(label);
  if (declared !== null && declared.encoding.startsWith("utf-16")) return decodeWith(declared, bytes, declared.encoding.toUpperCase());
  const asUtf8 = decodeWith(utf8, bytes, "UTF-8");
  if (asUtf8.ok || label === null || declared?.encoding === "utf-8") return asUtf8;
  if (declared === null) return { ok: false, message: `body is not valid UTF-8, and its charset "${headOf(label, 40)}" is not one tracklane can read` };
  return decodeWith(declared, bytes, `${declared.encoding} as its charset says`);
}

const JSON_CONTENT_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

/**
 * The /v1 API's JSON bodies read as decodeBody reads a callback's. Hono reads a body as
 * UTF-8 with U+FFFD for what is not, so a customer name sent in ISO-8859-1, or cut in the
 * middle of a character, reached the provider with letters replaced, and a 202.
 */
export const decodedRequestText: MiddlewareHandler = async (c, next) => {
  const type = c.req.header("content-type");
  if (c.req.raw.body === null || !JSON_CONTENT_TYPE.test(type ?? "")) return next();
  const decoded = decodeBody(new Uint8Array(await c.req.arrayBuffer()), type);
  if (!decoded.ok) throw new ApiError("invalid_json", `request ${decoded.message}`);
  // Hono parses JSON from the body text it caches (as a promise, whatever its type says).
  (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve(decoded.text);
  await next();
};
