/**
 * Carrying out one command against the provider, and recording its outcome. A place is
 * re-sent only when the provider cannot have acted on the earlier attempt; when it may
 * have, the placement becomes `unconfirmed` for evidence or a person to settle
 * (docs/provider.md). Other commands are harmless to repeat and retry.
 *
 * Commands of one order take effect at the provider in the order they were accepted: a
 * command other than a place or a cancel waits while an earlier one of its order is
 * pending (a retry ahead of it), and one that needs the order at the provider waits for a
 * pending place (docs/reliability.md, "Commands of an order in order").
 */
import type { Sql, TransactionSql } from "postgres";
import { z } from "zod";
import { canonicalStatus } from "../domain/statuses.ts";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import type { ProviderClient } from "../provider/client.ts";
import { ProviderError, cancelRefusalFromError, describeProviderError, existingOrderFromError } from "../provider/errors.ts";
import {
  CancelOrderBodySchema,
  DispatchReadyBodySchema,
  EditOrderBodySchema,
  PlaceOrderBodySchema,
} from "../provider/schemas.ts";
import type { CancelOrderBody } from "../provider/schemas.ts";
import { recordAccepted, recordPlaced, recordPlacementEnded, lockOrder } from "../orders/store.ts";
import { latestProviderEventNaming } from "../events/log.ts";
import { appendTracklaneEvent, belongsToAnother, heldBy } from "./service.ts";
import type { OrderState } from "./service.ts";
import { recordMessage } from "../notify/outbox.ts";
import { orderJson } from "../orders/json.ts";
import { findOrderById, findOrderHolding } from "../orders/read.ts";
import { commandJson } from "./json.ts";
import {
  commandById,
  commandWithOrder,
  earlierPending,
  enqueueCommand,
  lastPlacedAt,
  lockCommand,
  lockStranded,
  markSending,
  orderQueue,
  queueOfJob,
  recordFailed,
  recordRetry,
  recordSucceeded,
} from "./store.ts";
import type { CommandOrder, CommandRow } from "./store.ts";

export interface ExecuteDeps {
  sql: Sql;
  provider: ProviderClient | undefined;
  log: Logger;
  maxAttempts: number;
  retryBaseMs: number;
  /** PROVIDER_DEDUPES_ORDERS: an ambiguous place may be sent again. */
  dedupesOrders: boolean;
  /** Counts each command that ends, once its end is committed (tracklane_commands_total). */
  metrics?: Pick<Metrics, "commands"> | undefined;
}

type Outcome =
  | { type: "succeeded"; response: unknown }
  /**
   * `known`: the provider's answer shows the command did not take effect, even after an earlier attempt whose answer was lost.
   * `unknown`: this attempt may have taken effect all the same (a 303 See Other: ambiguous, and not retried).
   */
  | { type: "failed"; error: string; known?: boolean; unknown?: boolean }
  /** `unknown`: this attempt may have reached the provider (ProviderError.delivery ambiguous). */
  | { type: "retry"; error: string; afterMs?: number | undefined; unknown: boolean }
  /** A place that may have created an order: not re-sent; a person or evidence decides. */
  | { type: "unconfirmed"; error: string }
  /** Not attempted yet (the order has no provider id yet): check again later. */
  | { type: "wait"; reason: string }
  /** Another run of the same command is sending it, or ended it meanwhile: that run records its outcome. */
  | { type: "ended" };

const MAX_DELAY_MS = 10 * 60_000;
const WAIT_MS = 5_000;
/**
 * How long a command waits for a placed order's provider id to be linked (notReady):
 * moments as a rule; longer, the order's projection is failing, and the command ends
 * failed, where a person sees it, rather than waiting for ever.
 */
export const LINK_WAIT_MAX_MS = 15 * 60_000;
/**
 * The longest Retry-After honoured: a provider asking for more (a day, say) is asked again
 * after this, rather than leaving the command, and for a place its order, pending that long.
 */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

