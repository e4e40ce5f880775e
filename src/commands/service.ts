/**
 * Order commands: what the merchant asks tracklane to tell the provider. Each is
 * recorded (commands table) and queued (graphile-worker) in one transaction; the
 * command__execute task carries it out. Validation and state checks happen here, before
 * any provider call.
 */
import type { Sql, TransactionSql } from "postgres";
import { dedupeKey } from "../domain/normalise.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { STATUS_RANK, canonicalStatus, isTerminal } from "../domain/statuses.ts";
import { DomainError } from "../domain/errors.ts";
import { appendEvents, latestProviderEventNaming } from "../events/log.ts";
import { insertPlacedOrder, lockOrder, recordConfirmed, recordPlacementEnded, recordPlacementPending } from "../orders/store.ts";
import type { LockedOrder } from "../orders/store.ts";
import { findOrderById, findOrderHolding } from "../orders/read.ts";
import type { OrderRow } from "../orders/read.ts";
import { pickupOtp } from "../provider/schemas.ts";
import type { PlaceOrderBody } from "../provider/schemas.ts";
import {
  commandById,
  firstPlaceRequest,
  insertCommand,
  insertSucceeded,
  lastPlacement,
  laterSucceeded,
  lockCommand,
  lockUnsentPlace,
  pendingCommandOf,
  placeOf,
  recordFailed,
  requestHash,
  requeue,
  succeedFailedPlaces,
} from "./store.ts";
import type { CommandKind, CommandRow } from "./store.ts";

/** What the state checks read of an order. */
export type OrderState = LockedOrder;

export type PlaceResult = { created: boolean; orderId: number };

/**
 * Place: a new order row (placement pending), its place command, and the "placed through
 * tracklane" event (status CREATED). The same body again is the same order (200); another
 * body with the same client_order_id is a conflict.
 */
