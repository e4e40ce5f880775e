/**
 * Carrying out one command against the provider. Transient failures (network, timeout,
 * 429, 5xx: ProviderError.retryable) are retried by re-scheduling the job with backoff
 * (and the provider's Retry-After when it gives one); permanent ones end the command
 * `failed` with the provider's message.
 *
 * No double placement: the provider refuses a second order with the same
 * (store_code, client_order_id) and names the existing one; a place retried after a lost
 * answer therefore adopts that order instead of creating another. Likewise a cancel retried
 * after a lost answer is refused because the order is already cancelled, and that refusal
 * is its success (`cancelledByEarlierAttempt`).
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
}

interface CommandRow {
  id: number;
  order_id: number;
  kind: string;
  state: string;
  request: unknown;
  attempts: number;
}

type Outcome =
  | { type: "succeeded"; response: unknown }
  | { type: "failed"; error: string }
  | { type: "retry"; error: string; afterMs?: number | undefined }
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
    select c.id::int, c.order_id::int, c.kind, c.state, c.request, c.attempts,
           o.id::text as o_id, o.client_order_id, o.svc_order_id, o.status, o.placement_state
    from commands c join orders o on o.id = c.order_id
    where c.id = ${id}`;
  if (!row) return null;
  return {
    command: { id: row.id, order_id: row.order_id, kind: row.kind, state: row.state, request: row.request, attempts: row.attempts },
    order: { id: Number(row.o_id), client_order_id: row.client_order_id, svc_order_id: row.svc_order_id, status: row.status, placement_state: row.placement_state },
  };
}

function classify(err: unknown): Outcome {
  if (err instanceof ProviderError) {
    const message = `${err.kind}${err.status ? ` ${err.status}` : ""}: ${err.providerMessage || err.message}`;
    return err.retryable ? { type: "retry", error: message, afterMs: err.retryAfterMs } : { type: "failed", error: message };
  }
  throw err; // not the provider's doing: let graphile-worker retry the job
}

/**
 * A cancel refused because the order is already CANCELLED is this command's own success when
 * an earlier attempt may have reached the provider, which cancelled and then lost the
 * answer: the returned refusal (the order's id and status as the provider states them).
 * Earlier attempts all ended in a retryable failure (any other outcome ends the command),
 * and all of those but a 429 can hide a cancel carried out: a timeout, a dropped connection,
 * a 5xx or a malformed answer after the provider acted. (Only their count is kept, so a
 * history of 429s alone counts too; the order is cancelled either way.) On the first attempt
 * the same refusal means the order was cancelled by someone else: null, the command fails.
 */
export function cancelledByEarlierAttempt(
  err: unknown,
  svcOrderId: string,
  earlierAttempts: number,
): { svc_order_id: string; status: string } | null {
  if (earlierAttempts === 0) return null;
  const refusal = cancelRefusalFromError(err);
  if (!refusal || refusal.svc_order_id !== svcOrderId || canonicalStatus(refusal.status) !== "CANCELLED") return null;
  return refusal;
}

/**
 * `earlier`: attempts of this command that may have reached the provider: those recorded,
 * plus runs of this job that ended without recording theirs (the worker died or the
 * database went away during or after the call).
 */