export function backoffMs(attempt: number, baseMs: number): number {
  const exp = Math.min(MAX_DELAY_MS, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(exp * (0.8 + Math.random() * 0.4)); // ±20% jitter: retries of many orders spread out
}

/**
 * A failed call's outcome for a command that is safe to repeat. Errors that are not the
 * provider's doing are thrown: graphile-worker retries the job.
 */
function classify(err: unknown): Outcome {
  if (!(err instanceof ProviderError)) throw err;
  const error = describeProviderError(err);
  const unknown = err.delivery === "ambiguous";
  return err.retryable ? { type: "retry", error, afterMs: err.retryAfterMs, unknown } : { type: "failed", error, ...(unknown ? { unknown } : {}) };
}

/**
 * A failed place: re-sent only when the provider cannot have acted, or when it refuses
 * duplicates (then a repeat is answered with the first order, which is adopted).
 */
function classifyPlace(err: unknown, dedupesOrders: boolean): Outcome {
  if (!(err instanceof ProviderError)) throw err;
  if (err.delivery === "ambiguous") {
    const error = describeProviderError(err);
    // Sent again, whatever the error's kind (a 303 is not retryable for other commands):
    // the provider's refusal of the repeat names the order it may have made.
    if (dedupesOrders) return { type: "retry", error, afterMs: err.retryAfterMs, unknown: true };
    return { type: "unconfirmed", error: `outcome unknown, not re-sent: ${error}` };
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
 * A stop-reattempt refused because no re-attempt is scheduled. After an earlier attempt
 * that may have reached the provider, that attempt stopped it: the state the command wants
 * holds (as for a cancel refused as already cancelled). On a first attempt the same
 * refusal stays a failure: there was nothing to stop.
 */
export function noReattemptScheduled(err: unknown): boolean {
  return err instanceof ProviderError && err.delivery === "refused" && /\bno\b.*\bre-?attempts?\b.*\bscheduled\b/i.test(err.providerMessage);
}

/**
 * Why a command cannot be sent yet, or null when it can. Every command but a place acts on
 * an order the provider must have: edit, cancel and stop-reattempt name it by the
 * provider's id; dispatch-ready names it by the client's id (provider-api.md §4.2), so it
 * needs only that the provider has the order. While the order's place is pending, or its
 * provider id is still being linked to it, they wait. Once the place has ended without the
 * provider naming the order they fail (not sent) saying why: `failed`, the provider
 * refused it; `unconfirmed`, the provider may not have it, and a person settles that
 * first, then retries the command.
 */
export function notReady(kind: string, order: Pick<OrderState, "svc_order_id" | "placement_state">): Outcome | null {
  if (kind === "place" || order.svc_order_id !== null) return null;
  if (kind === "dispatch_ready" && (order.placement_state === "placed" || order.placement_state === "external")) return null;
  switch (order.placement_state) {
    case "pending":
      return { type: "wait", reason: "waiting for the order to be placed" };
    case "placed":
      // The provider named the order with an id another row held (its callbacks came
      // before the place's answer, or a person confirmed it): the projection merges the
      // rows and the id arrives here in moments. Failing now would say, wrongly, that the
      // provider never named it.
      return { type: "wait", reason: "waiting for the provider's id to be linked to the order" };
    case "unconfirmed":
      return {
        type: "failed",
        error: "not sent: the order's placement is unconfirmed (the provider may not have the order); confirm or retry the placement, then retry this command",
      };
    case "failed":
      return { type: "failed", error: "not sent: the order was never placed (its place command failed)" };
    default:
      return { type: "failed", error: "not sent: the order has no svc_order_id: the provider has not named it" };
  }
}

/**
 * `unknownBefore`: an earlier attempt may have reached the provider without our learning
 * what it did: one recorded as ambiguous, or one whose run died during the call (its
 * "sending" mark, `outcome_unknown` set just before the call, was never cleared).
 */
async function attempt(deps: ExecuteDeps, provider: ProviderClient, command: CommandRow, order: CommandOrder, unknownBefore: boolean): Promise<Outcome> {
  const svc = order.svc_order_id;
  const blocked = notReady(command.kind, order);
  if (blocked) return blocked;
  switch (command.kind) {
    case "place": {
      // The provider already named this order (its callback, or a confirmation by hand):
      // it has it, and sending again could only make a second one.
      if (svc !== null) return { type: "succeeded", response: { message: "the provider already has the order", data: { svc_order_id: svc } } };
      // Its callbacks name the order by the client's id alone: it has it, under an id it
      // has not told us. Not sent; a person adopts it by that id (placement/confirm). (A
      // provider that refuses duplicates would name it in its refusal: sent, then.)
      const seen = order.client_order_id === null || deps.dedupesOrders ? undefined : await latestProviderEventNaming(deps.sql, order.client_order_id);
      if (seen) {
        return {
          type: "unconfirmed",
          error: `not sent: the provider's callbacks name the order (last: ${seen.provider_status ?? "a location"}) without its svc_order_id; confirm it with that id`,
        };
      }
      if (unknownBefore && !deps.dedupesOrders) {
        return { type: "unconfirmed", error: "outcome unknown, not re-sent: an earlier attempt ended without an answer" };
      }
      const body = PlaceOrderBodySchema.parse(command.request);
      // The token first: a run that dies while exchanging one has sent nothing, and must
      // not leave the mark below (a failed exchange is a "not sent" error, retried).
      try {
        await provider.authorize();
      } catch (err) {
        return classifyPlace(err, deps.dedupesOrders);
      }
      // Durable before the call: a run that dies during it leaves the mark, and the next
      // run knows the provider may have acted. A definite outcome clears it (below).
      // Claimed, too: two runs of one command at once (its job unlocked under a runner that
      // still ran it) both read it unmarked, and both would send. The one that loses records
      // nothing: the other one's outcome, still to come, is the command's (a refusal, a retry
      // after a 503, a success), and should that run die, the mark it left ends the command
      // unconfirmed (abandonStranded). Recorded here, `unconfirmed` would race that outcome.
      if (!(await markSending(deps.sql, command.id, deps.dedupesOrders))) return { type: "ended" };
      try {
        return { type: "succeeded", response: await provider.placeOrder(body) };
      } catch (err) {
        const existing = existingOrderFromError(err);
        if (existing) return { type: "succeeded", response: { message: "adopted the order the provider already had", data: existing } };
        return classifyPlace(err, deps.dedupesOrders);
      }
    }
    // Marked before the call, as a place is, and after the token, as a place is: a run that
    // dies during the call (the worker killed) leaves the mark, and a later refusal ("can no
    // longer be edited") then says the outcome is unknown rather than reading as not done:
    // the call may have been applied. A run that dies while only the token is asked for has
    // sent nothing and leaves no mark. Repeating these is harmless, so the mark claims nothing.
    case "edit": {
      const body = EditOrderBodySchema.parse({ ...(command.request as object), svc_order_id: svc });
      const unauthorized = await authorize(provider);
      if (unauthorized) return unauthorized;
      await markSending(deps.sql, command.id, true);
      return await settle(provider.editOrder(body));
    }
    case "cancel": {
      const body = CancelOrderBodySchema.parse(command.request);
      const unauthorized = await authorize(provider);
      if (unauthorized) return unauthorized;
      await markSending(deps.sql, command.id, true);
      return await cancelEvery(provider, providerIdsOf(order), body);
    }
    case "dispatch_ready": {
      const body = DispatchReadyBodySchema.parse(command.request);
      const unauthorized = await authorize(provider);
      if (unauthorized) return unauthorized;
      await markSending(deps.sql, command.id, true);
      return await settle(provider.dispatchReady(order.client_order_id!, body));
    }
    case "stop_reattempt": {
      // Marked after the token, as a place is: a run that dies during the call leaves the
      // mark, and the next one reads "no re-attempt scheduled" as its own lost success
      // (noReattemptScheduled), not as a failure. Repeating it is harmless, so the mark claims nothing.
      const unauthorized = await authorize(provider);
      if (unauthorized) return unauthorized;
      await markSending(deps.sql, command.id, true);
      try {
        return { type: "succeeded", response: await provider.stopReattempt({ svc_order_id: svc! }) };
      } catch (err) {
        if (unknownBefore && noReattemptScheduled(err)) {
          return { type: "succeeded", response: { message: "the re-attempt was already stopped (an earlier attempt's answer was lost)", data: { svc_order_id: svc } } };
        }
        return classify(err);
      }
    }
    default:
      return { type: "failed", error: `unknown command kind ${command.kind}` };
  }
}

/**
 * Every provider order of this order: its svc_order_id first, then any other the provider
 * named for the same client_order_id (it made a second order: svc_order_ids).
 */
export function providerIdsOf(order: Pick<CommandOrder, "svc_order_id" | "svc_order_ids">): string[] {
  return [...new Set([...(order.svc_order_id === null ? [] : [order.svc_order_id]), ...order.svc_order_ids])];
}

/** One provider order's cancel: done (sent now, or refused as already cancelled), or why not. */
async function cancelOne(provider: ProviderClient, svc: string, body: CancelOrderBody): Promise<Outcome> {
  try {
    return { type: "succeeded", response: await provider.cancelOrder(svc, body) };
  } catch (err) {
    const cancelled = alreadyCancelled(err, svc);
    if (cancelled) return { type: "succeeded", response: { message: "the order was already cancelled at the provider", data: cancelled } };
    const outcome = classify(err);
    // A refusal naming the order with its (other) status says the order was not cancelled,
    // by this attempt or an earlier one: that outcome is known.
    return outcome.type === "failed" && cancelRefusalFromError(err)?.svc_order_id === svc ? { ...outcome, known: true } : outcome;
  }
}

/**
 * A cancel is sent to every provider order of the order: when the provider made two for
 * one client_order_id, cancelling one would leave the other to be collected, delivered and
 * paid for, while the order shows CANCELLED. Each is safe to send again (an order already
 * cancelled is the cancel's success), so a retry sends to them all again. Done when every
 * one is; retried while any may still succeed; else failed, naming each that was refused.
 */
async function cancelEvery(provider: ProviderClient, ids: readonly string[], body: CancelOrderBody): Promise<Outcome> {
  const results: { svc: string; outcome: Outcome }[] = [];
  for (const svc of ids) results.push({ svc, outcome: await cancelOne(provider, svc, body) });
  if (results.length === 1) return results[0]!.outcome;
  const named = (r: { svc: string; outcome: Outcome }) => `provider order ${r.svc}: ${"error" in r.outcome ? r.outcome.error : r.outcome.type}`;
  const undone = results.filter((r) => r.outcome.type !== "succeeded");
  if (undone.length === 0) {
    return { type: "succeeded", response: { message: "every provider order of the order was cancelled", data: results.map((r) => ({ svc_order_id: r.svc, response: "response" in r.outcome ? r.outcome.response : null })) } };
  }
  const error = undone.map(named).join("; ");
  const retries = undone.flatMap((r) => (r.outcome.type === "retry" ? [r.outcome] : []));
  if (retries.length > 0) {
    const afters = retries.flatMap((r) => (r.afterMs === undefined ? [] : [r.afterMs]));
    return { type: "retry", error, afterMs: afters.length > 0 ? Math.max(...afters) : undefined, unknown: retries.some((r) => r.unknown) };
  }
  return {
    type: "failed",
    error,
    known: undone.every((r) => r.outcome.type === "failed" && r.outcome.known === true),
    unknown: undone.some((r) => r.outcome.type === "failed" && r.outcome.unknown === true),
  };
}

/**
 * The call's authorization in hand before its "sending" mark (an OAuth exchange, when the
 * client has no live token): null, or the outcome of a failed exchange, which sent nothing
 * (a "token" stage error: retried, never "outcome unknown").
 */
async function authorize(provider: ProviderClient): Promise<Outcome | null> {
  try {
    await provider.authorize();
    return null;
  } catch (err) {
    return classify(err);
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

/** `jobId`: the graphile-worker job running it (absent when called outside a job). */
export async function executeCommand(deps: ExecuteDeps, commandId: number, jobId?: string): Promise<void> {
  const loaded = await commandWithOrder(deps.sql, commandId);
  if (!loaded || loaded.command.state !== "pending") return;
  const { command, order } = loaded;
  const log = deps.log.child({ commandId, kind: command.kind, orderId: order.id });
  // A job a worker held when its order's rows merged (moveCommands leaves held jobs alone)
  // is still in the merged-away row's queue, where it would run beside the survivor's
  // commands: it is queued again in the survivor's queue, and this run ends.
  if (jobId !== undefined && (await queueOfJob(deps.sql, jobId)) !== orderQueue(order.id)) {
    log.info({ queue: orderQueue(order.id) }, "the command moved to another order (its rows merged): handed over to that order's queue");
    await enqueueCommand(deps.sql, command.id);
    return;
  }
  // In the order accepted: behind the order's earlier commands still pending (a retry's
  // job waits for its run_at while this one's is due). A place is not held back: the
  // others wait for it (notReady), and one waiting behind them would never run. Nor is a
  // cancel: an edit's retry can be minutes away (a Retry-After, a backoff up to 10
  // minutes), and a cancel held back that long may reach the provider after the rider
  // picked the order up. What it overtakes is moot once the order is cancelled (refused).
  if (command.kind !== "place" && command.kind !== "cancel") {
    const earlier = await earlierPending(deps.sql, order.id, command.id);
    if (earlier.stranded.length > 0) log.warn({ stranded: earlier.stranded }, "earlier commands are pending without a job; not waiting for them");
    if (earlier.runAfter !== null) {
      // Strictly after the last of them: a queue runs its due jobs by run_at.
      const runAt = new Date(Math.max(earlier.runAfter.getTime(), Date.now()) + 1);
      log.debug({ behind: earlier.ids, runAt }, "waiting behind the order's earlier commands");
      await enqueueCommand(deps.sql, command.id, runAt);
      return;
    }
  }
  if (!deps.provider) {
    await finish(deps, command, order, { type: "failed", error: "no provider configured (PROVIDER_BASE_URL)" });
    return;
  }
  const unknownBefore = command.outcome_unknown;
  const outcome = await attempt(deps, deps.provider, command, order, unknownBefore);
  if (outcome.type === "ended") {
    log.warn("another run of this command is sending it or ended it; not sent again");
    return;
  }
  if (outcome.type === "wait") {
    // From when this round of the command began (updated_at: recorded, or retried by hand),
    // or when the order became placed, if later: a command that waited long for a pending
    // place (retried through an outage) has waited for the link only since then.
    if (order.placement_state === "placed" && Date.now() - (await linkWaitSince(deps.sql, command, order.id)) > LINK_WAIT_MAX_MS) {
      const error = `not sent: the order is placed but its provider id has not reached it in ${LINK_WAIT_MAX_MS / 60_000} minutes (its projection may be failing: see the worker's log); retry this command once it has`;
      await finish(deps, command, order, { type: "failed", error });
      log.warn({ error }, "command failed");
      return;
    }
    await enqueueCommand(deps.sql, command.id, new Date(Date.now() + WAIT_MS));
    return;
  }
  const attempts = command.attempts + 1;
  // A failed attempt that may have taken effect (a 303, not retried) counts as one whose answer was lost.
  const outcomeUnknown = unknownBefore || ((outcome.type === "retry" || outcome.type === "failed") && outcome.unknown === true) || outcome.type === "unconfirmed";
  if (outcome.type === "retry" && attempts < deps.maxAttempts) {
    const delay = Math.max(Math.min(outcome.afterMs ?? 0, MAX_RETRY_AFTER_MS), backoffMs(attempts, deps.retryBaseMs));
    log.warn({ attempts, delayMs: delay, error: outcome.error }, "provider call failed; will retry");
    await deps.sql.begin(async (tx) => {
      if (sameRound(await lockCommand(tx, command.id), command)) await recordRetry(tx, { id: command.id, attempts, error: outcome.error, outcomeUnknown, delayMs: delay });
    });
    return;
  }
  let final: Outcome = outcome.type === "retry" ? { type: "failed", error: `gave up after ${attempts} attempts: ${outcome.error}` } : outcome;
  if (command.kind === "place" && outcomeUnknown && final.type === "failed") {
    // An attempt may have reached the provider (possible here only with
    // PROVIDER_DEDUPES_ORDERS): whatever came after it, giving up or a refusal that does
    // not name the order, the provider may have created the order all the same.
    const error = outcome.type === "failed" ? `an earlier attempt's outcome is unknown, then refused: ${final.error}` : final.error;
    final = { type: "unconfirmed", error };
  } else if (command.kind !== "place" && outcomeUnknown && final.type === "failed" && final.known !== true) {
    final = { type: "failed", error: unknownFirst(final.error) };
  }
  await finish(deps, { ...command, attempts, outcome_unknown: outcomeUnknown }, order, final);
  // Out of attempts on failures that might have passed (the provider down, 5xx, timeouts
  // for hours): trouble for whoever is paged on errors. A refusal (4xx, "Failure") is the
  // provider's answer about this order: a warning, shown on the command.
  if (final.type === "failed") log[outcome.type === "retry" ? "error" : "warn"]({ attempts, error: final.error }, "command failed");
  else if (final.type === "unconfirmed") log.warn({ attempts, error: final.error }, "placement unconfirmed: the provider may have created the order");
  else log.info({ attempts }, "command succeeded");
}

/** Since when (epoch ms) a command has waited for its placed order's provider id (LINK_WAIT_MAX_MS). */
async function linkWaitSince(sql: Sql, command: CommandRow, orderId: number): Promise<number> {
  const placedAt = await lastPlacedAt(sql, orderId);
  return Math.max(command.updated_at.getTime(), placedAt?.getTime() ?? 0);
}

/**
 * How a command that nothing will run again ends, where a person sees it. A place whose
 * sending mark is set may have reached the provider: `unconfirmed`. Anything else:
 * `failed`, which POST /v1/commands/{id}/retry can send again once the cause is fixed.
 */
function abandoned(command: CommandRow, why: string): Outcome {
  if (!command.outcome_unknown) return { type: "failed", error: why };
  return command.kind === "place" ? { type: "unconfirmed", error: `outcome unknown, not re-sent: ${why}` } : { type: "failed", error: unknownFirst(why) };
}

/**
 * The error of a command other than a place that ends failed after an attempt that may
 * have reached the provider (its answer lost): that attempt may have taken effect (an edit
 * applied, a cancel done) all the same, so "failed" must not read as "not done". The
 * console shows the same as "(outcome unknown)".
 */
export function unknownFirst(error: string): string {
  return `outcome unknown: an attempt whose answer was lost may have taken effect at the provider; then ${error}`;
}

/**
 * The command's job threw on a run graphile-worker will not repeat (an error inside
 * tracklane, not the provider's answer): rather than stay pending with no job, the
 * command ends (`abandoned`). False when it was no longer pending.
 */
export async function abandonCommand(deps: Pick<ExecuteDeps, "sql" | "log" | "metrics">, commandId: number, err: unknown, runs: number): Promise<boolean> {
  const loaded = await commandWithOrder(deps.sql, commandId);
  if (!loaded || loaded.command.state !== "pending") return false;
  const { command, order } = loaded;
  // The error itself goes to the log only: last_error is shown by the API and sent in
  // command.failed notifications, and an internal error's text can name hosts, tables or
  // values. Its kind and SQLSTATE say enough to find it there.
  const code: unknown = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  const kind = `${err instanceof Error ? err.name : typeof err}${typeof code === "string" ? `, ${code}` : ""}`;
  const outcome = abandoned(command, `gave up after ${runs} runs that failed inside tracklane (${kind}); the worker's log has the error`);
  await finish(deps, command, order, outcome);
  deps.log.error({ err, commandId, kind: command.kind, orderId: order.id, runs }, `command abandoned: ${outcome.type}`);
  return true;
}

/** Pending commands left unchanged this long, with no job to run them, are stranded. */
export const STRANDED_GRACE_S = 300;
const STRANDED_BATCH = 100;

/**
 * Ends the pending commands that nothing will run again (lockStranded): the last attempt
 * of their job failed and so did recording their end, a worker died during that attempt,
 * or the job was removed. Each ends as `abandoned` says, in one transaction per batch.
 * How many ended.
 */
export async function abandonStranded(deps: Pick<ExecuteDeps, "sql" | "log" | "metrics">, graceS = STRANDED_GRACE_S): Promise<number> {
  let total = 0;
  for (;;) {
    const ended = await deps.sql.begin(async (tx) => {
      const ids = await lockStranded(tx, graceS, STRANDED_BATCH);
      const ends: { kind: CommandRow["kind"]; outcome: "succeeded" | "failed" | "unconfirmed" }[] = [];
      for (const id of ids) {
        const { command, order } = (await commandWithOrder(tx, id))!;
        const outcome = abandoned(command, "gave up: its job ended, or was removed, with the command still pending (the worker's log may say why)");
        const end = await finishIn(tx, command, order, outcome);
        if (end !== null) ends.push({ kind: command.kind, outcome: end });
        deps.log.warn({ commandId: id, kind: command.kind, orderId: order.id, outcome: outcome.type }, "stranded command ended");
      }
      return { n: ids.length, ends };
    });
    for (const end of ended.ends) deps.metrics?.commands.inc(end);
    total += ended.n;
    if (ended.n < STRANDED_BATCH) return total;
  }
}

/** command.failed, with the command and its order as the API shows them, in the transaction that fails it. */
async function notifyFailed(tx: TransactionSql, commandId: number): Promise<void> {
  const row = await commandById(tx, commandId);
  const order = row && (await findOrderById(tx, row.order_id));
  if (!row || !order) return;
  await recordMessage(tx, {
    type: "command.failed",
    order: { id: order.id, client_order_id: order.client_order_id, svc_order_id: order.svc_order_id },
    data: { command: { ...commandJson(row) }, order: { ...orderJson(order) } },
  });
}

async function finish(deps: Pick<ExecuteDeps, "sql" | "metrics">, command: CommandRow, order: OrderState, outcome: Outcome): Promise<void> {
  const ended = await deps.sql.begin((tx) => finishIn(tx, command, order, outcome));
  if (ended !== null) deps.metrics?.commands.inc({ kind: command.kind, outcome: ended });
}

/**
 * Whether the command, locked now, is still pending in the round this run read: its
 * updated_at moves only when a round ends, retries (recordRetry) or is retried by hand
 * (requeue), never while a run's call is out.
 */
function sameRound(now: CommandRow | undefined, read: CommandRow): boolean {
  return now?.state === "pending" && now.updated_at.getTime() === read.updated_at.getTime();
}

/** Records the command's end; how it ended, or null when another run had ended it. */
async function finishIn(tx: TransactionSql, command: CommandRow, order: OrderState, outcome: Outcome): Promise<"succeeded" | "failed" | "unconfirmed" | null> {
  // A place changes its order too: the order first, then the command, whatever the
  // outcome (as below, and as confirmPlacement and retryPlacement lock them), so that two
  // runs of one place ending at once wait for each other rather than deadlock.
  const locked = command.kind === "place" ? await lockOrder(tx, order.id) : undefined;
  // A command no longer pending has ended, and its end stands: this run records (and counts)
  // nothing. Another run of the same command ended it (two runs ending at once: a job
  // unlocked under a runner that still runs it wait here for each other's row lock), or a
  // place was withdrawn while this run got no further than its OAuth token (a cancel
  // accepted before it reached the provider, service.ts). A command other than a place
  // locks only its own row here.
  // Nor does a run whose round was overtaken: while its call was out, the command ended (a
  // second run of it) and a person retried it (POST /v1/commands/{id}/retry): that retry's
  // own run records the new round's outcome, and this stale answer would end it unsent.
  if (!sameRound(await lockCommand(tx, command.id), command)) return null;
  const placed = outcome.type === "succeeded" && command.kind === "place" ? placedData.parse(outcome.response).data : undefined;
  if (placed) {
    // An answer naming another client order's provider id (the provider's mistake, or its
    // refusal of a duplicate that matched the wrong order) is not this order's: linked, the
    // projection would merge the two orders. The provider may have made this one, under an
    // id it has not told us: unconfirmed, for a person to look up and confirm.
    const owner = await findOrderHolding(tx, placed.svc_order_id);
    if (owner && belongsToAnother(owner, order)) {
      const error = `the provider answered with another order's id: ${heldBy(owner, placed.svc_order_id, order)}; not linked. Find this order at the provider and confirm it with its own id`;
      command = { ...command, outcome_unknown: true };
      outcome = { type: "unconfirmed", error };
    }
  }
  if (outcome.type === "succeeded") {
    await recordSucceeded(tx, command.id, command.attempts, outcome.response);
    if (placed) {
      await recordAccepted(tx, order.id, placed.svc_order_id, placed.track_url ?? null);
      await appendTracklaneEvent(
        tx,
        { client_order_id: order.client_order_id, svc_order_id: placed.svc_order_id, track_url: placed.track_url ?? null, tracklane: "accepted by the provider", command_id: command.id },
        new Date(),
      );
    }
  } else if (outcome.type === "failed" || outcome.type === "unconfirmed") {
    // Evidence may have arrived while this attempt was out: the provider's callback named
    // the order with its id. Then the provider has it, whatever this attempt's answer.
    const named = locked?.svc_order_id ?? null;
    if (named !== null) {
      const message = `the provider's event named the order (this attempt: ${outcome.error})`;
      await recordSucceeded(tx, command.id, command.attempts, { message, data: { svc_order_id: named } });
      await recordPlaced(tx, order.id);
      return "succeeded";
    }
    await recordFailed(tx, command.id, command.attempts, outcome.error, command.outcome_unknown);
    if (command.kind === "place") await recordPlacementEnded(tx, order.id, outcome.type, outcome.error);
    if (outcome.type === "failed") await notifyFailed(tx, command.id);
    return outcome.type;
  }
  return outcome.type === "succeeded" ? "succeeded" : null;
}
