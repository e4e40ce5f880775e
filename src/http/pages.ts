/**
 * The list endpoints' paging (orders, an order's events, commands, rejected callbacks,
 * notification messages): a `limit` and an opaque `cursor` in, a page of items and the
 * next page's cursor out.
 */
import { createHash } from "node:crypto";
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
    cursor: z.string().max(200).optional().openapi({ description: "next_cursor of the previous page, with the same filters" }),
  };
}

/** A list's answer: a page of `item`s and the cursor of the next page (null: this is the last). */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), next_cursor: z.string().nullable() });
}

/** A list's filters as they shape its pages (the values given; absent ones left out). */
export type PageFilters = Record<string, string | number | undefined>;

/**
 * The filters a cursor was handed out under, as a short digest (absent: no filter). A
 * cursor pages through one filtered list: under other filters its position means nothing.
 */
function filterKey(filters: PageFilters | undefined): string | undefined {
  const given = Object.entries(filters ?? {})
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (given.length === 0) return undefined;
  return createHash("sha256").update(JSON.stringify(given)).digest("base64url").slice(0, 16);
}

const cursorError = (message: string) => new ApiError("invalid_parameter", `cursor: ${message}`, { issues: [{ path: "cursor", message }] });

/**
 * Where the `cursor` parameter says the page starts (undefined: the first page). Cursors
 * are base64url JSON: the position, checked against `schema` (a strict object: a cursor
 * this endpoint did not hand out, or one altered, is invalid_parameter), and `f`, the
 * filters it was handed out under (a cursor sent with other filters is invalid_parameter
 * too, saying so).
 */
export function readCursor<T>(cursor: string | undefined, schema: z.ZodType<T>, filters?: PageFilters): T | undefined {
  if (cursor === undefined) return undefined;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    decoded = undefined;
  }
  if (typeof decoded !== "object" || decoded === null || Array.isArray(decoded)) throw cursorError("not a cursor from this endpoint");
  const { f, ...position } = decoded as Record<string, unknown>;
  const parsed = schema.safeParse(position);
  if (!parsed.success || (f !== undefined && typeof f !== "string")) throw cursorError("not a cursor from this endpoint");
  if (f !== filterKey(filters)) {
    throw cursorError("handed out for other filters: send the filters of the page it came with, or start again without a cursor");
  }
  return parsed.data;
}

/**
 * A page as the API answers it: each row as JSON, and the next page's position (null:
 * none) as a cursor, bound to the `filters` of this request.
 */
export function pageJson<R, J>(rows: readonly R[], toJson: (row: R) => J, next: object | null, filters?: PageFilters): { items: J[]; next_cursor: string | null } {
  if (next === null) return { items: rows.map(toJson), next_cursor: null };
  const f = filterKey(filters);
  const cursor = f === undefined ? next : { ...next, f };
  return { items: rows.map(toJson), next_cursor: Buffer.from(JSON.stringify(cursor)).toString("base64url") };
}
