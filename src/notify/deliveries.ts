/**
 * Deliveries and their attempts: the one owner of notification_deliveries' state and of
 * notification_attempts (new deliveries are written by the outbox with their message).
 * Claiming (with a lease), recording outcomes, and the reads and re-sends of the API.
 */
import type { Sql } from "postgres";
import type { Tx } from "../db/client.ts";
import { columnOf } from "../db/columns.ts";
import { pageOf } from "../db/page.ts";
import type { notificationAttempts, notificationDeliveries, notificationMessages } from "../db/schema/index.ts";
import { deliveryJob } from "./outbox.ts";

export type DeliveryRow = typeof notificationDeliveries.$inferSelect;
export type MessageRow = typeof notificationMessages.$inferSelect;
export type AttemptRow = typeof notificationAttempts.$inferSelect;

export const DELIVERY_STATES = ["pending", "delivered", "failed"] as const;

/**
 * A delivery claimed for an attempt, with what is sent, and the lease it was claimed with:
 * `leased_until` as PostgreSQL prints it, exact to the microsecond, so the run's writes can
 * name the very claim they belong to. It goes back as text and is cast in SQL: a Date, or
 * a parameter PostgreSQL types as timestamptz (postgres.js sends it through a Date), keeps
 * milliseconds only, and would match no lease.
 */
export type Claimed = Pick<DeliveryRow, "id" | "message_id" | "attempts"> & Pick<MessageRow, "type" | "body" | "created_at"> & { lease: string };

/**
 * Up to `limit` due deliveries of the endpoint, leased for `leaseMs`: a run that dies
 * mid-send leaves them to the next run once the lease is over (the same webhook-id again).
 * The lease is the claim's identity: a resend, a recovery or another run's claim replaces
 * or clears it, and the run that held it may then no longer change the delivery.
 */
export async function claimDue(sql: Sql, endpointId: string, limit: number, leaseMs: number): Promise<Claimed[]> {
  return await sql<Claimed[]>`
    with due as (
      select id from notification_deliveries
      where endpoint_id = ${endpointId} and status = 'pending' and next_attempt_at <= now()
        and (leased_until is null or leased_until <= now())
      -- The partial index (endpoint_id, next_attempt_at) serves this order with the limit:
      -- a tie-breaker it does not hold would make PostgreSQL sort every due delivery.
      order by next_attempt_at
      limit ${limit}
      for update skip locked
    ),
    leased as (
      update notification_deliveries d set leased_until = now() + ${leaseMs}::int * interval '1 millisecond'
      from due where d.id = due.id
      returning d.id, d.message_id, d.attempts, d.leased_until::text as lease
    )
    select l.id, l.message_id, l.attempts, l.lease, m.type, m.body, m.created_at
    from leased l join notification_messages m on m.id = l.message_id`;
}

export interface AttemptRecord {
  deliveryId: number;
  /** The lease the delivery was claimed with (Claimed.lease). */
  lease: string;
  /** When the request went out: the attempt's time, not when its round was recorded. */
  at: Date;
  statusCode: number | null;
  durationMs: number;
  responseExcerpt: string | null;
  error: string | null;
  /** What the delivery becomes: delivered, failed for good, or pending again after `retryInS` seconds. */
  next: { state: "delivered" } | { state: "failed" } | { state: "pending"; retryInS: number };
}

/**
 * Records a round of attempts and each delivery's new state, in one statement. Every
 * attempt of a delivery that still exists is logged (it happened); a delivery's state
 * changes only while it still holds the attempt's lease. Once a resend or a recovery
 * cleared it, or the lease ran out and another run claimed the delivery, the outcome is no longer this run's to record: written
 * anyway, it would end (or count against) a delivery someone asked to send again, or
 * overwrite what the newer claim found. Returns the deliveries whose state was recorded.
 */
