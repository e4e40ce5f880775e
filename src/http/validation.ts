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
export function validationHook(result: { success: boolean; data?: unknown; error?: ZodError; target?: string }, c: Context): void {
  const target = result.target ?? "body";
  const isBody = target === "json" || target === "form";
  const where = isBody ? "body" : target === "param" ? "path" : target;
  if (target === "param" || target === "query") {
    const names = target === "param" ? badlyEncodedParams(c) : badlyEncodedQuery(c);
    if (names.length > 0) {
      const issues = names.map((path) => ({ path, message: BAD_ENCODING }));
      throw new ApiError("invalid_parameter", `invalid ${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, { issues });
    }
  }
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
  const error = fromZodError(result.error, isBody ? "validation_failed" : "invalid_parameter", where);
  throw target === "query" ? sayingRepeated(error, c) : error;
}

const BAD_ENCODING = "not valid percent-encoded UTF-8 (encode each byte of its UTF-8 as %XX, and a % itself as %25)";

const decodes = (raw: string): boolean => {
  try {
    decodeURIComponent(raw);
    return true;
  } catch {
    return false;
  }
};

/**
 * Path parameters whose segment of the URL is not percent-encoded UTF-8 (`%ZZ`, a cut-off
 * `%E0%A4`, an encoded lone surrogate). Hono hands such a segment on undecoded, or decoded
 * in the parts that decode (`%E0%A4%95%ZZ` as "क%ZZ"), so it was looked up as such
 * (`/v1/orders/%E0%A4` answered 404 for an order "%E0%A4"). A parameter's segment is the
 * one at its place in the route's path.
 */
function badlyEncodedParams(c: Context): string[] {
  const segments = new URL(c.req.url).pathname.split("/");
  if (segments.every(decodes)) return [];
  const route = c.req.routePath.split("/");
  const names: string[] = [];
  route.forEach((part, i) => {
    const segment = segments[i];
    if (part.startsWith(":") && segment !== undefined && !decodes(segment)) names.push(part.slice(1).replace(/[{?].*$/, ""));
  });
  // A route whose path does not line up with the URL's (none such takes parameters today) names the path.
  return names.length > 0 || route.length === segments.length ? names : ["path"];
}

/** Query parameters whose name or value is not percent-encoded UTF-8 (Hono keeps them undecoded: `?store_code=%ZZ` filtered on "%ZZ"). */
function badlyEncodedQuery(c: Context): string[] {
  const search = new URL(c.req.url).search.slice(1);
  if (!search.includes("%")) return [];
  const names = new Set<string>();
  for (const pair of search.split("&")) {
    const eq = pair.indexOf("=");
    const [name, value] = (eq < 0 ? [pair, ""] : [pair.slice(0, eq), pair.slice(eq + 1)]).map((part) => part.replaceAll("+", " ")) as [string, string];
    if (!decodes(name) || !decodes(value)) names.add(decodes(name) ? decodeURIComponent(name) : name);
  }
  return [...names];
}

const REPEATED = "given more than once; send it once";

/**
 * A known parameter given twice (`?status=A&status=B`) reaches the schema as an array, and
 * zod's issue reads as if the value were wrong ("expected one of …", "received array"):
 * such an issue is told as what it is.
 */
function sayingRepeated(error: ApiError, c: Context): ApiError {
  const repeated = new Set(Object.entries(c.req.queries()).filter(([, values]) => values.length > 1).map(([name]) => name));
  if (repeated.size === 0 || !error.issues) return error;
  const issues = error.issues.map((i) => (repeated.has(i.path) && i.message !== "unknown parameter" ? { path: i.path, message: REPEATED } : i));
  return new ApiError(error.code, `invalid query: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, { issues });
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
