import type { Context } from "hono";
import type { z } from "zod";
import type { EmulatorEnv } from "./types.ts";

/**
 * Error answers in the provider's shapes (PRODUCT.md §3): `{message: "Failure", errors}`
 * naming fields, or `{detail}` for auth and unknown resources.
 */

export type FieldErrors = Record<string, string[]>;

export function failure(c: Context<EmulatorEnv>, errors: FieldErrors, status: 400 | 200 = 400, extra: Record<string, unknown> = {}) {
  return c.json({ message: "Failure", errors, ...extra }, status);
}

export function notFound(c: Context<EmulatorEnv>, what = "Not found.") {
  return c.json({ detail: what }, 404);
}

export function issuesToErrors(issues: readonly z.core.$ZodIssue[]): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of issues) {
    // Strict objects report unknown keys on the object itself: name each key instead.
    if (issue.code === "unrecognized_keys") {
      const prefix = issue.path.map(String).join(".");
      for (const k of issue.keys) (errors[prefix ? `${prefix}.${k}` : k] ??= []).push("unknown field");
      continue;
    }
    const key = issue.path.map(String).join(".") || "non_field_errors";
    (errors[key] ??= []).push(issue.message);
  }
  return errors;
}

/**
 * Reads and validates a JSON body. An empty body counts as `{}` when `emptyAsObject`
 * (endpoints whose body is optional), else as missing.
 */
export async function readBody<S extends z.ZodType>(
  c: Context<EmulatorEnv>,
  schema: S,
  { emptyAsObject = false } = {},
): Promise<{ ok: true; data: z.output<S> } | { ok: false; response: Response }> {
  const text = await c.req.text();
  let value: unknown;
  if (text.trim() === "") {
    value = emptyAsObject ? {} : undefined;
  } else {
    try {
      value = JSON.parse(text);
    } catch {
      return { ok: false, response: failure(c, { non_field_errors: ["request body is not valid JSON"] }) };
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) return { ok: false, response: failure(c, issuesToErrors(parsed.error.issues)) };
  return { ok: true, data: parsed.data };
}