export async function recordAttempts(sql: Tx, attempts: readonly AttemptRecord[]): Promise<number[]> {
  if (attempts.length === 0) return [];
  const lastError = (a: AttemptRecord) => a.error ?? (a.next.state === "delivered" ? null : a.statusCode === null ? "no answer" : `HTTP ${a.statusCode}`);
  // SQL, not the builder: many rows as column arrays (db/columns.ts), like the other
  // set-based writes, attempts and states together.
  const column = columnOf(attempts);
  // A round records its attempts after its last send: each attempt's own time goes with it
  // (as epoch ms, like the projection's instants), and a delivery was delivered when its answer came.
  const rows = await sql<{ id: number }[]>`
    with input as (
      select * from unnest(${attempts.map((a) => a.deliveryId)}::bigint[], ${column((a) => a.lease)}::text[], ${column((a) => a.next.state)}::text[],
        ${column((a) => (a.next.state === "pending" ? a.next.retryInS : null))}::float8[], ${column((a) => a.at.getTime())}::float8[],
        ${column((a) => a.statusCode)}::int[], ${column((a) => Math.round(a.durationMs))}::int[], ${column((a) => a.responseExcerpt)}::text[],
        ${column((a) => a.error)}::text[], ${column(lastError)}::text[])
        as t(id, lease, state, retry_s, at_ms, status_code, duration_ms, excerpt, error, last_error)
    ),
    live as (
      -- The deliveries still there, locked (KEY SHARE) as they are read, before the update
      -- below changes them: a delete under way (its endpoint's, cascading) is waited for,
      -- and its deliveries are then left out, instead of being found and refused by the
      -- foreign key once it commits, which failed the whole write.
      select d.id from notification_deliveries d where d.id = any(${attempts.map((a) => a.deliveryId)}::bigint[]) for key share
    ),
    logged as (
      -- Not for a delivery gone meanwhile (its endpoint deleted while the round was out):
      -- its attempt has nothing left to belong to, and would fail the whole write.
      insert into notification_attempts (delivery_id, at, status_code, duration_ms, response_excerpt, error)
      select i.id, to_timestamp(i.at_ms / 1000), i.status_code, i.duration_ms, i.excerpt, i.error from input i
      where i.id in (select id from live)
    )
    update notification_deliveries d set
      attempts = d.attempts + 1, leased_until = null, status = i.state,
      last_status_code = i.status_code, last_error = i.last_error,
      delivered_at = case when i.state = 'delivered' then to_timestamp((i.at_ms + i.duration_ms) / 1000) end,
      next_attempt_at = case when i.state = 'pending' then now() + i.retry_s * interval '1 second' else d.next_attempt_at end
    from input i join live l on l.id = i.id
    -- The array gives the planner the rows' ids (an unnest's rows it can only guess): an index
    -- lookup per row, never a hash join over the whole table.
    where d.id = i.id and d.id = any(${attempts.map((a) => a.deliveryId)}::bigint[])
      and d.leased_until = i.lease::timestamptz
    returning d.id`;
  return rows.map((r) => r.id);
}

/**
 * Claimed deliveries given back unsent: due again at once. Only those still under the
 * lease they were claimed with: a delivery resent meanwhile is free already, and one whose
 * lease ran out may be another run's now (clearing that run's lease would let a third send it).
 */
export async function releaseClaims(sql: Tx, claims: readonly Pick<Claimed, "id" | "lease">[]): Promise<void> {
  if (claims.length === 0) return;
  const column = columnOf(claims);
  await sql`
    update notification_deliveries d set leased_until = null
    from unnest(${claims.map((c) => c.id)}::bigint[], ${column((c) => c.lease)}::text[]) as c(id, lease)
    where d.id = c.id and d.id = any(${claims.map((c) => c.id)}::bigint[]) and d.leased_until = c.lease::timestamptz`;
}

/**
 * Pending deliveries of a disabled endpoint end failed (a recovery re-sends them). Not
 * those a run is sending (lease not over): that run records what the send did, and then
 * finds the endpoint disabled and fails what is left; a run that died leaves its lease to
 * run out, and the sweep's run fails them.
 */
export async function failPending(sql: Tx, endpointId: string, error: string): Promise<number> {
  const rows = await sql`
    update notification_deliveries set status = 'failed', last_error = ${error}, leased_until = null
    where endpoint_id = ${endpointId} and status = 'pending' and (leased_until is null or leased_until <= now())`;
  return rows.count;
}

/**
 * When the endpoint next has something to send that no run is on: its earliest pending
 * delivery's time (or its lease's end); null when nothing waits.
 */
