/**
 * The list endpoints' paging (orders, an order's events, commands, rejected callbacks): a
 * `limit` and an opaque `cursor` in, a page of items and the next page's cursor out.
 */
import { z } from "@hono/zod-openapi";
import { ApiError } from "./errors.ts";

/**
 * The query fields of a list: `limit` (1 to `max`, default `fallback`) and `cursor`. The
 * limit is digits only: `1e2`, `0x10`, ` 5` or `+5` are refused, not read as some number.
 */
export function pageQuery(max: number, fallback: number) {
  return {
    limit: z
      .string()
      .regex(/^[0-9]+$/, `must be a whole number from 1 to ${max}`)
      .pipe(z.coerce.number<string>().int().min(1, `must be a whole number from 1 to ${max}`).max(max, `must be at most ${max}`))
      .default(fallback)
      .openapi({ type: "integer", minimum: 1, maximum: max, default: fallback, description: `page size, at most ${max}` }),
    cursor: z.string().max(200).optional(),
  };
}

/** A list's answer: a page of `item`s and the cursor of the next page (null: this is the last). */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), next_cursor: z.string().nullable() });
}

/**
 * Where the `cursor` parameter says the page starts (undefined: the first page). A cursor
 * this endpoint did not hand out is invalid_parameter. Cursors are base64url JSON, checked
 * against `schema` on the way back in.
 */
export function readCursor<T>(cursor: string | undefined, schema: z.ZodType<T>): T | undefined {
  if (cursor === undefined) return undefined;
  try {
    const parsed = schema.safeParse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
    if (parsed.success) return parsed.data;
  } catch {
    // Not base64url JSON: refused below like any other foreign cursor.
  }
  throw new ApiError("invalid_parameter", "cursor: not a cursor from this endpoint", { issues: [{ path: "cursor", message: "invalid cursor" }] });
}

/** A page as the API answers it: each row as JSON, and the next page's position (null: none) as a cursor. */
export function pageJson<R, J>(rows: readonly R[], toJson: (row: R) => J, next: object | null): { items: J[]; next_cursor: string | null } {
  return { items: rows.map(toJson), next_cursor: next === null ? null : Buffer.from(JSON.stringify(next)).toString("base64url") };
}
