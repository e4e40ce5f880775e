/**
 * Carrying out one command against the provider. Transient failures (network, timeout,
 * 429, 5xx: ProviderError.retryable) are retried by re-scheduling the job with backoff
 * (and the provider's Retry-After when it gives one); permanent ones end the command
 * `failed` with the provider's message.
 *
 * No double placement (PRODUCT.md §10). Every provider order dispatches a paid rider, and
 * the real provider does not refuse a repeated client_order_id. So a place is re-sent only
 * when the provider cannot have acted on the earlier attempt (not sent, or refused). When
 * it may have (ProviderError.delivery "ambiguous": a timeout, a connection closed after the
 * request was written, a 500/502/504, an unreadable 2xx, or a run that died mid-call), the
 * placement becomes `unconfirmed` and stays so until evidence arrives (a callback naming
 * both ids, projection/project.ts) or a person confirms or retries it (commands/service.ts).
 * With PROVIDER_DEDUPES_ORDERS the provider refuses a second order and names the first,
 * so an ambiguous place is re-sent and that refusal adopts the order.
 *
 * Edit, cancel, dispatch-ready and stop-reattempt are harmless to repeat: ambiguous
 * failures retry. A refusal that says the wanted state already holds (a cancel of an order
 * already cancelled) ends the command `succeeded`.
 */
import type { Sql } from "postgres";
import { z } from "zod";
import { canonicalStatus } from "../domain/statuses.ts";
import type { Logger } from "../logger.ts";
import type { ProviderClient } from "../provider/client.ts";
import { ProviderError, cancelRefusalFromError, existingOrderFromError } from "../provider/errors.ts";
import {
  CancelOrderBodySchema,
  DispatchReadyBodySchema,
  EditOrderBodySchema,
  PlaceOrderBodySchema,
} from "../provider/schemas.ts";
import { appendTracklaneEvent, enqueueCommand } from "./service.ts";
import type { OrderState } from "./service.ts";

export interface ExecuteDeps {
  sql: Sql;
  provider: ProviderClient | undefined;
  log: Logger;
  maxAttempts: number;
  retryBaseMs: number;
  /** PROVIDER_DEDUPES_ORDERS: an ambiguous place may be sent again. */
  dedupesOrders: boolean;
}

interface CommandRow {
  id: number;
  order_id: number;
  kind: string;
  state: string;
  request: unknown;
  attempts: number;
  outcome_unknown: boolean;
}

type Outcome =
  | { type: "succeeded"; response: unknown }
  | { type: "failed"; error: string }
  /** `unknown`: this attempt may have reached the provider (ProviderError.delivery ambiguous). */
  | { type: "retry"; error: string; afterMs?: number | undefined; unknown: boolean }
  /** A place that may have created an order: not re-sent; a person or evidence decides. */
  | { type: "unconfirmed"; error: string }
  /** Not attempted yet (the order has no provider id yet): check again later. */
  | { type: "wait"; reason: string };

const MAX_DELAY_MS = 10 * 60_000;
const WAIT_MS = 5_000;

export function backoffMs(attempt: number, baseMs: number): number {
  const exp = Math.min(MAX_DELAY_MS, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.8 + Math.random() * 0.4)); // ±20% jitter: retries of many orders spread out
}

async function loadCommand(sql: Sql, id: number): Promise<{ command: CommandRow; order: OrderState } | null> {
  const [row] = await sql<(CommandRow & { o_id: string; client_order_id: string | null; svc_order_id: string | null; status: string | null; placement_state: string })[]>`
    select c.id::int, c.order_id::int, c.kind, c.state, c.request, c.attempts, c.outcome_unknown,
           o.id::text as o_id, o.client_order_id, o.svc_order_id, o.status, o.placement_state
    from commands c join orders o on o.id = c.order_id
    where c.id = ${id}`;
  if (!row) return null;
  return {
    command: { id: row.id, order_id: row.order_id, kind: row.kind, state: row.state, request: row.request, attempts: row.attempts, outcome_unknown: row.outcome_unknown },
    order: { id: Number(row.o_id), client_order_id: row.client_order_id, svc_order_id: row.svc_order_id, status: row.status, placement_state: row.placement_state },
  };
}

const describe = (err: ProviderError) => `${err.kind}${err.status ? ` ${err.status}` : ""}: ${err.providerMessage || err.message}`;

/**
 * A failed call's outcome for a command that is safe to repeat. Errors that are not the
 * provider's doing are thrown: graphile-worker retries the job.
 */
function classify(err: unknown): Outcome {
  if (!(err instanceof ProviderError)) throw err;
  const error = describe(err);
  return err.retryable ? { type: "retry", error, afterMs: err.retryAfterMs, unknown: err.delivery === "ambiguous" } : { type: "failed", error };
}