export async function nextDue(sql: Tx, endpointId: string): Promise<Date | null> {
  const [row] = await sql<{ at: Date | null }[]>`
    select min(greatest(next_attempt_at, coalesce(leased_until, next_attempt_at))) as at
    from notification_deliveries where endpoint_id = ${endpointId} and status = 'pending'`;
  return row?.at ?? null;
}

/** Since when the endpoint's longest-waiting due delivery (no run holding it) has been due; null when none is. */
export async function oldestDue(sql: Tx, endpointId: string): Promise<Date | null> {
  const [row] = await sql<{ at: Date }[]>`
    select next_attempt_at as at from notification_deliveries
    where endpoint_id = ${endpointId} and status = 'pending' and next_attempt_at <= now()
      and (leased_until is null or leased_until <= now())
    order by next_attempt_at
    limit 1`;
  return row?.at ?? null;
}

/**
 * A delivery run for the endpoint at `at` (now when absent). Keyed per endpoint when now,
 * so waiting runs fold into one. `behind`: after every other job due (outbox.ts deliveryJob).
 */
export async function enqueueDelivery(sql: Tx, endpointId: string, at?: Date, behind = false): Promise<void> {
  await sql`select ${deliveryJob(sql, sql`${endpointId}::text`, sql`${at ?? null}::timestamptz`, behind)}`;
}

/**
 * Endpoints with deliveries due that no run holds (the sweep's safety net after a crash).
 * Asked per endpoint (few), each answered by its first due delivery no run holds
 * (notification_deliveries_due_idx): an endpoint down for a day has all that day's
 * deliveries pending and due, and a distinct over them read the whole backlog every minute.
 */
export async function endpointsWithDue(sql: Tx): Promise<string[]> {
  const rows = await sql<{ endpoint_id: string }[]>`
    select e.id as endpoint_id from notification_endpoints e
    where exists (
      select from notification_deliveries d
      where d.endpoint_id = e.id and d.status = 'pending' and d.next_attempt_at <= now() and (d.leased_until is null or d.leased_until <= now()))`;
  return rows.map((r) => r.endpoint_id);
}

// ---------------------------------------------------------------- the API's reads and re-sends

export type DeliveryListRow = Pick<
  DeliveryRow,
  "id" | "message_id" | "endpoint_id" | "status" | "attempts" | "last_status_code" | "last_error" | "next_attempt_at" | "created_at" | "delivered_at"
> &
  Pick<MessageRow, "type" | "client_order_id" | "svc_order_id">;

export interface DeliveryFilter {
  endpointId?: string | undefined;
  /** Either id of the order. */
  order?: string | undefined;
  status?: string | undefined;
  type?: string | undefined;
  limit: number;
  beforeId?: number | undefined;
}

/**
 * The order rows a message naming `order` (either id) can be filed under: the one with that
 * id, or with it as a second provider id (orders_other_svc_ids_idx). A message that names an
 * order carries its row's id, moved to the survivor when rows merge, and the survivor
 * carries every id of the rows merged into it. notification_messages has no index on its
 * copies of the ids (each would cost every message in the projection's transaction): the
 * filter on them alone read the whole outbox. Through these ids, it reads the order's
 * messages (notification_messages_order_sequence_idx).
 */
const orderIdsOf = (sql: Tx, order: string) => sql`
  select o.id from orders o
  where o.client_order_id = ${order} or o.svc_order_id = ${order} or (cardinality(o.svc_order_ids) > 1 and o.svc_order_ids @> array[${order}]::text[])`;

/** Deliveries newest first (keyset by id), each with its message's type and order. */
export async function listDeliveries(sql: Tx, f: DeliveryFilter): Promise<{ rows: DeliveryListRow[]; nextId: number | null }> {
  const rows = await sql<DeliveryListRow[]>`
    select d.id, d.message_id, d.endpoint_id, d.status, d.attempts, d.last_status_code, d.last_error, d.next_attempt_at,
           d.created_at, d.delivered_at, m.type, m.client_order_id, m.svc_order_id
    from notification_deliveries d join notification_messages m on m.id = d.message_id
    where true
      ${f.endpointId !== undefined ? sql`and d.endpoint_id = ${f.endpointId}` : sql``}
      ${f.order !== undefined ? sql`and m.order_id = any(array(${orderIdsOf(sql, f.order)})) and (m.client_order_id = ${f.order} or m.svc_order_id = ${f.order})` : sql``}
      ${f.status !== undefined ? sql`and d.status = ${f.status}` : sql``}
      ${f.type !== undefined ? sql`and m.type = ${f.type}` : sql``}
      ${f.beforeId !== undefined ? sql`and d.id < ${f.beforeId}` : sql``}
    order by d.id desc
    limit ${f.limit + 1}`;
  return pageOf(rows, f.limit);
}

