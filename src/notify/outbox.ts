/**
 * The outbox: the one writer of notification_messages and of new deliveries. A message is
 * written in the transaction of the change it reports, with a delivery per subscribed
 * endpoint and that endpoint's delivery job: a committed change always has its messages,
 * and a rolled-back one has none.
 */
import type { Fragment } from "postgres";
import type { Tx } from "../db/client.ts";
import { columnOf, jsonLines } from "../db/columns.ts";
import type { JsonObject } from "../domain/normalise.ts";
import { canonicalStatus } from "../domain/statuses.ts";
import type { OrderChange } from "../orders/change.ts";
import { orderJson } from "../orders/json.ts";
import type { OrderJson, OrderJsonRow } from "../orders/json.ts";
import { ordersByIds } from "../orders/read.ts";
import { enabledEndpoints } from "./endpoints.ts";
import { firstMessageIdAt, newMessageId } from "./sign.ts";
import type { NotificationType } from "./types.ts";

export const DELIVER_TASK = "notify__deliver";

/**
 * The add_job call of an endpoint's delivery run, the one definition of its queue and key:
 * queue `notify:<endpoint>`; key `notify:<endpoint>` for a run now (waiting runs fold
 * into one), `notify:<endpoint>:<unix second>` for a run at `timedAt`. SQL, as the outbox
 * enqueues in the statement that writes the deliveries, for times only it knows.
 * `endpointId` (text) and `timedAt` (timestamptz, null for a run now) are SQL fragments.
 * `behind`: the run of an endpoint that gave its slot up (deliver.ts RUN_SLICE_MS), after
 * every other job due (priority 1; graphile-worker takes lower numbers first).
 */
export function deliveryJob(sql: Tx, endpointId: Fragment, timedAt: Fragment, behind = false): Fragment {
  return sql`graphile_worker.add_job(${DELIVER_TASK}, json_build_object('endpoint_id', ${endpointId}),
    queue_name => 'notify:' || ${endpointId},
    job_key => 'notify:' || ${endpointId} || coalesce(':' || floor(extract(epoch from ${timedAt}))::bigint, ''),
    run_at => coalesce(${timedAt}, now()),
    priority => ${behind ? 1 : 0}::int)`;
}

/** Process-wide settings, from the configuration at start (runtime/services.ts). */
const settings = { locationIntervalS: 30, firstAttemptDelayS: 0 };

/**
 * NOTIFY_LOCATION_INTERVAL_S: at most one order.rider_location per order per this many
 * seconds; 0: none. NOTIFY_RETRY_SCHEDULE: its first entry is the delay before a new
 * message's first attempt (the rest, before each retry, the delivery run applies).
 */
export function configureOutbox(options: { locationIntervalS: number; retryScheduleS: readonly number[] }): void {
  settings.locationIntervalS = options.locationIntervalS;
  settings.firstAttemptDelayS = options.retryScheduleS[0] ?? 0;
}

interface Endpoint {
  id: string;
  events: string[];
}

/** Does the endpoint want messages of this type? (An empty list of events: every type.) */
export const subscribes = (e: Endpoint, type: string) => e.events.length === 0 || e.events.includes(type);

/** A message to write: its type, the order it is about (if any), and its `data`. */
export interface Draft {
  type: NotificationType;
  order?: { id: number; client_order_id: string | null; svc_order_id: string | null } | undefined;
  data: JsonObject;
  /** Only this endpoint (a test ping); otherwise every subscribed one. */
  endpointId?: string | undefined;
}

/** The order messages a change calls for, in the order they are numbered. */
function typesOf(c: OrderChange): NotificationType[] {
  const types: NotificationType[] = [];
  if (c.status.after !== c.status.before) types.push("order.status_changed");
  if (c.placement.after !== c.placement.before) types.push("order.placement_changed");
  if (c.riderId.after !== null && c.riderId.after !== c.riderId.before) types.push("order.rider_assigned");
  const moved = c.locationAt.after !== null && c.locationAt.after.getTime() !== c.locationAt.before?.getTime();
  if (moved && settings.locationIntervalS > 0) types.push("order.rider_location");
  return types;
}

/**
 * The messages these order changes call for, for the endpoints subscribed to them: one
 * cheap read of the (few) enabled endpoints when nobody listens, none when the writer
 * read them (enabledEndpoints) in this transaction already. `sequence` grows by one per
 * message about an order; a rider location goes out at most once per interval.
 */
