/**
 * The one owner of the `commands` table: recording, queueing, settling and listing the
 * commands tracklane carries out at the provider. Enqueueing is SQL (graphile-worker's
 * add_job) so that a command and its job commit together.
 */
import type { TransactionSql } from "postgres";
import type { Tx } from "../db/client.ts";
import { jsonLines } from "../db/columns.ts";
import { pageOf } from "../db/page.ts";
import type { commands } from "../db/schema/index.ts";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { TERMINAL_STATUSES } from "../domain/statuses.ts";

export const COMMAND_KINDS = ["place", "edit", "cancel", "dispatch_ready", "stop_reattempt", "confirm_placement"] as const;
export type CommandKind = (typeof COMMAND_KINDS)[number];
export const COMMAND_STATES = ["pending", "succeeded", "failed"] as const;

export type CommandRow = typeof commands.$inferSelect;
/** A command as the API lists it. */
export type CommandSummary = Pick<CommandRow, "id" | "kind" | "state" | "attempts" | "last_error" | "created_at" | "completed_at">;
export type CommandListRow = CommandSummary & Pick<CommandRow, "order_id"> & { client_order_id: string | null; svc_order_id: string | null };

export const COMMAND_TASK = "command__execute";

/**
 * Commands of one order share one queue, so no two of them run at once. The queue alone
 * does not keep them in order: a command waiting for its retry has its job's run_at in the
 * future, and a later command's job would run first. executeCommand keeps the order: a
 * command other than a place does not run while an earlier one of its order is pending
 * (earlierPending).
 *
 * When rows of one order merge, their commands follow the survivor, and so do their jobs
 * (moveCommands): a job is always queued under the order its command belongs to now
 * (enqueueCommand reads it from the command's row), never the order it had when the run
 * that queues it began.
 */
const ORDER_QUEUE_PREFIX = "order:";
export const orderQueue = (orderId: number) => `${ORDER_QUEUE_PREFIX}${orderId}`;

const jobKey = (commandId: number) => `command:${commandId}`;

/** The command's job (replacing a waiting one), in the queue of the order the command belongs to now (orderQueue). */
export async function enqueueCommand(tx: Tx, commandId: number, runAt?: Date): Promise<void> {
  await tx`
    select graphile_worker.add_job(${COMMAND_TASK}, json_build_object('command_id', ${commandId}::bigint),
      queue_name => (select ${ORDER_QUEUE_PREFIX}::text || order_id from commands where id = ${commandId}), -- orderQueue
      job_key => ${jobKey(commandId)}, run_at => coalesce(${runAt ?? null}::timestamptz, now()))`;
}

/**
 * The queue of the job running now (its id from graphile-worker), or null when it has
 * none. A job taken before its command moved to another order (its rows merged) still
 * names the old order's queue: executeCommand hands it over instead of running it there.
 */
export async function queueOfJob(tx: Tx, jobId: string): Promise<string | null> {
  const [row] = await tx<{ queue_name: string | null }[]>`select queue_name from graphile_worker.jobs where id = ${jobId}::bigint`;
  return row?.queue_name ?? null;
}

/** sha256 of the canonical request: a repeated place with the same body is the same command. */
export const requestHash = (request: JsonObject) => sha256Hex(canonicalJson(request));

/**
 * The order's commands accepted before `commandId` that are still pending (a retry or a
 * wait ahead of them), and when the last of their jobs runs next: the command that asks
 * runs after that. A pending command whose job is gone or out of attempts (it threw until
 * graphile-worker gave up) never runs again, so nothing waits behind it: it is left out
 * and named in `stranded` for the log. Served by commands_order_id_idx, and the jobs'
 * unique key.
 */