export interface MessageDetail {
  message: MessageRow;
  deliveries: DeliveryRow[];
  attempts: (AttemptRow & { endpoint_id: string })[];
}

export async function messageDetail(sql: Tx, messageId: string): Promise<MessageDetail | null> {
  const [message] = await sql<MessageRow[]>`select * from notification_messages where id = ${messageId}`;
  if (!message) return null;
  const [deliveries, attempts] = await Promise.all([
    sql<DeliveryRow[]>`select * from notification_deliveries where message_id = ${messageId} order by id`,
    sql<(AttemptRow & { endpoint_id: string })[]>`
      select a.*, d.endpoint_id from notification_attempts a join notification_deliveries d on d.id = a.delivery_id
      where d.message_id = ${messageId} order by a.at, a.id`,
  ]);
  return { message, deliveries, attempts };
}

/**
 * Deliveries sent again from the start (pending now, attempts counted from 0; their
 * attempts so far stay recorded), with a run per endpoint. Returns how many. Clearing the
 * lease also takes the delivery from a run still sending it: that send is logged as an
 * attempt, but its outcome no longer decides the delivery (recordAttempts).
 */
async function requeue(tx: Tx, rows: readonly { id: number; endpoint_id: string }[]): Promise<number> {
  if (rows.length === 0) return 0;
  await tx`
    update notification_deliveries set status = 'pending', attempts = 0, next_attempt_at = now(), leased_until = null, delivered_at = null
    where id = any(${rows.map((r) => r.id)}::bigint[])`;
  for (const endpoint of new Set(rows.map((r) => r.endpoint_id))) await enqueueDelivery(tx, endpoint);
  return rows.length;
}

/** Every delivery of the message (to enabled endpoints) sent again; null when there is no such message. */
export async function resendMessage(sql: Sql, messageId: string): Promise<number | null> {
  return await sql.begin(async (tx) => {
    const [message] = await tx<{ id: string }[]>`select id from notification_messages where id = ${messageId}`;
    if (!message) return null;
    const rows = await tx<{ id: number; endpoint_id: string }[]>`
      select d.id, d.endpoint_id from notification_deliveries d join notification_endpoints e on e.id = d.endpoint_id
      where d.message_id = ${messageId} and e.enabled
      for update of d`;
    return await requeue(tx, rows);
  });
}

/**
 * resendMessage for a person's click (the console's Resend): a delivery already pending
 * (queued by a resend a moment before, from a form sent twice or by a second person, or
 * still in its round of attempts) is not sent again, and only the others are. Sent again,
 * a pending delivery would restart its attempts and be taken from a run sending it, which
 * still sends: the receiver got the message twice. One waiting for its next attempt that
 * no run holds goes now instead (a person clicks Resend once the receiver is back).
 * `queued`: deliveries sent again; `already`: those left pending; null when there is no
 * such message.
 */
export async function resendMessageOnce(sql: Sql, messageId: string): Promise<{ queued: number; already: number } | null> {
  return await sql.begin(async (tx) => {
    const [message] = await tx<{ id: string }[]>`select id from notification_messages where id = ${messageId}`;
    if (!message) return null;
    // Locked, then read: a second post waits for the first's commit and sees its pending rows.
    const rows = await tx<{ id: number; endpoint_id: string; status: string }[]>`
      select d.id, d.endpoint_id, d.status from notification_deliveries d join notification_endpoints e on e.id = d.endpoint_id
      where d.message_id = ${messageId} and e.enabled
      for update of d`;
    const queued = await requeue(tx, rows.filter((r) => r.status !== "pending"));
    const waiting = rows.filter((r) => r.status === "pending").map((r) => r.id);
    if (waiting.length > 0) {
      const due = await tx<{ endpoint_id: string }[]>`
        update notification_deliveries set next_attempt_at = now()
        where id = any(${waiting}::bigint[]) and next_attempt_at > now() and (leased_until is null or leased_until < now())
        returning endpoint_id`;
      for (const endpoint of new Set(due.map((r) => r.endpoint_id))) await enqueueDelivery(tx, endpoint);
    }
    return { queued, already: rows.length - queued };
  });
}

