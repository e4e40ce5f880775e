import { hash } from "node:crypto";

/** Only text with a non-ASCII character can change under NFC; ASCII (most of it) skips the work. */
const NON_ASCII = /\P{ASCII}/u;
const nfc = (s: string): string => (NON_ASCII.test(s) ? s.normalize("NFC") : s);
const same = (s: string): string => s;

/**
 * JSON with object keys sorted at every depth, so that two bodies with the same content
 * serialise identically whatever order their keys came in. With `nfc`, every string and
 * key is put in Unicode Normalization Form C first, so that canonically equivalent text
 * (a precomposed "é" or "e" + U+0301; Devanagari nukta forms) serialises identically too.
 */
export function canonicalJson(value: unknown, options: { nfc?: boolean } = {}): string {
  return write(value, options.nfc === true ? nfc : same);
}

function write(value: unknown, text: (s: string) => string): string {
  if (typeof value === "string") return JSON.stringify(text(value));
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map((v) => write(v, text)).join(",")}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  // Keys are sorted as they will be written: in NFC when any is not ASCII (the common,
  // ASCII case sorts the keys themselves, as before).
  if (text === same || !keys.some((k) => NON_ASCII.test(k))) {
    return `{${keys
      .sort()
      .map((k) => `${JSON.stringify(k)}:${write(record[k], text)}`)
      .join(",")}}`;
  }
  const entries = keys
    .map((k) => [text(k), k] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, k]) => `${JSON.stringify(key)}:${write(record[k], text)}`);
  return `{${entries.join(",")}}`;
}

export function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}
