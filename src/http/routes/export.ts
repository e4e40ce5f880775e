/**
 * `GET /v1/orders/export`: every matching order, streamed as NDJSON or CSV. The orders
 * are read a page at a time as the client takes them (a pull stream: the next page is
 * read only when the last one has been handed to the socket), so the whole export is
 * never in memory and a slow client slows the reads instead of filling the heap. Mounted
 * before the order routes: otherwise "export" would be read as a client_order_id.
 */
import { OpenAPIHono, z } from "@hono/zod-openapi";
import { createRoute } from "../route.ts";
import type { Sql } from "postgres";
import { exportPage, maxOrderId } from "../../orders/read.ts";
import type { ExportFilter, OrderRow } from "../../orders/read.ts";
import { CANONICAL_STATUSES } from "../../domain/statuses.ts";
import type { Logger } from "../../logger.ts";
import { ApiError } from "../errors.ts";
import { orderJson } from "../../orders/json.ts";
import type { OrderJson } from "../../orders/json.ts";
import { instantField } from "../schemas.ts";
import type { AppEnv } from "../types.ts";
import { validationHook } from "../validation.ts";
import { errors } from "./orders.ts";

/** Rows per read: big enough that a round trip is cheap per row, small enough to stay flat. */
export const EXPORT_PAGE_ROWS = 1000;

const EXPORT_FORMATS = ["ndjson", "csv"] as const;
type ExportFormat = (typeof EXPORT_FORMATS)[number];

const CONTENT_TYPES: Record<ExportFormat, string> = {
  ndjson: "application/x-ndjson",
  csv: "text/csv; charset=utf-8",
};

type Cell = string | number | null;

/** The order JSON flattened: rider_* and placement_* columns, svc_order_ids joined by ';'. */
const CSV_COLUMNS: readonly (readonly [string, (o: OrderJson) => Cell])[] = [
  ["client_order_id", (o) => o.client_order_id],
  ["svc_order_id", (o) => o.svc_order_id],
  ["svc_order_ids", (o) => o.svc_order_ids.join(";")],
  ["store_code", (o) => o.store_code],
  ["status", (o) => o.status],
  ["provider_status", (o) => o.provider_status],
  ["status_at", (o) => o.status_at],
  ["track_url", (o) => o.track_url],
  ["awb_number", (o) => o.awb_number],
  ["pickup_otp", (o) => o.pickup_otp],
  ["rider_id", (o) => o.rider?.id ?? null],
  ["rider_name", (o) => o.rider?.name ?? null],
  ["rider_contact", (o) => o.rider?.contact ?? null],
  ["rider_latitude", (o) => o.rider?.latitude ?? null],
  ["rider_longitude", (o) => o.rider?.longitude ?? null],
  ["rider_location_at", (o) => o.rider?.location_at ?? null],
  ["placement_state", (o) => o.placement.state],
  ["placement_error", (o) => o.placement.error],
  ["event_count", (o) => o.event_count],
  ["last_event_at", (o) => o.last_event_at],
  ["created_at", (o) => o.created_at],
  ["updated_at", (o) => o.updated_at],
];

/**
 * Text a spreadsheet would run as a formula (CSV injection): it starts with `=`, `+`, `-`,
 * `@`, a tab or a carriage return. Most text here comes from the provider's callbacks (a
 * rider's name, a status, a refusal's message): `=HYPERLINK(…)` there must reach whoever
 * opens the export as text. A plain number (`+911234567890`, `-12.5`) is no formula and
 * stays as it is.
 */
const FORMULA_START = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^[+-]?\d+(?:\.\d+)?$/;

/** `value`, with a `'` in front when a spreadsheet would take it for a formula (OWASP's advice). */
export function spreadsheetText(value: string): string {
  return FORMULA_START.test(value) && !PLAIN_NUMBER.test(value) ? `'${value}` : value;
}

/**
 * RFC 4180: a field holding a comma, a quote or a line break is quoted, quotes doubled.
 * Text that would start a formula is made plain text first (spreadsheetText).
 */
