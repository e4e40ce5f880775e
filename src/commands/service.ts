/**
 * Order commands: what the merchant asks tracklane to tell the provider. Each is
 * recorded (commands table) and queued (graphile-worker) in one transaction; the
 * command__execute task carries it out. Validation and state checks happen here, before
 * any provider call.
 */
import type { Sql, TransactionSql } from "postgres";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import { dedupeKey } from "../domain/normalise.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { STATUS_RANK, canonicalStatus, isTerminal } from "../domain/statuses.ts";
import { appendEvents } from "../ingest/append.ts";
import { pickupOtp } from "../provider/schemas.ts";
import type { PlaceOrderBody } from "../provider/schemas.ts";
import { ApiError } from "../http/errors.ts";

export const COMMAND_KINDS = ["place", "edit", "cancel", "dispatch_ready", "stop_reattempt"] as const;
export type CommandKind = (typeof COMMAND_KINDS)[number];

export interface OrderState {
  id: number;
  client_order_id: string | null;
  svc_order_id: string | null;
  status: string | null;
  placement_state: string;
}

/** Commands of one order run one at a time, in order: a cancel waits for its place. */
export const orderQueue = (orderId: number) => `order:${orderId}`;

export async function enqueueCommand(tx: TransactionSql | Sql, commandId: number, orderId: number, runAt?: Date): Promise<void> {
  await tx`
    select graphile_worker.add_job('command__execute', json_build_object('command_id', ${commandId}::bigint),
      queue_name => ${orderQueue(orderId)}, job_key => ${`command:${commandId}`},
      run_at => coalesce(${runAt?.toISOString() ?? null}::timestamptz, now()))`;
}

async function insertCommand(tx: TransactionSql, orderId: number, kind: CommandKind, request: JsonObject): Promise<number> {
  const [row] = await tx<{ id: string }[]>`
    insert into commands (order_id, kind, request, request_hash)
    values (${orderId}, ${kind}, ${JSON.stringify(request)}::text::jsonb, ${sha256Hex(canonicalJson(request))})
    returning id::text`;
  const id = Number(row!.id);
  await enqueueCommand(tx, id, orderId);
  return id;
}

export type PlaceResult = { created: boolean; orderId: number };

/**
 * Place: a new order row (placement pending), its place command, and the "placed through
 * tracklane" event (status CREATED). The same body again is the same order (200); another
 * body with the same client_order_id is a conflict.
 */
export async function placeOrder(sql: Sql, body: PlaceOrderBody): Promise<PlaceResult> {
  const coid = body.order_details.client_order_id;
  const hash = sha256Hex(canonicalJson(body));
  for (let attempt = 0; ; attempt++) {
    try {
      return await sql.begin(async (tx) => {
        const [existing] = await tx<{ id: string; place_hash: string | null }[]>`
          select o.id::text, c.request_hash as place_hash
          from orders o left join commands c on c.order_id = o.id and c.kind = 'place'
          where o.client_order_id = ${coid}
          order by c.id limit 1`;
        if (existing) {
          if (existing.place_hash === hash) return { created: false, orderId: Number(existing.id) };
          throw new ApiError(
            "conflict",
            existing.place_hash === null
              ? `order ${coid} is already known from the provider's callbacks; it was not placed through tracklane`
              : `order ${coid} was already placed with a different body`,
          );
        }
        const occurredAt = new Date();
        const [order] = await tx<{ id: string }[]>`
          insert into orders (client_order_id, store_code, pickup_otp, placement_state,
                              status, provider_status, status_at, event_count, last_event_at, awb_number)
          values (${coid}, ${body.store_code}, ${pickupOtp(body)}, 'pending',
                  'CREATED', 'CREATED', ${occurredAt.toISOString()}::timestamptz, 1, ${occurredAt.toISOString()}::timestamptz,
                  -- an AWB may be allocated to the client_order_id before the order is placed
                  (select awb_number from awb_numbers where client_order_id = ${coid}))
          returning id::text`;
        const orderId = Number(order!.id);
        const commandId = await insertCommand(tx, orderId, "place", body as unknown as JsonObject);
        await appendTracklaneEvent(tx, { client_order_id: coid, store_code: body.store_code, order_status: "CREATED", tracklane: "placed through tracklane", command_id: commandId }, occurredAt);
        return { created: true, orderId };
      });
    } catch (err) {
      // A concurrent place (or a callback) created the row first: look again.
      if ((err as { code?: string }).code === "23505" && attempt === 0) continue;
      throw err;
    }
  }
}

/** Records a fact tracklane itself knows (placed, linked to the provider's id) in the log. */
export async function appendTracklaneEvent(tx: TransactionSql, payload: JsonObject, occurredAt: Date): Promise<void> {
  const status = typeof payload.order_status === "string" ? payload.order_status : null;
  await appendEvents(tx, [
    {
      source: "tracklane",
      payload,
      event: {
        kind: "status",
        svcOrderId: typeof payload.svc_order_id === "string" ? payload.svc_order_id : null,
        clientOrderId: typeof payload.client_order_id === "string" ? payload.client_order_id : null,
        providerStatus: status,
        occurredAt,
        dedupeKey: dedupeKey("status", payload),
      },
    },
  ]);
}

/** The state checks of PRODUCT.md §6, before anything is recorded. */
export function checkCommandAllowed(kind: Exclude<CommandKind, "place">, order: OrderState): void {
  const status = canonicalStatus(order.status);
  if (order.placement_state === "failed") {
    throw new ApiError("conflict", `order ${order.client_order_id ?? order.svc_order_id} was never placed with the provider (placement failed)`);
  }
  if (kind === "edit" && status !== null && STATUS_RANK[status] >= STATUS_RANK.COLLECTED) {
    throw new ApiError("order_picked_up", `order is ${status}: it can only be edited until the rider picks it up`);
  }
  if ((kind === "cancel" || kind === "dispatch_ready") && status !== null && isTerminal(status)) {
    throw new ApiError("conflict", `order is already ${status}`);
  }
  if (kind === "dispatch_ready" && order.client_order_id === null) {
    throw new ApiError("conflict", "dispatch-ready needs the order's client_order_id, which tracklane has not seen");
  }
}

export async function createCommand(sql: Sql, order: OrderState, kind: Exclude<CommandKind, "place">, request: JsonObject): Promise<number> {
  checkCommandAllowed(kind, order);
  return await sql.begin((tx) => insertCommand(tx, order.id, kind, request));
}
