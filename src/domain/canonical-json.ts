import { hash } from "node:crypto";

/**
 * JSON with object keys sorted at every depth, so that two bodies with the same content
 * serialise identically whatever order their keys came in.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  const entries = Object.keys(value)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
  return `{${entries.join(",")}}`;
}

export function sha256Hex(text: string): string {
  return hash("sha256", text, "hex");
}
