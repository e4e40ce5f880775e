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
import { succeedFailedPlaces } from "./placements.ts";
import { pickupOtp } from "../provider/schemas.ts";
import type { PlaceOrderBody } from "../provider/schemas.ts";
import { DomainError } from "../domain/errors.ts";

export const COMMAND_KINDS = ["place", "edit", "cancel", "dispatch_ready", "stop_reattempt", "confirm_placement"] as const;
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
          throw new DomainError(
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
export function checkCommandAllowed(kind: OrderCommandKind, order: OrderState): void {
  const status = canonicalStatus(order.status);
  if (order.placement_state === "failed") {
    throw new DomainError("conflict", `order ${order.client_order_id ?? order.svc_order_id} was never placed with the provider (placement failed)`);
  }
  if (kind === "edit" && status !== null && STATUS_RANK[status] >= STATUS_RANK.COLLECTED) {
    throw new DomainError("order_picked_up", `order is ${status}: it can only be edited until the rider picks it up`);
  }
  if ((kind === "cancel" || kind === "dispatch_ready") && status !== null && isTerminal(status)) {
    throw new DomainError("conflict", `order is already ${status}`);
  }
  if (kind === "dispatch_ready" && order.client_order_id === null) {
    throw new DomainError("conflict", "dispatch-ready needs the order's client_order_id, which tracklane has not seen");
  }
}

/** Commands a merchant queues for the provider on an existing order. */
export type OrderCommandKind = Exclude<CommandKind, "place" | "confirm_placement">;

export async function createCommand(sql: Sql, order: OrderState, kind: OrderCommandKind, request: JsonObject): Promise<number> {
  checkCommandAllowed(kind, order);
  return await sql.begin((tx) => insertCommand(tx, order.id, kind, request));
}

// ---------------------------------------------------------------- placement resolved by hand

/** Placements a person may resolve: the outcome is unknown, or the place gave up. */
const RESOLVABLE = new Set(["unconfirmed", "failed"]);

interface LockedOrder {
  id: string;
  client_order_id: string | null;
  svc_order_id: string | null;
  placement_state: string;
}

async function lockOrder(tx: TransactionSql, orderId: number): Promise<LockedOrder> {
  const [row] = await tx<LockedOrder[]>`
    select id::text, client_order_id, svc_order_id, placement_state from orders where id = ${orderId} for update`;
  if (!row) throw new DomainError("order_not_found", "order not found");
  return row;
}

/** The provider has named this order (an event with its id): sending it again would make a second one. */
function refuseNamedOrder(row: LockedOrder): void {
  if (row.svc_order_id !== null) {
    throw new DomainError("conflict", `the provider already has order ${row.client_order_id ?? row.svc_order_id} as ${row.svc_order_id}: it is not sent again`);
  }
}

function refuseUnresolvable(row: LockedOrder): never {
  const name = row.client_order_id ?? row.svc_order_id;
  if (row.placement_state === "external") {
    throw new DomainError("conflict", `order ${name} was not placed through tracklane: there is no placement to resolve`);
  }
  if (row.placement_state === "pending") {
    throw new DomainError("conflict", `order ${name} is being placed right now: wait for the place command to end`);
  }
  throw new DomainError("conflict", `order ${name} is already placed${row.svc_order_id ? ` as ${row.svc_order_id}` : ""}`);
}

/**
 * `POST …/placement/confirm`: a person found the order at the provider (its id
 * `svcOrderId`) and adopts it. Recorded as a `confirm_placement` command that succeeds at
 * once; the order is placed, and tracklane's own event links the two ids so that the
 * provider's callbacks for `svcOrderId` land on this order. Confirming the id the order
 * already has is answered again (idempotent), not refused.
 */
export async function confirmPlacement(sql: Sql, orderId: number, svcOrderId: string): Promise<{ commandId: number; created: boolean }> {
  try {
    return await confirmIn(sql, orderId, svcOrderId);
  } catch (err) {
    // Two confirmations of one provider id for two orders at once: the second one's insert
    // meets the first one's row on the unique svc_order_id.
    if ((err as { code?: string }).code === "23505") {
      throw new DomainError("conflict", `provider order ${svcOrderId} was just confirmed for another order`);
    }
    throw err;
  }
}

async function confirmIn(sql: Sql, orderId: number, svcOrderId: string): Promise<{ commandId: number; created: boolean }> {
  return await sql.begin(async (tx) => {
    const row = await lockOrder(tx, orderId);
    if (row.placement_state === "placed" && row.svc_order_id === svcOrderId) {
      const [last] = await tx<{ id: string }[]>`
        select id::text from commands where order_id = ${orderId} and kind in ('place', 'confirm_placement') and state = 'succeeded'
        order by id desc limit 1`;
      if (last) return { commandId: Number(last.id), created: false };
    }
    if (!RESOLVABLE.has(row.placement_state)) refuseUnresolvable(row);
    const [owner] = await tx<{ client_order_id: string | null; placement_state: string }[]>`
      select client_order_id, placement_state from orders where svc_order_id = ${svcOrderId} and id <> ${orderId}`;
    if (owner && owner.placement_state !== "external") {
      throw new DomainError("conflict", `provider order ${svcOrderId} already belongs to order ${owner.client_order_id ?? "(unknown)"}`);
    }
    const request = { svc_order_id: svcOrderId };
    const response = { message: "placement confirmed by hand", data: request };
    const [command] = await tx<{ id: string }[]>`
      insert into commands (order_id, kind, state, request, request_hash, response, completed_at)
      values (${orderId}, 'confirm_placement', 'succeeded', ${JSON.stringify(request)}::text::jsonb,
              ${sha256Hex(canonicalJson(request))}, ${JSON.stringify(response)}::text::jsonb, now())
      returning id::text`;
    const commandId = Number(command!.id);
    // An external row already holding the id (its callbacks came first) is merged into
    // this one by the projection, through the link event below.
    await tx`
      update orders set placement_state = 'placed', placement_error = null, updated_at = now(),
        svc_order_id = case when ${owner === undefined} then ${svcOrderId} else svc_order_id end
      where id = ${orderId}`;
    // The provider has the order: its failed place commands reached it after all.
    await succeedFailedPlaces(tx, [orderId], `confirmed by hand (command ${commandId})`);
    await appendTracklaneEvent(
      tx,
      { client_order_id: row.client_order_id, svc_order_id: svcOrderId, tracklane: "placement confirmed by hand", command_id: commandId },
      new Date(),
    );
    return { commandId, created: true };
  });
}

/**
 * `POST …/placement/retry`: a person decided the provider has no order for this one, and
 * sends the place again: a new `place` command with the original body. Unlike an automatic
 * retry it is sent whatever happened before, since a person took that decision.
 */
export async function retryPlacement(sql: Sql, orderId: number): Promise<number> {
  return await sql.begin(async (tx) => {
    const row = await lockOrder(tx, orderId);
    if (!RESOLVABLE.has(row.placement_state)) refuseUnresolvable(row);
    refuseNamedOrder(row);
    const [first] = await tx<{ request: JsonObject }[]>`
      select request from commands where order_id = ${orderId} and kind = 'place' order by id limit 1`;
    if (!first) throw new DomainError("conflict", "the order has no place command to send again");
    await tx`update orders set placement_state = 'pending', placement_error = null, updated_at = now() where id = ${orderId}`;
    return await insertCommand(tx, orderId, "place", first.request);
  });
}

// ---------------------------------------------------------------- a failed command again

interface RetriedCommand {
  id: string;
  order_id: string;
  kind: CommandKind;
  state: string;
  outcome_unknown: boolean;
}

/**
 * `POST /v1/commands/{id}/retry`: a `failed` command runs again, as a new round of the
 * same row with a new job, in one transaction: state back to pending and its attempts
 * counted from 0 again (a command that gave up after COMMAND_MAX_ATTEMPTS gets a whole
 * new round), last_error kept until the next attempt replaces it. The order's state
 * checks apply again: what was allowed when the command was recorded may not be any more.
 *
 * A `place` is retried here only when the provider refused it (its outcome is known): a
 * place that may have created an order goes through `…/placement/retry`, which says what
 * a second send risks. Its order's placement goes back to pending with it.
 */
export async function retryCommand(sql: Sql, id: number): Promise<number> {
  return await sql.begin(async (tx) => {
    const [peek] = await tx<{ order_id: string; kind: CommandKind }[]>`select order_id::text, kind from commands where id = ${id}`;
    if (!peek) throw new DomainError("command_not_found", `no command with id ${id}`);
    const orderId = Number(peek.order_id);
    // A place changes its order's placement: the order first, then the command, as
    // confirmPlacement and retryPlacement lock them.
    const placement = peek.kind === "place" ? await lockOrder(tx, orderId) : undefined;
    const [command] = await tx<RetriedCommand[]>`
      select id::text, order_id::text, kind, state, outcome_unknown from commands where id = ${id} for update`;
    if (!command) throw new DomainError("command_not_found", `no command with id ${id}`);
    if (command.state !== "failed") {
      throw new DomainError("conflict", `command ${id} is ${command.state}: only a failed command can be retried`);
    }
    if (command.kind === "place") {
      checkPlaceRetryable(command, placement!);
      refuseNamedOrder(placement!);
      await tx`update orders set placement_state = 'pending', placement_error = null, updated_at = now() where id = ${orderId}`;
    } else if (command.kind === "confirm_placement") {
      throw new DomainError("conflict", `command ${id} is a confirmation by hand: there is nothing to send again`);
    } else {
      const [order] = await tx<(Omit<OrderState, "id"> & { id: string })[]>`
        select id::text, client_order_id, svc_order_id, status, placement_state from orders where id = ${orderId}`;
      if (!order) throw new DomainError("order_not_found", "order not found");
      checkCommandAllowed(command.kind, { ...order, id: orderId });
    }
    await tx`update commands set state = 'pending', attempts = 0, completed_at = null, updated_at = now() where id = ${id}`;
    await enqueueCommand(tx, id, orderId);
    return id;
  });
}

/** Only a refused place of an order whose placement failed may be sent again from here. */
function checkPlaceRetryable(command: RetriedCommand, order: LockedOrder): void {
  const name = order.client_order_id ?? order.svc_order_id ?? `#${order.id}`;
  if (command.outcome_unknown || order.placement_state === "unconfirmed") {
    throw new DomainError(
      "conflict",
      `command ${command.id} is a place whose outcome is unknown: the provider may have created the order. ` +
        `Look for it at the provider, then adopt it (POST /v1/orders/${encodeURIComponent(name)}/placement/confirm) ` +
        `or send it again with POST /v1/orders/${encodeURIComponent(name)}/placement/retry, which creates a duplicate if the earlier attempt did create one`,
    );
  }
  if (order.placement_state !== "failed") refuseUnresolvable(order);
}