/**
 * A failed place: re-sent only when the provider cannot have acted, or when it refuses
 * duplicates (then a repeat is answered with the first order, which is adopted).
 */
function classifyPlace(err: unknown, dedupesOrders: boolean): Outcome {
  if (!(err instanceof ProviderError)) throw err;
  if (err.delivery === "ambiguous" && !dedupesOrders) {
    return { type: "unconfirmed", error: `outcome unknown, not re-sent: ${describe(err)}` };
  }
  return classify(err);
}

/**
 * A cancel refused because the order is already cancelled: the state the command wants
 * holds, whoever got there first (an earlier attempt of ours whose answer was lost, or
 * someone else). Recognised from the refusal's data (the order's id and a cancelled
 * status) or, when it carries none, from its words ("already cancelled").
 */
export function alreadyCancelled(err: unknown, svcOrderId: string): { svc_order_id: string; status: string } | null {
  const refusal = cancelRefusalFromError(err);
  if (refusal) {
    const status = canonicalStatus(refusal.status);
    const cancelled = status === "CANCELLED" || status === "CANCELLED_BY_CUSTOMER";
    return refusal.svc_order_id === svcOrderId && cancelled ? refusal : null;
  }
  if (err instanceof ProviderError && err.delivery === "refused" && /\balready\s+(been\s+)?cancell?ed\b/i.test(err.providerMessage)) {
    return { svc_order_id: svcOrderId, status: "CANCELLED" };
  }
  return null;
}

/**
 * `unknownBefore`: an earlier attempt may have reached the provider without our learning
 * what it did: one recorded as ambiguous, or one whose run died during the call (its
 * "sending" mark, `outcome_unknown` set just before the call, was never cleared).
 */
async function attempt(deps: ExecuteDeps, provider: ProviderClient, command: CommandRow, order: OrderState, unknownBefore: boolean): Promise<Outcome> {
  const svc = order.svc_order_id;
  const needsSvc = command.kind !== "place" && command.kind !== "dispatch_ready";
  if (needsSvc && svc === null) {
    return order.placement_state === "pending"
      ? { type: "wait", reason: "waiting for the order to be placed" }
      : { type: "failed", error: "the order has no svc_order_id: the provider never confirmed it" };
  }
  switch (command.kind) {
    case "place": {
      // The provider already named this order (its callback, or a confirmation by hand):
      // it has it, and sending again could only make a second one.
      if (svc !== null) return { type: "succeeded", response: { message: "the provider already has the order", data: { svc_order_id: svc } } };
      if (unknownBefore && !deps.dedupesOrders) {
        return { type: "unconfirmed", error: "outcome unknown, not re-sent: an earlier attempt ended without an answer" };
      }
      const body = PlaceOrderBodySchema.parse(command.request);
      // Durable before the call: a run that dies during it leaves the mark, and the next
      // run knows the provider may have acted. A definite outcome clears it (below).
      await deps.sql`update commands set outcome_unknown = true where id = ${command.id}`;
      try {
        return { type: "succeeded", response: await provider.placeOrder(body) };
      } catch (err) {
        const existing = existingOrderFromError(err);
        if (existing) return { type: "succeeded", response: { message: "adopted the order the provider already had", data: existing } };
        return classifyPlace(err, deps.dedupesOrders);
      }
    }
    case "edit":
      return await settle(provider.editOrder(EditOrderBodySchema.parse({ ...(command.request as object), svc_order_id: svc })));
    case "cancel": {
      try {
        return { type: "succeeded", response: await provider.cancelOrder(svc!, CancelOrderBodySchema.parse(command.request)) };
      } catch (err) {
        const cancelled = alreadyCancelled(err, svc!);
        if (cancelled) return { type: "succeeded", response: { message: "the order was already cancelled at the provider", data: cancelled } };
        return classify(err);
      }
    }
    case "dispatch_ready":
      return await settle(provider.dispatchReady(order.client_order_id!, DispatchReadyBodySchema.parse(command.request)));
    case "stop_reattempt":
      return await settle(provider.stopReattempt({ svc_order_id: svc! }));
    default:
      return { type: "failed", error: `unknown command kind ${command.kind}` };
  }
}

async function settle(call: Promise<unknown>): Promise<Outcome> {
  try {
    return { type: "succeeded", response: await call };
  } catch (err) {
    return classify(err);
  }
}

const placedData = z.looseObject({ data: z.looseObject({ svc_order_id: z.coerce.string(), track_url: z.string().nullish() }) });