export async function recordOrderChanges(tx: Tx, changes: readonly OrderChange[], endpoints?: readonly Endpoint[]): Promise<void> {
  const wanted = changes.flatMap((c) => typesOf(c).map((type) => ({ c, type })));
  if (wanted.length === 0) return;
  endpoints ??= await enabledEndpoints(tx);
  const heard = wanted.filter((w) => endpoints.some((e) => subscribes(e, w.type)));
  if (heard.length === 0) return;
  const ids = [...new Set(heard.map((w) => w.c.orderId))];
  const located = [...new Set(heard.filter((w) => w.type === "order.rider_location").map((w) => w.c.orderId))];
  // The projection's write returned its rows; other writers' orders are read here.
  const written = new Map<number, OrderJsonRow>();
  for (const w of heard) if (w.c.row) written.set(w.c.orderId, w.c.row);
  const [read, last] = await Promise.all([ordersByIds(tx, ids.filter((id) => !written.has(id))), lastMessages(tx, ids, located)]);
  const rows = [...written.values(), ...read];
  const orders = new Map(rows.map((r) => [r.id, orderJson(r)]));
  const rowsById = new Map(rows.map((r) => [r.id, r]));
  const cutoff = Date.now() - settings.locationIntervalS * 1000;
  const drafts: (Draft & { sequence: number })[] = [];
  for (const { c, type } of heard) {
    const order = orders.get(c.orderId);
    const row = rowsById.get(c.orderId);
    if (!order || !row) continue; // merged away in this transaction: the survivor reports
    const seen = last.get(c.orderId) ?? { sequence: 0, locationAt: null };
    if (type === "order.rider_location") {
      if (seen.locationAt !== null && seen.locationAt.getTime() > cutoff) continue;
      seen.locationAt = new Date();
    }
    seen.sequence += 1;
    last.set(c.orderId, seen);
    drafts.push({
      type,
      order: { id: c.orderId, client_order_id: row.client_order_id, svc_order_id: row.svc_order_id },
      data: orderData(type, order, c, seen.sequence),
      sequence: seen.sequence,
    });
  }
  await insertMessages(tx, drafts);
}

function orderData(type: NotificationType, order: OrderJson, c: OrderChange, sequence: number): JsonObject {
  const json = order as unknown as JsonObject;
  if (type === "order.status_changed") return { order: json, previous_status: canonicalStatus(c.status.before), sequence };
  if (type === "order.placement_changed") return { order: json, previous_state: c.placement.before, sequence };
  return { order: json, sequence };
}

/**
 * Per order: its last sequence (of its messages, or the last one retention purged), and
 * (for `located`) when its last rider location went out.
 */
async function lastMessages(tx: Tx, ids: readonly number[], located: readonly number[]) {
  const rows = await tx<{ order_id: number; sequence: number; location_at: Date | null }[]>`
    select o as order_id,
      greatest(coalesce((select max(sequence) from notification_messages m where m.order_id = o), 0),
               coalesce((select last_sequence from notification_sequences s where s.order_id = o), 0))::int as sequence,
      case when o = any(${located as number[]}::bigint[]) then
        (select max(created_at) from notification_messages m where m.order_id = o and m.type = 'order.rider_location')
      end as location_at
    from unnest(${ids as number[]}::bigint[]) as o`;
  return new Map(rows.map((r) => [r.order_id, { sequence: r.sequence, locationAt: r.location_at }]));
}

/**
 * Rows found to be one order (orders/store.ts mergeOrders): their messages become the
 * survivor's, so that its next `sequence` is above every one sent about either row. A
 * receiver that kept the highest sequence it saw under either id would otherwise drop
 * the merged order's next message as stale. The messages keep the ids they were sent with.
 */
export async function moveOrderMessages(tx: Tx, fromIds: readonly number[], toId: number): Promise<void> {
  if (fromIds.length === 0) return;
  await tx`update notification_messages set order_id = ${toId} where order_id = any(${fromIds as number[]}::bigint[])`;
  // And the last sequences of their purged messages (the survivor keeps the highest).
  await tx`
    with gone as (delete from notification_sequences where order_id = any(${fromIds as number[]}::bigint[]) returning last_sequence)
    insert into notification_sequences (order_id, last_sequence)
    select ${toId}, max(last_sequence) from gone having count(*) > 0
    on conflict (order_id) do update set last_sequence = greatest(notification_sequences.last_sequence, excluded.last_sequence)`;
}

/** A message that is not about an order's state (command.failed, awb.pool_low, test.ping). */
export async function recordMessage(tx: Tx, draft: Draft): Promise<string | null> {
  if (draft.endpointId === undefined) {
    const endpoints = await enabledEndpoints(tx);
    if (!endpoints.some((e) => subscribes(e, draft.type))) return null;
  }
  const [id] = await insertMessages(tx, [{ ...draft, sequence: null }]);
  return id ?? null;
}