function csvField(value: Cell): string {
  if (value === null) return "";
  const s = typeof value === "string" ? spreadsheetText(value) : String(value);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

const csvLine = (cells: readonly Cell[]) => `${cells.map(csvField).join(",")}\r\n`;
const CSV_HEADER = csvLine(CSV_COLUMNS.map(([name]) => name));

function render(format: ExportFormat, rows: readonly OrderRow[]): string {
  let out = "";
  for (const row of rows) {
    const o = orderJson(row);
    out += format === "ndjson" ? `${JSON.stringify(o)}\n` : csvLine(CSV_COLUMNS.map(([, cell]) => cell(o)));
  }
  return out;
}

/**
 * The export as a byte stream. `first` is the first page, read before the response was
 * committed (so that a database error is still a proper 503); every later page is read
 * on demand. Stops reading once the client is gone (cancel, or the request's signal).
 */
function exportStream(
  sql: Sql,
  filter: ExportFilter,
  format: ExportFormat,
  start: { first: OrderRow[]; untilId: number },
  signal: AbortSignal,
  log: Logger,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let page = start.first;
  let gone = false;
  let rows = 0;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        const head = format === "csv" ? CSV_HEADER : "";
        if (head) controller.enqueue(encoder.encode(head));
      },
      async pull(controller) {
        try {
          if (page.length === 0) {
            controller.close();
            return;
          }
          const chunk = encoder.encode(render(format, page));
          rows += page.length;
          const last = page[page.length - 1]!.id;
          const full = page.length === EXPORT_PAGE_ROWS;
          controller.enqueue(chunk);
          // The next page is read now, while this one is on its way to the client.
          page = full && !gone && !signal.aborted ? await exportPage(sql, filter, { afterId: last, untilId: start.untilId, limit: EXPORT_PAGE_ROWS }) : [];
          if (!full) controller.close();
        } catch (err) {
          if (gone || signal.aborted) return;
          // Headers are gone already: cutting the connection is the only way left to say
          // the export is incomplete (a chunked body without its end).
          log.error({ err, rows }, "order export failed mid-stream");
          controller.error(err);
        }
      },
      cancel() {
        gone = true;
        log.info({ rows }, "order export: client went away");
      },
    },
    // One page ahead at most.
    { highWaterMark: 1 },
  );
}

const stamp = (d: Date) => d.toISOString().replace(/[-:]/g, "").replace(/\.\d+Z$/, "Z");

export function exportRoutes(deps: { sql: Sql; log: Logger }) {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook });
  const { sql, log } = deps;

  app.openapi(
    createRoute({
      method: "get",
      path: "/v1/orders/export",
      tags: ["orders"],
      summary: "Export orders as NDJSON or CSV (streamed)",
      description:
        "Every order created in [from, to) (and with the status, if given), oldest first, each as GET /v1/orders/{order} answers it. " +
        "ndjson (default): one JSON object per line. csv: RFC 4180, a header row, rider and placement flattened to rider_* and placement_* columns, " +
        "svc_order_ids joined by ';', a text field a spreadsheet would run as a formula (=, +, -, @, tab, CR first; not a plain number) prefixed with '. Orders created after the export started are not in it; rows are read page by page, not as one snapshot.",
      security: [{ Bearer: [] }],
      request: {
        query: z.strictObject({
          from: instantField().optional().openapi({ description: "created_at at or after", example: "2026-11-01T00:00:00Z" }),
          to: instantField().optional().openapi({ description: "created_at before", example: "2026-12-01T00:00:00Z" }),
          status: z.enum(CANONICAL_STATUSES).optional(),
          format: z.enum(EXPORT_FORMATS).default("ndjson"),
        }),
      },
      responses: {
        200: {
          description: "The orders, streamed",
          content: {
            "application/x-ndjson": { schema: z.string().openapi({ description: "one order JSON per line" }) },
            "text/csv": { schema: z.string().openapi({ description: "RFC 4180 with a header row" }) },
          },
        },
        400: errors[400],
        401: errors[401],
      },
    }),
    async (c) => {
      const q = c.req.valid("query");
      const filter: ExportFilter = {
        from: q.from === undefined ? undefined : new Date(q.from),
        to: q.to === undefined ? undefined : new Date(q.to),
        status: q.status,
      };
      if (filter.from && filter.to && filter.from > filter.to) {
        throw new ApiError("invalid_parameter", "to: must not be before from", { issues: [{ path: "to", message: "must not be before from" }] });
      }
      const untilId = await maxOrderId(sql);
      const first = await exportPage(sql, filter, { afterId: 0, untilId, limit: EXPORT_PAGE_ROWS });
      const body = exportStream(sql, filter, q.format, { first, untilId }, c.req.raw.signal, log);
      return c.body(body, 200, {
        "content-type": CONTENT_TYPES[q.format],
        "content-disposition": `attachment; filename="orders-${stamp(new Date())}.${q.format}"`,
        "cache-control": "no-store",
      });
    },
  );
  return app;
}