export async function earlierPending(
  tx: Tx,
  orderId: number,
  commandId: number,
): Promise<{ ids: number[]; runAfter: Date | null; stranded: number[] }> {
  const rows = await tx<{ id: number; run_at: Date | null }[]>`
    select c.id, j.run_at
    from commands c
    left join graphile_worker.jobs j on j.key = 'command:' || c.id and j.attempts < j.max_attempts -- jobKey
    where c.order_id = ${orderId} and c.id < ${commandId} and c.state = 'pending'
    order by c.id`;
  const waiting = rows.filter((r) => r.run_at !== null);
  const last = waiting.reduce<Date | null>((max, r) => (max === null || r.run_at! > max ? r.run_at : max), null);
  return {
    ids: waiting.map((r) => r.id),
    runAfter: last,
    stranded: rows.filter((r) => r.run_at === null).map((r) => r.id),
  };
}

/**
 * Pending commands that nothing will run again, locked with their orders (skipping any
 * whose command or order another transaction holds: their end locks the order, and
 * waiting for it while holding the command would deadlock with whoever holds the order
 * and comes for the command, the projection or a retry): their job is gone, or out of
 * attempts and not running. Left so when the last
 * attempt failed and recording the command's end failed too (the database down at that
 * moment), when a worker died during the last attempt (its job unlocked with no attempt
 * left), or when someone removed the job. Only commands unchanged for `graceS` seconds.
 * Served by commands_pending_idx, and the jobs' unique key.
 */
export async function lockStranded(tx: Tx, graceS: number, limit: number): Promise<number[]> {
  const rows = await tx<{ id: number }[]>`
    select c.id from commands c
    join orders o on o.id = c.order_id
    left join graphile_worker.jobs j on j.key = 'command:' || c.id -- jobKey
    where c.state = 'pending' and c.updated_at < now() - ${graceS}::int * interval '1 second'
      and (j.id is null or (j.attempts >= j.max_attempts and j.locked_at is null))
    order by c.id
    limit ${limit}
    for update of o, c skip locked`;
  return rows.map((r) => r.id);
}

/** A new pending command and its job. */
export async function insertCommand(tx: TransactionSql, orderId: number, kind: CommandKind, request: JsonObject): Promise<number> {
  const [row] = await tx<{ id: number }[]>`
    insert into commands (order_id, kind, request, request_hash)
    values (${orderId}, ${kind}, ${JSON.stringify(request)}::text::jsonb, ${requestHash(request)})
    returning id`;
  await enqueueCommand(tx, row!.id);
  return row!.id;
}

/** The oldest command of `kind` still pending for the order, if any. */
export async function pendingCommandOf(tx: Tx, orderId: number, kind: CommandKind): Promise<number | undefined> {
  const [row] = await tx<{ id: number }[]>`
    select id from commands where order_id = ${orderId} and kind = ${kind} and state = 'pending' order by id limit 1`;
  return row?.id;
}

/**
 * The order's pending place, locked, when no place of the order can have reached the
 * provider: the pending one not marked as sending (a run that sets the mark after this
 * lock finds it no longer pending, and sends nothing: markSending), and no other place or
 * confirmation that succeeded or whose outcome is unknown. Undefined otherwise. Served by
 * commands_order_id_idx.
 */
export async function lockUnsentPlace(tx: TransactionSql, orderId: number): Promise<{ id: number; attempts: number } | undefined> {
  const [pending] = await tx<{ id: number; attempts: number; outcome_unknown: boolean }[]>`
    select id, attempts, outcome_unknown from commands
    where order_id = ${orderId} and kind = 'place' and state = 'pending'
    order by id limit 1
    for update`;
  if (!pending || pending.outcome_unknown) return undefined;
  const [reached] = await tx<{ id: number }[]>`
    select id from commands
    where order_id = ${orderId} and kind in ('place', 'confirm_placement') and (outcome_unknown or state = 'succeeded')
    limit 1`;
  return reached ? undefined : { id: pending.id, attempts: pending.attempts };
}

/** A command that succeeds as it is recorded (a placement confirmed by hand). */
export async function insertSucceeded(tx: TransactionSql, orderId: number, kind: CommandKind, request: JsonObject, response: unknown): Promise<number> {
  const [row] = await tx<{ id: number }[]>`
    insert into commands (order_id, kind, state, request, request_hash, response, completed_at)
    values (${orderId}, ${kind}, 'succeeded', ${JSON.stringify(request)}::text::jsonb, ${requestHash(request)},
            ${JSON.stringify(response)}::text::jsonb, now())
    returning id`;
  return row!.id;
}

