/**
 * The API's JSON shapes (PRODUCT.md §6), as zod schemas that also generate the OpenAPI
 * document, and the functions that turn rows into them.
 */
import { z } from "@hono/zod-openapi";
import { CANONICAL_STATUSES, canonicalStatus } from "../domain/statuses.ts";
import type { EventRow, OrderRow, RejectedRow } from "../db/orders.ts";

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

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

export const PLACEMENT_STATES = ["pending", "placed", "unconfirmed", "failed", "external"] as const;

export const RiderSchema = z
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
  .openapi("Order");

export type OrderJson = z.infer<typeof OrderSchema>;

export function orderJson(row: OrderRow): OrderJson {
  const hasRider =
    row.riderId !== null || row.riderName !== null || row.riderContact !== null || row.riderLatitude !== null;
  return {
    client_order_id: row.clientOrderId,
    svc_order_id: row.svcOrderId,
    svc_order_ids: row.svcOrderIds.length > 0 ? row.svcOrderIds : row.svcOrderId === null ? [] : [row.svcOrderId],
    store_code: row.storeCode,
    status: canonicalStatus(row.status),
    provider_status: row.providerStatus,
    status_at: iso(row.statusAt),
    track_url: row.trackUrl,
    awb_number: row.awbNumber,
    pickup_otp: row.pickupOtp,
    rider: hasRider
      ? {
          id: row.riderId,
          name: row.riderName,
          contact: row.riderContact,
          latitude: row.riderLatitude,
          longitude: row.riderLongitude,
          location_at: iso(row.riderLocationAt),
        }
      : null,
    placement: {
      state: z.enum(PLACEMENT_STATES).catch("external").parse(row.placementState),
      error: row.placementError,
    },
    event_count: row.eventCount,
    last_event_at: iso(row.lastEventAt),
    created_at: row.createdAt.toISOString(),
    updated_at: row.updatedAt.toISOString(),
  };
}

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
    status: row.kind === "status" ? canonicalStatus(row.providerStatus) : null,
    provider_status: row.providerStatus,
    occurred_at: row.occurredAt.toISOString(),
    received_at: row.receivedAt.toISOString(),
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
    received_at: row.receivedAt.toISOString(),
    reason: row.reason,
    content_type: row.contentType,
    body: row.body,
    body_bytes: row.bodyBytes,
    truncated: row.truncated,
  };
}

/** Opaque page cursors: base64url JSON, validated on the way back in. */
export function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString("base64url");
}

export function decodeCursor<T>(cursor: string, schema: z.ZodType<T>): T | null {
  try {
    const parsed = schema.safeParse(JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

export const limitParam = (max: number, fallback: number) =>
  z.coerce.number().int().min(1).max(max).default(fallback).openapi({ description: `page size, at most ${max}` });
