import type { Context, MiddlewareHandler } from "hono";
import type { ZodError } from "zod";
import { MAX_DEPTH, findUnstorable } from "../domain/normalise.ts";
import type { Unstorable } from "../domain/normalise.ts";
import { ApiError, fromZodError } from "./errors.ts";

const UNSTORABLE_MESSAGES: Record<Unstorable["kind"], string> = {
  text: "contains a NUL character or an unpaired UTF-16 surrogate",
  key: "has a key containing a NUL character or an unpaired UTF-16 surrogate",
  depth: `nested deeper than ${MAX_DEPTH} levels`,
};

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
    // deep nesting overflows the stack of recursive code (hashing) further on. Nesting too
    // deep is named by its top-level field.
    const bad = findUnstorable(result.data);
    if (bad) {
      const field = bad.kind === "depth" ? bad.path.slice(0, 1) : bad.path;
      const path = field.length ? field.join(".") : where;
      const message = UNSTORABLE_MESSAGES[bad.kind];
      throw new ApiError(isBody ? "validation_failed" : "invalid_parameter", `invalid ${where}: ${path}: ${message}`, { issues: [{ path, message }] });
    }
    return;
  }
  if (!result.error) return;
  throw fromZodError(result.error, isBody ? "validation_failed" : "invalid_parameter", where);
}

const JSON_CONTENT_TYPE = /^application\/([\w.-]+\+)?json\s*(;|$)/i;

/**
 * For routes whose JSON body is optional: an empty body sent with a JSON Content-Type (curl
 * with `-H 'content-type: application/json'` and no data, and many clients' default) reads
 * as no body, `{}`, instead of 400 invalid_json. A body that is there is parsed as before.
 */
const emptyJsonIsNoBody: MiddlewareHandler = async (c, next) => {
  if (JSON_CONTENT_TYPE.test(c.req.header("content-type") ?? "") && (await c.req.text()).trim() === "") {
    // Hono parses JSON from the body text it caches (as a promise, whatever its type says).
    (c.req.bodyCache as { text?: Promise<string> }).text = Promise.resolve("{}");
  }
  await next();
};

/** Applies emptyJsonIsNoBody to a route given by its OpenAPI path (`/v1/orders/{order}/…`). */
export function optionalJsonBody(app: { use(path: string, handler: MiddlewareHandler): unknown }, openApiPath: string): void {
  app.use(openApiPath.replace(/\{(\w+)\}/g, ":$1"), emptyJsonIsNoBody);
}