/** The order known by this client_order_id, and the request hash of its (first) place command, if any. */
export async function placeOf(tx: Tx, clientOrderId: string): Promise<{ order_id: number; place_hash: string | null } | undefined> {
  const [row] = await tx<{ order_id: number; place_hash: string | null }[]>`
    select o.id as order_id, c.request_hash as place_hash
    from orders o left join commands c on c.order_id = o.id and c.kind = 'place'
    where o.client_order_id = ${clientOrderId}
    order by c.id limit 1`;
  return row;
}

/** The order's latest place or confirmation that succeeded. */
export async function lastPlacement(tx: Tx, orderId: number): Promise<number | undefined> {
  const [row] = await tx<{ id: number }[]>`
    select id from commands where order_id = ${orderId} and kind in ('place', 'confirm_placement') and state = 'succeeded'
    order by id desc limit 1`;
  return row?.id;
}

/**
 * When the order's latest place or confirmation succeeded: when it became placed. Served
 * by commands_order_id_idx.
 */
export async function lastPlacedAt(tx: Tx, orderId: number): Promise<Date | null> {
  const [row] = await tx<{ completed_at: Date | null }[]>`
    select completed_at from commands where order_id = ${orderId} and kind in ('place', 'confirm_placement') and state = 'succeeded'
    order by id desc limit 1`;
  return row?.completed_at ?? null;
}

/** The body of the order's first place command. */
export async function firstPlaceRequest(tx: Tx, orderId: number): Promise<JsonObject | undefined> {
  const [row] = await tx<{ request: JsonObject }[]>`
    select request from commands where order_id = ${orderId} and kind = 'place' order by id limit 1`;
  return row?.request;
}

export async function commandById(tx: Tx, id: number): Promise<CommandRow | undefined> {
  const [row] = await tx<CommandRow[]>`select * from commands where id = ${id}`;
  return row;
}

/**
 * The latest command of this kind on the order, accepted after `commandId`, that
 * succeeded: an edit sent again after it would undo it at the provider. Null when none.
 */
export async function laterSucceeded(tx: Tx, orderId: number, commandId: number, kind: string): Promise<number | null> {
  const [row] = await tx<{ id: number }[]>`
    select id from commands
    where order_id = ${orderId} and id > ${commandId} and kind = ${kind} and state = 'succeeded'
    order by id desc limit 1`;
  return row?.id ?? null;
}

/** The command, locked for the rest of the transaction. */
export async function lockCommand(tx: TransactionSql, id: number): Promise<CommandRow | undefined> {
  const [row] = await tx<CommandRow[]>`select * from commands where id = ${id} for update`;
  return row;
}

/** A failed command back to pending for a new round (attempts from 0; last_error kept), and its job. */
export async function requeue(tx: TransactionSql, id: number): Promise<void> {
  await tx`update commands set state = 'pending', attempts = 0, completed_at = null, updated_at = now() where id = ${id}`;
  await enqueueCommand(tx, id);
}

/**
 * The "sending" mark, durable before a call whose outcome could be lost. Also the claim
 * of the attempt: false when the command is no longer pending, or (unless `again`, for a
 * command that may be sent after an attempt of unknown outcome) when the mark is already
 * set, by another run of the same command that is sending it now or died doing so.
 */
export async function markSending(tx: Tx, id: number, again: boolean): Promise<boolean> {
  const rows = await tx`
    update commands set outcome_unknown = true
    where id = ${id} and state = 'pending' ${again ? tx`` : tx`and not outcome_unknown`}
    returning id`;
  return rows.length > 0;
}

/**
 * After a restore of an older backup (`npm run migrate -- --after-restore`): every command
 * still pending in it may have been sent since the backup was taken, its outcome lost with
 * what came after. Each gets the sending mark, as if its run had died during the call: a
 * place then ends `unconfirmed` instead of being sent again (a provider that takes a repeated
 * client_order_id would make a second order), unless PROVIDER_DEDUPES_ORDERS; the others are
 * sent again, and a refusal reads "outcome unknown" rather than "not done". The marked ones.
 */