/**
 * Messages, their deliveries (one per enabled endpoint subscribed to the type, or the one
 * named) and one delivery job per endpoint concerned, in one statement: the job's key per
 * endpoint folds the jobs of many messages into one waiting job.
 *
 * A delivery's first attempt waits the schedule's first entry (Svix's schedule, which
 * NOTIFY_RETRY_SCHEDULE's default follows, starts with it: 0, at once), and its job runs
 * then, keyed by that second as deliveries.enqueueDelivery keys a timed run: a key shared
 * with the at-once runs would let a later message put off a run a resend asked for now.
 * A test ping to one named endpoint goes at once: a person is waiting for it, as for a resend.
 */
async function insertMessages(tx: Tx, drafts: readonly (Draft & { sequence: number | null })[]): Promise<string[]> {
  if (drafts.length === 0) return [];
  const timestamp = new Date().toISOString();
  const input = drafts.map((d) => {
    const id = newMessageId();
    return {
      id,
      type: d.type,
      order_id: d.order?.id ?? null,
      coid: d.order?.client_order_id ?? null,
      svc: d.order?.svc_order_id ?? null,
      seq: d.sequence,
      endpoint: d.endpointId ?? null,
      body: JSON.stringify({ type: d.type, timestamp, data: d.data }),
    };
  });
  // SQL, not the builder: a set-based insert from column arrays (db/columns.ts), fanned
  // out to the endpoints, with add_job in the same statement. The bodies go as JSON lines:
  // as one JSON document, each body was escaped into it and parsed out of it again.
  const column = columnOf(input);
  await tx`
    with input as (
      select * from unnest(${column((i) => i.id)}::text[], ${column((i) => i.type)}::text[], ${column((i) => i.order_id)}::bigint[],
        ${column((i) => i.coid)}::text[], ${column((i) => i.svc)}::text[], ${column((i) => i.seq)}::int[], ${column((i) => i.endpoint)}::text[],
        string_to_array(${jsonLines(input.map((i) => i.body))}::text, E'\n'))
        as t(id, type, order_id, coid, svc, seq, endpoint, body)
    ),
    messages as (
      insert into notification_messages (id, type, order_id, client_order_id, svc_order_id, sequence, body)
      select id, type, order_id, coid, svc, seq, body from input
      returning id
    ),
    deliveries as (
      insert into notification_deliveries (message_id, endpoint_id, next_attempt_at)
      select i.id, e.id, now() + case when i.endpoint is null then ${settings.firstAttemptDelayS}::int else 0 end * interval '1 second'
      -- Locked (KEY SHARE) as they are read: an endpoint being deleted meanwhile is waited
      -- for, then left out, and one read stays until this transaction ends. Read without
      -- the lock, an endpoint whose delete committed while this statement ran got a
      -- delivery its foreign key refused, failing the whole change: a POST /v1/orders
      -- answered 500, a projection batch or a command's run failed.
      from input i join (select id, events from notification_endpoints where enabled for key share) e
        on i.endpoint = e.id or (i.endpoint is null and (cardinality(e.events) = 0 or i.type = any(e.events)))
      where exists (select from messages)
      returning endpoint_id, next_attempt_at
    )
    select ${deliveryJob(tx, tx`endpoint_id`, tx`case when at > now() then at end`)}
    from (select endpoint_id, min(next_attempt_at) as at from deliveries group by endpoint_id) d`;
  return input.map((i) => i.id);
}

/**
 * Retention: up to `batch` messages created before `before`, with their deliveries (and,
 * through the key, their attempts); a message with a delivery still pending stays. Message
 * ids grow with time, so the old ones are a range of the primary key. The highest sequence
 * deleted per order is kept (notification_sequences), in the same statement: an order's
 * next message continues above it even once none of its messages is left.
 */
export async function purgeMessages(sql: Tx, before: Date, batch: number): Promise<number> {
  const [row] = await sql<{ n: number }[]>`
    with old as (
      select m.id from notification_messages m
      where m.id < ${firstMessageIdAt(before)} and m.created_at < ${before}
        and not exists (select from notification_deliveries d where d.message_id = m.id and d.status = 'pending')
      order by m.id
      limit ${batch}
    ),
    deliveries as (
      delete from notification_deliveries d using old where d.message_id = old.id
    ),
    gone as (
      delete from notification_messages m using old where m.id = old.id returning m.order_id, m.sequence
    ),
    kept as (
      insert into notification_sequences (order_id, last_sequence)
      select order_id, max(sequence) from gone where order_id is not null and sequence is not null group by order_id
      on conflict (order_id) do update set last_sequence = greatest(notification_sequences.last_sequence, excluded.last_sequence)
    )
    select count(*)::int as n from gone`;
  return row!.n;
}
