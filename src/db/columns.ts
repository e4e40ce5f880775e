/**
 * Rows sent as column arrays (zipped server-side by `unnest`): how the set-based writes
 * pass many rows in one parameter per column. postgres.js quotes and escapes every element
 * of an array parameter; the helpers here are for what that does not cover, or covers at
 * a cost worth avoiding.
 */

/**
 * A column of `rows` as an array parameter: `${column((r) => r.x)}::text[]`. postgres.js
 * sends a null element as NULL (and quotes every other, "NULL" included); its parameter
 * types just do not say so, hence the cast.
 */
export function columnOf<R>(rows: readonly R[]): (f: (row: R) => string | number | null) => string[] {
  return (f) => rows.map(f) as string[];
}

/**
 * JSON texts as one text, a line each, for `string_to_array($1::text, E'\n')`: no element
 * needs array escaping (every quote of a JSON text would be escaped), and JSON.stringify
 * escapes every control character, so no JSON text holds a raw newline. A text that does
 * is refused, not split.
 */
export function jsonLines(json: readonly string[]): string {
  for (const j of json) if (j.includes("\n")) throw new Error("a JSON text to send holds a raw newline: not JSON.stringify's output");
  return json.join("\n");
}

/**
 * A text[] literal of these strings (each quoted, quotes and backslashes escaped): one
 * element of a text[] parameter, so that rows' lists of different lengths travel in one
 * array (unnest takes no ragged arrays) and are cast back per row.
 */
export function arrayLiteral(items: readonly string[]): string {
  return `{${items.map((s) => `"${s.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`).join(",")}}`;
}