export async function markPendingMaybeSent(tx: Tx): Promise<{ id: number; kind: string; order_id: number }[]> {
  return await tx<{ id: number; kind: string; order_id: number }[]>`
    update commands set outcome_unknown = true
    where state = 'pending' and not outcome_unknown
    returning id, kind, order_id`;
}

/**
 * An attempt failed and the command runs again after `delayMs`; nothing when it is no
 * longer pending (a place withdrawn by a cancel while its run fetched an OAuth token).
 */
export async function recordRetry(tx: TransactionSql, c: { id: number; attempts: number; error: string; outcomeUnknown: boolean; delayMs: number }): Promise<void> {
  const rows = await tx`
    update commands set attempts = ${c.attempts}, last_error = ${c.error}, outcome_unknown = ${c.outcomeUnknown}, updated_at = now()
    where id = ${c.id} and state = 'pending'
    returning id`;
  if (rows.length > 0) await enqueueCommand(tx, c.id, new Date(Date.now() + c.delayMs));
}

export async function recordSucceeded(tx: TransactionSql, id: number, attempts: number, response: unknown): Promise<void> {
  await tx`
    update commands set state = 'succeeded', attempts = ${attempts}, response = ${JSON.stringify(response ?? null)}::text::jsonb,
      last_error = null, outcome_unknown = false, completed_at = now(), updated_at = now()
    where id = ${id}`;
}

export async function recordFailed(tx: TransactionSql, id: number, attempts: number, error: string, outcomeUnknown: boolean): Promise<void> {
  await tx`
    update commands set state = 'failed', attempts = ${attempts}, last_error = ${error},
      outcome_unknown = ${outcomeUnknown}, completed_at = now(), updated_at = now()
    where id = ${id}`;
}

/**
 * The provider is known to have these orders (an event named them, or a person confirmed
 * one): every failed `place` of theirs did reach it after all, so each ends `succeeded`
 * with `message` and the order's ids. Run after the order rows hold the id.
 */
export async function succeedFailedPlaces(tx: Tx, orderIds: readonly number[], message: string): Promise<void> {
  if (orderIds.length === 0) return;
  await tx`
    update commands c set state = 'succeeded', last_error = null, completed_at = now(), updated_at = now(),
      response = jsonb_build_object('message', ${message}::text,
        'data', jsonb_build_object('svc_order_id', o.svc_order_id, 'track_url', o.track_url))
    from orders o
    where o.id = c.order_id and c.order_id = any(${orderIds as number[]}::bigint[])
      and c.kind = 'place' and c.state = 'failed'`;
}

/**
 * Order rows merged into one: their commands follow the survivor, and so do their waiting
 * jobs, into the survivor's queue, keeping when they run and the attempts they have left
 * (add_job again with the job's key: graphile-worker's way to change a waiting job).
 * Otherwise a moved command's job would run in the old order's queue, beside the
 * survivor's commands instead of one at a time with them.
 *
 * Only jobs no worker holds: add_job on a locked job (running, or fetched into a worker's
 * local queue) would take its key and its retries away and queue a second job beside it.
 * They are locked here first, so no worker takes one meanwhile (workers skip locked jobs).
 * A job a worker already held hands itself over when it runs (executeCommand), and a run
 * already under way queues its next run in the survivor's queue (enqueueCommand). Jobs out
 * of attempts are left to the sweep (abandonStranded).
 */
