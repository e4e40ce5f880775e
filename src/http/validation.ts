import type { Context } from "hono";
import type { ZodError } from "zod";
import { fromZodError } from "./errors.ts";

/**
 * Every zod-openapi route's validation failure becomes the one error shape: a bad body
 * is 422 validation_failed, a bad path or query parameter 400 invalid_parameter; both
 * name each bad field.
 */
export function validationHook(result: { success: boolean; error?: ZodError; target?: string }, _c: Context): void {
  if (result.success || !result.error) return;
  const target = result.target ?? "body";
  if (target === "json" || target === "form") throw fromZodError(result.error, "validation_failed", "body");
  throw fromZodError(result.error, "invalid_parameter", target === "param" ? "path" : target);
}
