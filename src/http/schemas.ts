/**
 * The API's JSON shapes (PRODUCT.md §6), as zod schemas that also generate the OpenAPI
 * document, and the functions that turn rows into them.
 */
import { z } from "@hono/zod-openapi";
import { CANONICAL_STATUSES, canonicalStatus } from "../domain/statuses.ts";
import type { EventRow } from "../events/log.ts";
import type { RejectedRow } from "../ingest/rejected.ts";
import { PLACEMENT_STATES } from "../orders/json.ts";
import type { OrderJson } from "../orders/json.ts";

/** The first and last instants an API field takes: years 0001 to 9999 in UTC, as ISO 8601 writes them. */
const FIRST_INSTANT_MS = Date.parse("0001-01-01T00:00:00Z");
const LAST_INSTANT_MS = Date.parse("9999-12-31T23:59:59.999Z");

/** Is this time (ms since the epoch) one an API field may name? */
const isApiInstant = (ms: number) => Number.isFinite(ms) && ms >= FIRST_INSTANT_MS && ms <= LAST_INSTANT_MS;

/**
 * The same, for a time in microseconds since the epoch (a timeline cursor's, exact beyond
 * 2^53 as a bigint): up to the last microsecond of the last millisecond allowed.
 */
export const isApiInstantMicros = (us: bigint) => us >= BigInt(FIRST_INSTANT_MS) * 1000n && us <= BigInt(LAST_INSTANT_MS) * 1000n + 999n;

/**
 * An instant in a query or body: ISO 8601 with `Z` or an offset, between years 0001 and
 * 9999 once in UTC. The format alone lets year 0000 through, and an offset can carry
 * 9999-12-31 past the year's end; PostgreSQL refuses both, so they are a 400 here.
 */
export const instantField = () =>
  z.iso.datetime({ offset: true }).refine(
    (s) => {
      const ms = Date.parse(s);
      // Not a date at all: the format's own issue names it (one issue per field).
      return Number.isNaN(ms) || isApiInstant(ms);
    },
    { message: "must lie between years 0001 and 9999 (UTC)" },
  );

export const ErrorSchema = z
  .object({
    error: z.object({
      code: z.string().openapi({ example: "order_not_found" }),
      message: z.string(),
      request_id: z.string(),
      issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
    }),
  })
  .openapi("Error");


const RiderSchema = z
  .object({
    id: z.string().nullable(),
    name: z.string().nullable(),
    contact: z.string().nullable(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    location_at: z.string().nullable(),
  })
  .openapi("Rider");

export const OrderSchema = z
  .object({
    client_order_id: z.string().nullable(),
    svc_order_id: z.string().nullable(),
    store_code: z.string().nullable(),
    status: z.enum(CANONICAL_STATUSES).nullable(),
    provider_status: z.string().nullable(),
    status_at: z.string().nullable(),
    track_url: z.string().nullable(),
    awb_number: z.string().nullable(),
    pickup_otp: z.string().nullable(),
    rider: RiderSchema.nullable(),
    svc_order_ids: z.array(z.string()).openapi({
      description: "Every provider id seen for this order. Two or more: the provider created several orders for one client_order_id.",
    }),
    placement: z.object({
      state: z.enum(PLACEMENT_STATES).openapi({
        description: "unconfirmed: the provider may have created the order but its answer was lost; confirm or retry it (POST …/placement/confirm, …/placement/retry)",
      }),
      error: z.string().nullable(),
    }),
    event_count: z.number().int(),
    last_event_at: z.string().nullable(),
    created_at: z.string(),
    updated_at: z.string(),
  })
  // Documents the one shape orders/json.ts builds: this fails to compile if the two part.
  .openapi("Order") satisfies z.ZodType<OrderJson>;

export const EventSchema = z
  .object({
    id: z.string(),
    kind: z.enum(["status", "location"]),
    source: z.enum(["provider", "tracklane", "poll"]),
    status: z.enum(CANONICAL_STATUSES).nullable(),
    provider_status: z.string().nullable(),
    occurred_at: z.string(),
    received_at: z.string(),
    payload: z.record(z.string(), z.unknown()),
  })
  .openapi("Event");

export function eventJson(row: EventRow): z.infer<typeof EventSchema> {
  return {
    id: String(row.id),
    kind: row.kind === "location" ? "location" : "status",
    source: z.enum(["provider", "tracklane", "poll"]).catch("provider").parse(row.source),
    status: row.kind === "status" ? canonicalStatus(row.provider_status) : null,
    provider_status: row.provider_status,
    occurred_at: row.occurred_at.toISOString(),
    received_at: row.received_at.toISOString(),
    payload: z.record(z.string(), z.unknown()).catch({}).parse(row.payload),
  };
}

export const RejectedSchema = z
  .object({
    id: z.string(),
    received_at: z.string(),
    reason: z.string(),
    content_type: z.string().nullable(),
    body: z.string(),
    body_bytes: z.number().int(),
    truncated: z.boolean(),
  })
  .openapi("RejectedCallback");

export function rejectedJson(row: RejectedRow): z.infer<typeof RejectedSchema> {
  return {
    id: String(row.id),
    received_at: row.received_at.toISOString(),
    reason: row.reason,
    content_type: row.content_type,
    body: row.body,
    body_bytes: row.body_bytes,
    truncated: row.truncated,
  };
}