export async function moveCommands(tx: TransactionSql, fromOrderIds: readonly number[], toOrderId: number): Promise<void> {
  const moved = await tx<{ id: number }[]>`
    update commands set order_id = ${toOrderId} where order_id = any(${fromOrderIds as number[]}::bigint[]) returning id`;
  if (moved.length === 0) return;
  // graphile-worker's own table, read and row-locked only: its jobs view cannot be locked.
  const jobs = await tx<{ key: string; payload: string; run_at: Date; left: number; priority: number }[]>`
    select key, payload::text as payload, run_at, max_attempts - attempts as left, priority
    from graphile_worker._private_jobs
    where key = any(${moved.map((c) => jobKey(c.id))}::text[]) and locked_at is null and attempts < max_attempts
    order by id
    for update`;
  for (const j of jobs) {
    await tx`
      select graphile_worker.add_job(${COMMAND_TASK}, ${j.payload}::text::json, queue_name => ${orderQueue(toOrderId)},
        run_at => ${j.run_at}::timestamptz, max_attempts => ${j.left}::int, job_key => ${j.key}, priority => ${j.priority}::int)`;
  }
}

/** The order's commands, oldest first. */
export async function commandsOf(tx: Tx, orderId: number): Promise<CommandSummary[]> {
  return await tx<CommandSummary[]>`
    select id, kind, state, attempts, last_error, created_at, completed_at from commands where order_id = ${orderId} order by id`;
}

/** A command as a person checking on it wants it: with the provider's last answer and whether its outcome is unknown. */
export type CommandWithAnswer = CommandSummary & Pick<CommandRow, "response" | "outcome_unknown">;

/** The order's commands, newest first, with their answers. */
export async function commandsWithAnswersOf(tx: Tx, orderId: number): Promise<CommandWithAnswer[]> {
  return await tx<CommandWithAnswer[]>`
    select id, kind, state, attempts, last_error, response, outcome_unknown, created_at, completed_at
    from commands where order_id = ${orderId} order by id desc`;
}

/**
 * Commands of every order, newest first (by id: a backward scan of the primary key, so no
 * index of its own; the filters are checked on the way). With state failed:
 * commands_failed_idx, which holds only those, in this order.
 */
export async function listCommands(
  tx: Tx,
  f: {
    state?: string | undefined;
    kind?: string | undefined;
    limit: number;
    beforeId?: number | undefined;
    /**
     * Leave out what a person cannot send again from here: places whose outcome is unknown
     * (their order's unconfirmed placement is what a person resolves), and places of an
     * order already finished (a cancel withdrew the place before it was sent: retrying it
     * is refused).
     */
    retryableOnly?: boolean;
    /** Only commands completed after this (microseconds since 1970). */
    completedAfterUs?: number;
  },
): Promise<{ rows: CommandListRow[]; nextId: number | null }> {
  const rows = await tx<CommandListRow[]>`
    select c.id, c.order_id, c.kind, c.state, c.attempts, c.last_error, c.created_at, c.completed_at, o.client_order_id, o.svc_order_id
    from commands c join orders o on o.id = c.order_id
    where true
      ${f.state !== undefined ? tx`and c.state = ${f.state}` : tx``}
      ${f.retryableOnly === true ? tx`and not (c.kind = 'place' and (c.outcome_unknown or o.status = any(${TERMINAL_STATUSES}))) and c.kind <> 'confirm_placement'` : tx``}
      ${f.kind !== undefined ? tx`and c.kind = ${f.kind}` : tx``}
      ${f.beforeId !== undefined ? tx`and c.id < ${f.beforeId}` : tx``}
      ${f.completedAfterUs !== undefined ? tx`and c.completed_at > ${completedAfter(tx, f.completedAfterUs)}` : tx``}
    order by c.id desc
    limit ${f.limit + 1}`;
  return pageOf(rows, f.limit);
}

/** Microseconds since 1970 as a timestamptz, exactly (a Date would keep milliseconds only). */
const completedAfter = (tx: Tx, us: number) => tx`'epoch'::timestamptz + ${us}::bigint * interval '1 microsecond'`;

/**
 * How many failed commands a retry could fix (places of unknown outcome, and places of an
 * order already finished, left out, as in listCommands' retryableOnly), counting no further than `cap` (commands_failed_idx).
 * With `completedAfterUs`, only those that failed after it (microseconds since 1970).
 */