export async function executeCommand(deps: ExecuteDeps, commandId: number): Promise<void> {
  const loaded = await loadCommand(deps.sql, commandId);
  if (!loaded || loaded.command.state !== "pending") return;
  const { command, order } = loaded;
  const log = deps.log.child({ commandId, kind: command.kind, orderId: order.id });
  if (!deps.provider) {
    await finish(deps.sql, command, order, { type: "failed", error: "no provider configured (PROVIDER_BASE_URL)" });
    return;
  }
  const unknownBefore = command.outcome_unknown;
  const outcome = await attempt(deps, deps.provider, command, order, unknownBefore);
  if (outcome.type === "wait") {
    await enqueueCommand(deps.sql, command.id, order.id, new Date(Date.now() + WAIT_MS));
    return;
  }
  const attempts = command.attempts + 1;
  const outcomeUnknown = unknownBefore || (outcome.type === "retry" && outcome.unknown) || outcome.type === "unconfirmed";
  if (outcome.type === "retry" && attempts < deps.maxAttempts) {
    const delay = Math.max(outcome.afterMs ?? 0, backoffMs(attempts, deps.retryBaseMs));
    log.warn({ attempts, delayMs: delay, error: outcome.error }, "provider call failed; will retry");
    await deps.sql.begin(async (tx) => {
      await tx`update commands set attempts = ${attempts}, last_error = ${outcome.error}, outcome_unknown = ${outcomeUnknown}, updated_at = now()
        where id = ${command.id}`;
      await enqueueCommand(tx, command.id, order.id, new Date(Date.now() + delay));
    });
    return;
  }
  let final: Outcome = outcome;
  if (outcome.type === "retry") {
    const error = `gave up after ${attempts} attempts: ${outcome.error}`;
    // A place that gave up after an attempt that may have reached the provider may have
    // created the order all the same.
    final = command.kind === "place" && outcomeUnknown ? { type: "unconfirmed", error } : { type: "failed", error };
  }
  await finish(deps.sql, { ...command, attempts, outcome_unknown: outcomeUnknown }, order, final);
  if (final.type === "failed") log.warn({ attempts, error: final.error }, "command failed");
  else if (final.type === "unconfirmed") log.warn({ attempts, error: final.error }, "placement unconfirmed: the provider may have created the order");
  else log.info({ attempts }, "command succeeded");
}

async function finish(sql: Sql, command: CommandRow, order: OrderState, outcome: Outcome): Promise<void> {
  await sql.begin(async (tx) => {
    if (outcome.type === "succeeded") {
      await tx`
        update commands set state = 'succeeded', attempts = ${command.attempts}, response = ${JSON.stringify(outcome.response ?? null)}::text::jsonb,
          last_error = null, outcome_unknown = false, completed_at = now(), updated_at = now()
        where id = ${command.id}`;
      if (command.kind === "place") {
        const placed = placedData.parse(outcome.response).data;
        // Another row may already hold this svc_order_id (a callback raced the answer):
        // then the link event below makes the projection merge the two.
        await tx`
          update orders set placement_state = 'placed', placement_error = null,
            svc_order_id = case when exists (select 1 from orders where svc_order_id = ${placed.svc_order_id}) then svc_order_id else ${placed.svc_order_id} end,
            track_url = coalesce(${placed.track_url ?? null}, track_url), updated_at = now()
          where id = ${order.id}`;
        await appendTracklaneEvent(
          tx,
          { client_order_id: order.client_order_id, svc_order_id: placed.svc_order_id, track_url: placed.track_url ?? null, tracklane: "accepted by the provider", command_id: command.id },
          new Date(),
        );
      }
    } else if (outcome.type === "failed" || outcome.type === "unconfirmed") {
      // Evidence may have arrived while this attempt was out: the provider's callback named
      // the order with its id. Then the provider has it, whatever this attempt's answer.
      const [named] =
        command.kind === "place"
          ? await tx<{ svc_order_id: string }[]>`select svc_order_id from orders where id = ${order.id} and svc_order_id is not null for update`
          : [];
      if (named) {
        await tx`
          update commands set state = 'succeeded', attempts = ${command.attempts}, last_error = null, completed_at = now(), updated_at = now(),
            response = ${JSON.stringify({ message: `the provider's event named the order (this attempt: ${outcome.error})`, data: named })}::text::jsonb
          where id = ${command.id}`;
        await tx`update orders set placement_state = 'placed', placement_error = null, updated_at = now() where id = ${order.id}`;
        return;
      }
      await tx`
        update commands set state = 'failed', attempts = ${command.attempts}, last_error = ${outcome.error},
          outcome_unknown = ${command.outcome_unknown}, completed_at = now(), updated_at = now()
        where id = ${command.id}`;
      if (command.kind === "place") {
        await tx`
          update orders set placement_state = ${outcome.type}, placement_error = ${outcome.error}, updated_at = now()
          where id = ${order.id} and placement_state = 'pending'`;
      }
    }
  });
}