export async function placeOrder(sql: Sql, body: PlaceOrderBody): Promise<PlaceResult> {
  const coid = body.order_details.client_order_id;
  const hash = requestHash(body as unknown as JsonObject);
  for (let attempt = 0; ; attempt++) {
    try {
      return await sql.begin(async (tx) => {
        const existing = await placeOf(tx, coid);
        if (existing) {
          if (existing.place_hash === hash) return { created: false, orderId: existing.order_id };
          throw new DomainError(
            "conflict",
            existing.place_hash === null
              ? `order ${coid} is already known from the provider's callbacks; it was not placed through tracklane`
              : `order ${coid} was already placed with a different body`,
          );
        }
        const at = new Date();
        const { orderId } = await insertPlacedOrder(tx, { clientOrderId: coid, storeCode: body.store_code ?? null, pickupOtp: pickupOtp(body) ?? null, at });
        const commandId = await insertCommand(tx, orderId, "place", body as unknown as JsonObject);
        await appendTracklaneEvent(tx, { client_order_id: coid, store_code: body.store_code, order_status: "CREATED", tracklane: "placed through tracklane", command_id: commandId }, at);
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
  return await sql.begin(async (tx) => {
    // Checked again on the locked row: a cancel that withdrew the place a moment ago, say.
    const row = await lockOrderOrFail(tx, order.id);
    checkCommandAllowed(kind, row);
    if (kind === "cancel") {
      const withdrawn = await withdrawUnsentPlace(tx, row, request);
      if (withdrawn !== undefined) return withdrawn;
    }
    return await insertCommand(tx, order.id, kind, request);
  });
}

/**
 * A cancel accepted while the order's place has not reached the provider (pending, after
 * refusals or before its first attempt, and no place of the order may have reached it:
 * lockUnsentPlace; nor do the provider's events name the order): the place is withdrawn
 * instead of being sent, only to be cancelled once the provider has dispatched a rider.
 * The cancel succeeds as it is recorded (nothing to send), the place ends `failed`
 * ("withdrawn: …"), the placement `failed`, and tracklane's own CANCELLED event makes the
 * order CANCELLED. The new cancel's id, or undefined when the place may be at the provider
 * (the cancel is then queued behind it as usual). `row` is locked by the caller, before
 * the place, as a retry and a place's end lock them.
 */
async function withdrawUnsentPlace(tx: TransactionSql, row: LockedOrder, request: JsonObject): Promise<number | undefined> {
  const orderId = row.id;
  if (row.placement_state !== "pending" || row.svc_order_id !== null || row.client_order_id === null) return undefined;
  const place = await lockUnsentPlace(tx, orderId);
  if (!place || (await latestProviderEventNaming(tx, row.client_order_id))) return undefined;
  const cancelId = await insertSucceeded(tx, orderId, "cancel", request, {
    message: "the order never reached the provider: its place was withdrawn, and nothing was sent",
    data: { client_order_id: row.client_order_id, place_command: place.id },
  });
  await recordFailed(tx, place.id, place.attempts, `withdrawn: the order was cancelled (command ${cancelId}) before this place reached the provider`, false);
  await recordPlacementEnded(tx, orderId, "failed", `cancelled before it reached the provider (command ${cancelId})`);
  await appendTracklaneEvent(
    tx,
    { client_order_id: row.client_order_id, order_status: "CANCELLED", tracklane: "cancelled before it reached the provider", command_id: cancelId },
    new Date(),
  );
  return cancelId;
}

/**
 * createCommand, unless a command of the same kind is still waiting for this order: then
 * that one, and `created` false. The console's actions use it, so that a form sent twice
 * (a double click, or a second person on a page left open) sends the provider one cancel,
 * not two. The order's row is locked first, so two posts at once cannot both record one.
 */
export async function createCommandOnce(sql: Sql, order: OrderState, kind: OrderCommandKind, request: JsonObject): Promise<{ commandId: number; created: boolean }> {
  checkCommandAllowed(kind, order);
  return await sql.begin(async (tx) => {
    const row = await lockOrderOrFail(tx, order.id);
    const waiting = await pendingCommandOf(tx, order.id, kind);
    if (waiting !== undefined) return { commandId: waiting, created: false };
    checkCommandAllowed(kind, row);
    if (kind === "cancel") {
      const withdrawn = await withdrawUnsentPlace(tx, row, request);
      if (withdrawn !== undefined) return { commandId: withdrawn, created: true };
    }
    return { commandId: await insertCommand(tx, order.id, kind, request), created: true };
  });
}

// ---------------------------------------------------------------- placement resolved by hand

/** Placements a person may resolve: the outcome is unknown, or the place gave up. */
const RESOLVABLE = new Set(["unconfirmed", "failed"]);

async function lockOrderOrFail(tx: TransactionSql, orderId: number): Promise<LockedOrder> {
  const row = await lockOrder(tx, orderId);
  if (!row) throw new DomainError("order_not_found", "order not found");
  return row;
}

/**
 * The order is finished (a cancel withdrew its place before it reached the provider, or the
 * provider's own events say so): placing it again would make a delivery nobody wants.
 */
function refuseFinished(row: LockedOrder): void {
  const status = canonicalStatus(row.status);
  if (status !== null && isTerminal(status)) {
    throw new DomainError("conflict", `order ${row.client_order_id ?? row.svc_order_id} is ${status}: its place is not sent again (place a new order instead)`);
  }
}

/** The provider has named this order (an event with its id): sending it again would make a second one. */
function refuseNamedOrder(row: LockedOrder): void {
  if (row.svc_order_id !== null) {
    throw new DomainError("conflict", `the provider already has order ${row.client_order_id ?? row.svc_order_id} as ${row.svc_order_id}: it is not sent again`);
  }
}

/** How a place is sent again by hand: PROVIDER_DEDUPES_ORDERS. */
export interface ResendOptions {
  /** The provider refuses a repeated client_order_id, naming the order it has. */
  dedupesOrders: boolean;
}

/**
 * The provider's own callbacks (or status answers) name this order by its client_order_id,
 * without an id of theirs (so it is not placed): the provider has an order under it, and
 * sending the place again could only make a second one. Not with a provider that refuses
 * duplicates (`dedupesOrders`): it answers the place with a refusal naming the order it
 * has, which adopts it (as a pending place is sent for that, in execute.ts), and can make
 * no second one.
 */
async function refuseKnownToProvider(tx: TransactionSql, row: LockedOrder, options: ResendOptions): Promise<void> {
  if (row.client_order_id === null || options.dedupesOrders) return;
  const seen = await latestProviderEventNaming(tx, row.client_order_id);
  if (seen) {
    throw new DomainError(
      "conflict",
      `the provider's callbacks name order ${row.client_order_id} (last: ${seen.provider_status ?? "a location"} at ${seen.occurred_at.toISOString()}): ` +
        `it has the order, so it is not sent again. Find its svc_order_id at the provider and adopt it (POST /v1/orders/${encodeURIComponent(row.client_order_id)}/placement/confirm)`,
    );
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

/**
 * Whether `owner`, the row holding a provider id, is another client order than `order`:
 * one tracklane placed, or one known from the provider's callbacks under another
 * client_order_id. Adopting the id (by hand, or from a place's answer) would merge the two
 * orders into one. A row known only by that provider id (its callbacks came first) is this
 * order's, and is merged into it.
 */
export function belongsToAnother(
  owner: Pick<OrderRow, "id" | "client_order_id" | "placement_state">,
  order: Pick<OrderRow, "id" | "client_order_id">,
): boolean {
  if (owner.id === order.id) return false;
  return owner.placement_state !== "external" || (owner.client_order_id !== null && owner.client_order_id !== order.client_order_id);
}

/** What `belongsToAnother` found, in words. */
export function heldBy(owner: Pick<OrderRow, "client_order_id" | "placement_state">, svcOrderId: string, order: Pick<OrderRow, "client_order_id">): string {
  return owner.placement_state === "external"
    ? `provider order ${svcOrderId} belongs to order ${owner.client_order_id} (known from the provider's callbacks), not to ${order.client_order_id ?? "this order"}`
    : `provider order ${svcOrderId} already belongs to order ${owner.client_order_id ?? "(unknown)"}`;
}

async function confirmIn(sql: Sql, orderId: number, svcOrderId: string): Promise<{ commandId: number; created: boolean }> {
  return await sql.begin(async (tx) => {
    const row = await lockOrderOrFail(tx, orderId);
    if (row.placement_state === "placed" && row.svc_order_id === svcOrderId) {
      const last = await lastPlacement(tx, orderId);
      if (last !== undefined) return { commandId: last, created: false };
    }
    if (!RESOLVABLE.has(row.placement_state)) refuseUnresolvable(row);
    const owner = await findOrderHolding(tx, svcOrderId);
    if (owner && belongsToAnother(owner, row)) throw new DomainError("conflict", heldBy(owner, svcOrderId, row));
    const request = { svc_order_id: svcOrderId };
    const commandId = await insertSucceeded(tx, orderId, "confirm_placement", request, { message: "placement confirmed by hand", data: request });
    // An external row already holding the id (its callbacks came first) is merged into
    // this one by the projection, through the link event below.
    await recordConfirmed(tx, orderId, svcOrderId, owner === undefined || owner.id === orderId);
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
export async function retryPlacement(sql: Sql, orderId: number, options: ResendOptions): Promise<number> {
  return await sql.begin(async (tx) => {
    const row = await lockOrderOrFail(tx, orderId);
    if (!RESOLVABLE.has(row.placement_state)) refuseUnresolvable(row);
    refuseNamedOrder(row);
    refuseFinished(row);
    await refuseKnownToProvider(tx, row, options);
    const first = await firstPlaceRequest(tx, orderId);
    if (!first) throw new DomainError("conflict", "the order has no place command to send again");
    await recordPlacementPending(tx, orderId);
    return await insertCommand(tx, orderId, "place", first);
  });
}

// ---------------------------------------------------------------- a failed command again

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
export async function retryCommand(sql: Sql, id: number, options: ResendOptions): Promise<number> {
  return await sql.begin(async (tx) => {
    const peek = await commandById(tx, id);
    if (!peek) throw new DomainError("command_not_found", `no command with id ${id}`);
    const orderId = peek.order_id;
    // A place changes its order's placement: the order, then the command, as
    // confirmPlacement, retryPlacement, a place's end and the projection lock them (the
    // command's kind never changes). Locked the other way round, a retry and the
    // projection adopting the same place could deadlock.
    const placement = peek.kind === "place" ? await lockOrderOrFail(tx, orderId) : undefined;
    const command = await lockCommand(tx, id);
    if (!command) throw new DomainError("command_not_found", `no command with id ${id}`);
    if (command.order_id !== orderId) {
      throw new DomainError("conflict", `command ${id} moved to another order (two rows of one order were merged) while it was being retried: retry it again`);
    }
    if (command.state !== "failed") {
      throw new DomainError("conflict", `command ${id} is ${command.state}: only a failed command can be retried`);
    }
    if (command.kind === "place") {
      checkPlaceRetryable(command, placement!);
      refuseNamedOrder(placement!);
      refuseFinished(placement!);
      await refuseKnownToProvider(tx, placement!, options);
      await recordPlacementPending(tx, orderId);
    } else if (command.kind === "confirm_placement") {
      throw new DomainError("conflict", `command ${id} is a confirmation by hand: there is nothing to send again`);
    } else {
      const order = await findOrderById(tx, orderId);
      if (!order) throw new DomainError("order_not_found", "order not found");
      checkCommandAllowed(command.kind as OrderCommandKind, order);
      if (command.kind === "edit") {
        // Commands take effect in the order accepted (executeCommand): sent again now, an
        // old edit would land after, and undo, one accepted later that already succeeded.
        const later = await laterSucceeded(tx, orderId, id, "edit");
        if (later !== null) {
          throw new DomainError("conflict", `command ${id} is an edit that a later one (command ${later}) already replaced at the provider: send a new edit instead`);
        }
      }
    }
    await requeue(tx, id);
    return id;
  });
}

/** Only a refused place of an order whose placement failed may be sent again from here. */
function checkPlaceRetryable(command: CommandRow, order: LockedOrder): void {
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