export async function countFailedCommands(tx: Tx, cap: number, completedAfterUs = 0): Promise<number> {
  const [row] = await tx<{ n: number }[]>`
    select count(*)::int as n from (
      select 1 from commands c where state = 'failed' and not (kind = 'place' and outcome_unknown) and kind <> 'confirm_placement'
        and not (kind = 'place' and exists (select 1 from orders o where o.id = c.order_id and o.status = any(${TERMINAL_STATUSES})))
        ${completedAfterUs > 0 ? tx`and completed_at > ${completedAfter(tx, completedAfterUs)}` : tx``}
      limit ${cap}) s`;
  return row?.n ?? 0;
}

/**
 * The order as a run of one of its commands reads it: `svc_order_ids` too, every provider
 * order known for it (two when the provider duplicated it), which a cancel is sent to.
 */
export interface CommandOrder {
  id: number;
  client_order_id: string | null;
  svc_order_id: string | null;
  svc_order_ids: string[];
  status: string | null;
  placement_state: string;
}

/** A command with the state of its order, as a run of the command needs them. */
export async function commandWithOrder(tx: Tx, id: number): Promise<{ command: CommandRow; order: CommandOrder } | undefined> {
  const [row] = await tx<
    (CommandRow & { o_client_order_id: string | null; o_svc_order_id: string | null; o_svc_order_ids: string[]; o_status: string | null; o_placement_state: string })[]
  >`
    select c.*, o.client_order_id as o_client_order_id, o.svc_order_id as o_svc_order_id, o.svc_order_ids as o_svc_order_ids,
           o.status as o_status, o.placement_state as o_placement_state
    from commands c join orders o on o.id = c.order_id
    where c.id = ${id}`;
  if (!row) return undefined;
  const { o_client_order_id, o_svc_order_id, o_svc_order_ids, o_status, o_placement_state, ...command } = row;
  return {
    command,
    order: {
      id: command.order_id,
      client_order_id: o_client_order_id,
      svc_order_id: o_svc_order_id,
      svc_order_ids: o_svc_order_ids,
      status: o_status,
      placement_state: o_placement_state,
    },
  };
}

/**
 * Retention: up to `batch` finished commands completed before `before` (commands_finished_idx).
 * Place commands stay: a repeated POST /v1/orders is recognised by their request's hash.
 */
export async function purgeFinishedCommands(tx: Tx, before: Date, batch: number): Promise<number> {
  const rows = await tx`
    delete from commands where id in (
      select id from commands where state <> 'pending' and kind <> 'place' and completed_at < ${before}
      order by completed_at limit ${batch})`;
  return rows.count;
}

/** What of a command can hold the customer's personal data: the request sent, the provider's answer, the error text. */
export interface CommandPersonalData {
  id: number;
  request: unknown;
  response: unknown;
  last_error: string | null;
}

/** The order's commands, locked (a run ending now would otherwise write its answer over the redaction, or be overwritten by it). */
export async function commandsForRedaction(tx: TransactionSql, orderId: number): Promise<CommandPersonalData[]> {
  return await tx<CommandPersonalData[]>`select id, request, response, last_error from commands where order_id = ${orderId} order by id for update`;
}

/** Commands with their personal data replaced (domain/redact.ts), marked redacted; the request hash stays. */
export async function writeRedactedCommands(tx: TransactionSql, changed: readonly CommandPersonalData[]): Promise<number> {
  if (changed.length === 0) return 0;
  const ids = changed.map((c) => c.id);
  await tx`
    update commands c set request = v.request, response = case when c.response is null then null else v.response end, last_error = v.last_error, redacted_at = now()
    from unnest(${ids}::bigint[],
                string_to_array(${jsonLines(changed.map((c) => JSON.stringify(c.request)))}::text, E'\n')::jsonb[],
                string_to_array(${jsonLines(changed.map((c) => JSON.stringify(c.response ?? null)))}::text, E'\n')::jsonb[],
                ${changed.map((c) => c.last_error) as string[]}::text[])
      as v(id, request, response, last_error)
    where c.id = v.id and c.id = any(${ids}::bigint[])`;
  return changed.length;
}
