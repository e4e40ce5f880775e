import type { Context } from "hono";
import type { ZodError } from "zod";
import { MAX_DEPTH } from "../domain/normalise.ts";
import { ApiError, fromZodError } from "./errors.ts";

/**
 * Every zod-openapi route's validation failure becomes the one error shape: a bad body
 * is 422 validation_failed, a bad path or query parameter 400 invalid_parameter; both
 * name each bad field. Input the schema accepts but PostgreSQL cannot store is refused
 * the same way.
 */
export function validationHook(result: { success: boolean; data?: unknown; error?: ZodError; target?: string }, _c: Context): void {
  const target = result.target ?? "body";
  const isBody = target === "json" || target === "form";
  const where = isBody ? "body" : target === "param" ? "path" : target;
  if (result.success) {
    // Valid by the schema, yet unusable: PostgreSQL refuses such text (a 500 otherwise), and
    // deep nesting overflows the stack of recursive code (hashing) further on.
    const bad = findUnstorable(result.data);
    if (bad) {
      const path = bad.path.length ? bad.path.join(".") : where;
      throw new ApiError(isBody ? "validation_failed" : "invalid_parameter", `invalid ${where}: ${path}: ${bad.message}`, { issues: [{ path, message: bad.message }] });
    }
    return;
  }
  if (!result.error) return;
  throw fromZodError(result.error, isBody ? "validation_failed" : "invalid_parameter", where);
}

const unstorable = (s: string) => s.includes("\u0000") || !s.isWellFormed();

/**
 * The first string or key holding a NUL or an unpaired UTF-16 surrogate, or the top-level
 * field of anything nested deeper than MAX_DEPTH (the callback receiver's limit too).
 * Iterative, so hostile nesting cannot blow the stack here either.
 */
export function findUnstorable(value: unknown): { path: string[]; message: string } | null {
  const stack: [unknown, string[]][] = [[value, []]];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === "string") {
      if (unstorable(v)) return { path, message: "contains a NUL character or an unpaired UTF-16 surrogate" };
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (path.length >= MAX_DEPTH) return { path: path.slice(0, 1), message: `nested deeper than ${MAX_DEPTH} levels` };
    for (const [k, child] of Object.entries(v)) {
      if (unstorable(k)) return { path, message: "has a key containing a NUL character or an unpaired UTF-16 surrogate" };
      stack.push([child, [...path, k]]);
    }
  }
  return null;
}