/** The endpoint's failed deliveries of messages created since `since`, sent again. */
export async function recoverEndpoint(sql: Sql, endpointId: string, since: Date): Promise<number> {
  return await sql.begin(async (tx) => {
    const rows = await tx<{ id: number; endpoint_id: string }[]>`
      select id, endpoint_id from notification_deliveries
      where endpoint_id = ${endpointId} and status = 'failed' and created_at >= ${since}
      for update`;
    return await requeue(tx, rows);
  });
}

/** Delivery figures for /metrics: pending deliveries. */
export async function deliveryFigures(sql: Tx): Promise<{ pending: number }> {
  const [row] = await sql<{ pending: number }[]>`select count(*)::int as pending from notification_deliveries where status = 'pending'`;
  return { pending: row?.pending ?? 0 };
}

/** Deliveries endpointHealth looks at per endpoint: its latest. */
export const HEALTH_WINDOW = 200;

/** An endpoint (never its secrets) and how its latest deliveries went. */
export interface EndpointHealth {
  id: string;
  url: string;
  events: string[];
  description: string | null;
  enabled: boolean;
  disabled_reason: string | null;
  created_at: Date;
  /** Of its latest HEALTH_WINDOW deliveries: */
  recent: number;
  delivered: number;
  failed: number;
  /** Pending after at least one failed attempt. */
  retrying: number;
  /** delivered / (delivered + failed + retrying); null when none was attempted yet. */
  success_rate: number | null;
  /** The newest error among them, and the newest status code the endpoint answered with. */
  last_error: string | null;
  last_status_code: number | null;
}

/**
 * Every endpoint with the figures of its latest HEALTH_WINDOW deliveries: one backward
 * range scan of notification_deliveries_endpoint_idx (endpoint_id, id) per endpoint, and
 * endpoints are few. Oldest endpoint first.
 */
export async function endpointHealth(sql: Tx): Promise<EndpointHealth[]> {
  return await sql<EndpointHealth[]>`
    select e.id, e.url, e.events, e.description, e.enabled, e.disabled_reason, e.created_at,
           h.recent, h.delivered, h.failed, h.retrying,
           case when h.delivered + h.failed + h.retrying = 0 then null
                else h.delivered::float8 / (h.delivered + h.failed + h.retrying) end as success_rate,
           h.last_error, h.last_status_code
    from notification_endpoints e
    cross join lateral (
      select count(*)::int as recent,
             count(*) filter (where d.status = 'delivered')::int as delivered,
             count(*) filter (where d.status = 'failed')::int as failed,
             count(*) filter (where d.status = 'pending' and d.attempts > 0)::int as retrying,
             (array_agg(d.last_error order by d.id desc) filter (where d.last_error is not null))[1] as last_error,
             (array_agg(d.last_status_code order by d.id desc) filter (where d.last_status_code is not null))[1] as last_status_code
      from (
        select id, status, attempts, last_error, last_status_code
        from notification_deliveries
        where endpoint_id = e.id
        order by id desc
        limit ${HEALTH_WINDOW}
      ) d
    ) h
    order by e.created_at, e.id`;
}

/**
 * Retention: up to `batch` attempts made before `before`. Ids grow with time, so the old
 * attempts are the ids below the first recent one: that one is found by reading the
 * primary key from the start (through the rows about to go), and the rest is a range of it.
 */
export async function purgeAttempts(sql: Tx, before: Date, batch: number): Promise<number> {
  const rows = await sql`
    with first_kept as (
      select coalesce((select id from notification_attempts where at >= ${before} order by id limit 1), 9223372036854775807) as id
    )
    delete from notification_attempts where id in (
      select a.id from notification_attempts a, first_kept k where a.id < k.id and a.at < ${before} order by a.id limit ${batch})`;
  return rows.count;
}