async function attempt(provider: ProviderClient, command: CommandRow, order: OrderState, earlier: number): Promise<Outcome> {
  const svc = order.svc_order_id;
  const needsSvc = command.kind !== "place" && command.kind !== "dispatch_ready";
  if (needsSvc && svc === null) {
    return order.placement_state === "pending"
      ? { type: "wait", reason: "waiting for the order to be placed" }
      : { type: "failed", error: "the order has no svc_order_id: the provider never confirmed it" };
  }
  try {
    switch (command.kind) {
      case "place": {
        try {
          return { type: "succeeded", response: await provider.placeOrder(PlaceOrderBodySchema.parse(command.request)) };
        } catch (err) {
          const existing = existingOrderFromError(err);
          if (existing) return { type: "succeeded", response: { message: "adopted the order the provider already had", data: existing } };
          throw err;
        }
      }
      case "edit":
        return { type: "succeeded", response: await provider.editOrder(EditOrderBodySchema.parse({ ...(command.request as object), svc_order_id: svc })) };
      case "cancel": {
        try {
          return { type: "succeeded", response: await provider.cancelOrder(svc!, CancelOrderBodySchema.parse(command.request)) };
        } catch (err) {
          const cancelled = cancelledByEarlierAttempt(err, svc!, earlier);
          if (cancelled) {
            return { type: "succeeded", response: { message: "the provider had already cancelled the order: an earlier attempt's answer was lost", data: cancelled } };
          }
          throw err;
        }
      }
      case "dispatch_ready":
        return { type: "succeeded", response: await provider.dispatchReady(order.client_order_id!, DispatchReadyBodySchema.parse(command.request)) };
      case "stop_reattempt":
        return { type: "succeeded", response: await provider.stopReattempt({ svc_order_id: svc! }) };
      default:
        return { type: "failed", error: `unknown command kind ${command.kind}` };
    }
  } catch (err) {
    return classify(err);
  }
}

const placedData = z.looseObject({ data: z.looseObject({ svc_order_id: z.coerce.string(), track_url: z.string().optional() }) });

/** `jobRun`: which run of its graphile-worker job this is (1 the first time). */
export async function executeCommand(deps: ExecuteDeps, commandId: number, jobRun = 1): Promise<void> {
  const loaded = await loadCommand(deps.sql, commandId);
  if (!loaded || loaded.command.state !== "pending") return;
  const { command, order } = loaded;
  const log = deps.log.child({ commandId, kind: command.kind, orderId: order.id });
  if (!deps.provider) {
    await finish(deps.sql, command, order, { type: "failed", error: "no provider configured (PROVIDER_BASE_URL)" });
    return;
  }
  const outcome = await attempt(deps.provider, command, order, command.attempts + Math.max(0, jobRun - 1));
  if (outcome.type === "wait") {
    await enqueueCommand(deps.sql, command.id, order.id, new Date(Date.now() + WAIT_MS));
    return;
  }
  const attempts = command.attempts + 1;
  if (outcome.type === "retry" && attempts < deps.maxAttempts) {
    const delay = Math.max(outcome.afterMs ?? 0, backoffMs(attempts, deps.retryBaseMs));
    log.warn({ attempts, delayMs: delay, error: outcome.error }, "provider call failed; will retry");
    await deps.sql.begin(async (tx) => {
      await tx`update commands set attempts = ${attempts}, last_error = ${outcome.error}, updated_at = now() where id = ${command.id}`;
      await enqueueCommand(tx, command.id, order.id, new Date(Date.now() + delay));
    });
    return;
  }
  const final: Outcome =
    outcome.type === "retry" ? { type: "failed", error: `gave up after ${attempts} attempts: ${outcome.error}` } : outcome;
  await finish(deps.sql, { ...command, attempts }, order, final);
  if (final.type === "failed") log.warn({ attempts, error: final.error }, "command failed");
  else log.info({ attempts }, "command succeeded");
}

async function finish(sql: Sql, command: CommandRow, order: OrderState, outcome: Outcome): Promise<void> {
  await sql.begin(async (tx) => {
    if (outcome.type === "succeeded") {
      await tx`
        update commands set state = 'succeeded', attempts = ${command.attempts}, response = ${JSON.stringify(outcome.response ?? null)}::text::jsonb,
          last_error = null, completed_at = now(), updated_at = now()
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
    } else if (outcome.type === "failed") {
      await tx`
        update commands set state = 'failed', attempts = ${command.attempts}, last_error = ${outcome.error},
          completed_at = now(), updated_at = now()
        where id = ${command.id}`;
      if (command.kind === "place") {
        await tx`update orders set placement_state = 'failed', placement_error = ${outcome.error}, updated_at = now() where id = ${order.id}`;
      }
    }
  });
}
