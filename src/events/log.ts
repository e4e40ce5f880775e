/**
 * The event log: the one owner of `order_events`. Appending (one statement stores a batch,
 * queues its new events for projection and adds a drain job unless a drain loop runs) and every read of the log:
 * the projection's, the timeline's and the rebuild's.
 */
import type { TransactionSql } from "postgres";
import type { Tx } from "../db/client.ts";
import { columnOf, jsonLines } from "../db/columns.ts";
import type { orderEvents } from "../db/schema/index.ts";
import { isJsonObject } from "../domain/normalise.ts";
import type { JsonObject, NormalisedEvent } from "../domain/normalise.ts";
import type { StoredEvent } from "../domain/projection.ts";
import { knownClientIds } from "../orders/read.ts";
import { DRAIN_GATE, DRAIN_TASK } from "../projection/backlog.ts";

export type EventRow = typeof orderEvents.$inferSelect;


/** Who said it: a provider callback, tracklane itself, or the provider answering a status poll. */
export type EventSource = "provider" | "tracklane" | "poll";

export interface EventInput {
  /** ambiguousId may be left out by events tracklane writes itself: they name their ids. */
  event: Omit<NormalisedEvent, "ambiguousId"> & Partial<Pick<NormalisedEvent, "ambiguousId">>;
  payload: JsonObject;
  source?: EventSource;
}

export interface Appended {
  eventId: string;
  duplicate: boolean;
}

const NONE: ReadonlySet<string> = new Set();

/**
 * Of the events' ambiguous ids (a body naming its order only by `order_id`), those a
 * known order carries as its client_order_id while no order carries them as its
 * svc_order_id: such an `order_id` is that order's client id, and reading it as a
 * provider id would make a phantom order. One query for the whole batch, and none at all
 * for a batch without ambiguous ids (the usual case: this is the hot path). The answer
 * is final: the event is stored with the ids decided here, and the projection links
 * orders by the stored columns only.
 */
async function clientIdsOf(tx: Tx, inputs: readonly EventInput[]): Promise<ReadonlySet<string>> {
  const ambiguous = [...new Set(inputs.flatMap((i) => (i.event.ambiguousId == null ? [] : [i.event.ambiguousId])))];
  if (ambiguous.length === 0) return NONE;
  return await knownClientIds(tx, ambiguous);
}

/**
 * Appends events and answers each input in order. The insert, the queue rows and the job
 * are one statement (insertRows), so each is atomic without a transaction of its own (the
 * batcher runs it in autocommit); inside a caller's transaction it commits with the
 * caller. The rare second round (below) is a second statement: a crash between the two
 * leaves the first round's events stored and the batch unanswered, and the provider's
 * retry then finds them as duplicates. The ids of duplicates are read afterwards: stored
 * events never change, so that read needs no transaction either.
 */
export async function appendEvents(tx: Tx, inputs: readonly EventInput[]): Promise<Appended[]> {
  // Duplicates inside one batch collapse to the first occurrence. Sorted by the unique
  // index's key (order, dedupe key), so that concurrent batches take the index locks they
  // share (and the new order keys' periods) in the same order and never deadlock over them.
  const asClient = await clientIdsOf(tx, inputs);
  // Each input's row and its key in the unique index, once.
  const keyed = inputs.map((i) => {
    const row = {
      ...storedIdsOf(i, asClient),
      source: i.source ?? "provider",
      kind: i.event.kind,
      provider_status: i.event.providerStatus,
      occurred_at: i.event.occurredAt.toISOString(),
      payload: i.payload,
    };
    return { key: keyOf(row), row };
  });
  const byKey = new Map<string, (typeof keyed)[number]["row"]>();
  for (const { key, row } of keyed) if (!byKey.has(key)) byKey.set(key, row);
  const rows = [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, row]) => row);

  const ids = new Map<string, { id: string; duplicate: boolean }>();
  // An order key first seen by a concurrent append that commits while this statement runs
  // has its period out of this statement's sight: its events wait for the next round,
  // which sees it. Rarely more than one round; each statement waited for the other.
  let pending = rows;
  for (let round = 0; pending.length > 0 && round < 5; round++) {
    const inserted = await insertRows(tx, pending);
    for (const r of inserted) ids.set(indexKey(r.order_key, r.dedupe_key), { id: r.id, duplicate: false });
    const missing = pending.filter((r) => !ids.has(keyOf(r)));
    if (missing.length === 0) break;
    // The earlier copies, through the dedupe index (one probe per partition of the kind),
    // whichever form of the key they were stored with.
    const existing = await tx<{ id: string; order_key: string; dedupe_key: string }[]>`
      select e.id::text, coalesce(e.svc_order_id, e.client_order_id) as order_key, e.dedupe_key
      from unnest(${missing.map((r) => r.svc_order_id ?? r.client_order_id ?? "")}::text[], ${missing.map((r) => r.dedupe_key)}::text[],
                  ${missing.map((r) => r.kind)}::text[]) as m(order_key, dedupe_key, kind)
      join order_events e on coalesce(e.svc_order_id, e.client_order_id) = m.order_key and e.kind = m.kind
        and e.dedupe_key = any(array[m.dedupe_key, left(m.dedupe_key, ${SHORT_KEY_DIGITS})])`;
    for (const row of existing) ids.set(indexKey(row.order_key, row.dedupe_key), { id: row.id, duplicate: true });
    pending = missing.filter((r) => !ids.has(keyOf(r)));
  }

  const seen = new Set<string>();
  return keyed.map(({ key, row }) => {
    const found = ids.get(key);
    if (!found) throw new Error(`event ${row.dedupe_key} neither inserted nor found`);
    // The second copy inside one batch is a duplicate of the first.
    const duplicate = found.duplicate || seen.has(key);
    seen.add(key);
    return { eventId: found.id, duplicate };
  });
}

type StoredRow = ReturnType<typeof storedIdsOf> & {
  source: EventSource;
  kind: string;
  provider_status: string | null;
  occurred_at: string;
  payload: JsonObject;
};

/**
 * One statement: records the period of order keys seen for the first time, inserts the
 * rows that are no copies (each with its key's period, or the oldest period its kind still
 * has a partition for when retention dropped its own: an event that late is kept once in
 * what is left), queues them for projection and adds a drain job unless a loop runs (DRAIN_GATE). The rows inserted,
 * with their keys; a row whose key's period this statement could not see comes back
 * neither inserted nor as a copy. The dedupe key is stored in the form of the row's period
 * (SHORT_KEY_DIGITS): a copy, stored with the same period, takes the same form.
 *
 * The whole batch travels as one array parameter per column, zipped server-side by
 * `unnest`: one round trip, atomic without a transaction, whatever the batch size (as one
 * JSON document, each payload was parsed three times over). The periods already known
 * are found by probes of order_periods' primary key (`= any(array(…))`): as a join with
 * the batch's keys PostgreSQL scanned the whole table on every flush. The queue is the
 * projection's table (src/projection/queue.ts); its rows are written here, in the same
 * statement as their events, so that no event is ever stored unqueued.
 */
async function insertRows(tx: Tx, rows: readonly StoredRow[]) {
  const column = columnOf(rows);
  // The drain job's row (`job`) comes back with no keys, and is dropped here.
  return await tx<{ id: string; order_key: string | null; dedupe_key: string | null }[]>`
    with input as (
      select *, coalesce(svc_order_id, client_order_id) as order_key
      from unnest(${column((r) => r.dedupe_key)}::text[], ${column((r) => r.source)}::text[], ${column((r) => r.kind)}::text[],
        ${column((r) => r.svc_order_id)}::text[], ${column((r) => r.client_order_id)}::text[], ${column((r) => r.provider_status)}::text[],
        ${column((r) => r.occurred_at)}::timestamptz[], string_to_array(${jsonLines(rows.map((r) => JSON.stringify(r.payload)))}::text, E'\n')::jsonb[])
        as t(dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload)
    ),
    keys as (select distinct order_key from input),
    known as (select p.order_key, p.period from order_periods p where p.order_key = any(array(select order_key from keys))),
    fresh as (
      insert into order_periods (order_key, period)
      select k.order_key, (now() at time zone 'UTC')::date from keys k
      where not exists (select from known where known.order_key = k.order_key)
      order by k.order_key
      on conflict (order_key) do nothing
      returning order_key, period
    ),
    periods as (select * from known union all select * from fresh),
    oldest as (select kind, min(starts) as starts from event_partitions group by kind),
    inserted as (
      insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload, period)
      select case when s.period >= order_events_short_keys_from() then left(i.dedupe_key, ${SHORT_KEY_DIGITS}) else i.dedupe_key end,
             i.source, i.kind, i.svc_order_id, i.client_order_id, i.provider_status, i.occurred_at, i.payload, s.period
      from input i join periods p on p.order_key = i.order_key left join oldest o on o.kind = i.kind,
           lateral (select greatest(p.period, o.starts) as period) s
      order by i.order_key, i.dedupe_key
      on conflict ((coalesce(svc_order_id, client_order_id)), dedupe_key, kind, period) do nothing
      returning id, kind, period, coalesce(svc_order_id, client_order_id) as order_key, dedupe_key
    ),
    queued as (
      insert into projection_queue (event_id, kind, period) select id, kind, period from inserted
      returning 1
    ),
    job as (
      -- The drain's gate (DRAIN_GATE): a job only when no drain loop runs. CASE fixes the
      -- order: the shared hold of closing comes before the try of running.
      select (graphile_worker.add_job(${DRAIN_TASK})).id
      where exists (select from queued)
        and case when pg_advisory_xact_lock_shared(${DRAIN_GATE.space}::int, ${DRAIN_GATE.closing}::int) is null then false
                 else pg_try_advisory_xact_lock(${DRAIN_GATE.space}::int, ${DRAIN_GATE.running}::int) end
    )
    select id::text, order_key, dedupe_key from inserted
    union all
    select id::text, null, null from job`.then((r) => r.filter((x): x is typeof x & { order_key: string; dedupe_key: string } => x.order_key !== null && x.dedupe_key !== null));
}

/**
 * How many hex digits of a dedupe key (a SHA-256, 64 digits) an event stores from
 * order_events_short_keys_from() on (migration 0013): 128 bits, so that two bodies of one
 * order never share one. Rows of earlier periods keep all 64.
 */
const SHORT_KEY_DIGITS = 32;

/**
 * An order key and a dedupe key as one map key: how this module matches rows to answers.
 * Cut to the short key, so a stored row matches its input in either form.
 */
const indexKey = (orderKey: string, dedupeKey: string) => `${orderKey}\u0000${dedupeKey.slice(0, SHORT_KEY_DIGITS)}`;

/** The unique index's key of a row: its order's id (provider's, else the merchant's) and its dedupe key. */
function keyOf(r: { svc_order_id: string | null; client_order_id: string | null; dedupe_key: string }): string {
  return indexKey(r.svc_order_id ?? r.client_order_id ?? "", r.dedupe_key);
}

/** The ids an input is stored under (an ambiguous id known as a client id is the client's), and its dedupe key. */
function storedIdsOf(i: EventInput, asClient: ReadonlySet<string>): { svc_order_id: string | null; client_order_id: string | null; dedupe_key: string } {
  const ambiguous = i.event.ambiguousId ?? null;
  const client = ambiguous !== null && asClient.has(ambiguous);
  return { svc_order_id: client ? null : i.event.svcOrderId, client_order_id: client ? ambiguous : i.event.clientOrderId, dedupe_key: i.event.dedupeKey };
}

// ---------------------------------------------------------------- reads

/** The order_events columns the projection's fold reads (payloads are loaded only where needed). */
export type EventColumns = Pick<EventRow, "id" | "dedupe_key" | "kind" | "svc_order_id" | "client_order_id" | "provider_status" | "occurred_at" | "received_at">;

/**
 * An event as the fold reads it first: without its payload, with its `details` mask and
 * its partition's period (as text: payloadsOf sends it back, nothing reads it as a day).
 */
export type FoldEvent = Omit<StoredEvent, "payload"> & { details: number; period: string };

/** The identifiers of one round of a fold's reads; `svcsRead` holds `svcs` and every earlier round's. */
export interface RoundIds {
  svcs: readonly string[];
  coids: readonly string[];
  svcsRead: readonly string[];
}

/**
 * The events one round reads, as the FROM clauses of its two branches, each naming the
 * event `e`: by provider id, then by merchant's id leaving out what the first branch finds
 * or an earlier round found (an event carrying both ids, as most do, is read once).
 *
 * - By provider id, each id is looked up in one partition of each kind: an event naming a
 *   provider id has that id as its order key, so it is stored in that key's period
 *   (order_periods), or in the oldest partition left of its kind when retention dropped
 *   that period's (the append's rule, insertRows). A probe per id and kind (LATERAL, and
 *   OFFSET 0 so that the planner cannot make a join of it) prunes the other partitions as
 *   it runs: by the id alone, every partition's index was probed for every id, and a log
 *   kept for years has a status partition a month.
 * - By merchant's id, every partition: an event naming the merchant's id and a provider id
 *   this round does not know yet is stored in that provider id's period, which nothing
 *   here knows. As `not in (subquery)` the check of what was read is one hash probe per
 *   event, in a generic plan too (`<> all(array)` there compares with every element).
 *
 * src/projection/backlog.ts claimAndRead claims and reads by these in one statement.
 */
export function roundBranches(tx: TransactionSql, ids: RoundIds) {
  return {
    bySvc: tx`unnest(${ids.svcs as string[]}::text[]) as s(id)
      join order_periods p on p.order_key = s.id
      cross join (values ('status'), ('location')) as k(kind)
      left join lateral (select min(starts) as starts from event_partitions where kind = k.kind) o on true
      cross join lateral (
        select * from order_events e
        where e.kind = k.kind and e.period = greatest(p.period, o.starts) and e.svc_order_id = s.id
        offset 0) e`,
    byClient: tx`order_events e where e.client_order_id = any(${ids.coids as string[]}::text[])
      and (e.svc_order_id is null or e.svc_order_id not in (select unnest(${ids.svcsRead as string[]}::text[])))`,
  };
}

/**
 * The columns of a round's events (roundBranches) as the fold reads them, for
 * src/projection/backlog.ts claimAndRead: without payloads, each row already shaped as the
 * fold's event (no copy per event). `details` is a bit mask of the payload keys present
 * in each group of `detailKeys` (a group with two key sets needs a key of each), so the
 * fold knows which payloads it must read. The rows are each branch's event `e`, one
 * branch per identifier column, each index probes whatever the table's size (an OR of the
 * two made the planner pick sequential scans).
 */
export function foldColumns(tx: TransactionSql, detailKeys: readonly (readonly (readonly string[])[])[]) {
  const bit = (keys: readonly (readonly string[])[], i: number) =>
    keys.length === 2
      ? tx`((e.payload ?| ${[...keys[0]!]}::text[]) and (e.payload ?| ${[...keys[1]!]}::text[]))::int * ${2 ** i}`
      : tx`(e.payload ?| ${[...keys[0]!]}::text[])::int * ${2 ** i}`;
  const mask = detailKeys.map((keys, i) => bit(keys, i)).reduce((acc, b) => tx`${acc} + ${b}`);
  // kind is 'location' or 'status': the log has partitions for no other.
  return tx`e.id, e.dedupe_key as "dedupeKey", e.kind, e.svc_order_id as "svcOrderId", e.client_order_id as "clientOrderId",
    e.provider_status as "providerStatus", e.occurred_at as "occurredAt", e.received_at as "receivedAt", ${mask} as details,
    e.period::text as period`;
}

/**
 * Of these order keys, those retention shed events of: their period is older than the
 * oldest partition left of some kind, so that kind's partition for it was dropped.
 */
export async function shedOrderKeys(tx: Tx, keys: readonly string[]): Promise<ReadonlySet<string>> {
  if (keys.length === 0) return NONE;
  const rows = await tx<{ order_key: string }[]>`
    select p.order_key from order_periods p
    where p.order_key = any(${keys as string[]}::text[])
      and p.period < (select max(oldest) from (select min(starts) as oldest from event_partitions group by kind) k)`;
  return new Set(rows.map((r) => r.order_key));
}

/**
 * The payloads of these events, each looked up in its own partition: a probe per event
 * (LATERAL, and OFFSET 0 so that the planner cannot turn it into a join), whose
 * (kind, period) prunes the other partitions as it runs. By id alone every partition's id
 * index was probed for every id: 2,000 ids over 28 partitions of 2,000 events took 23 ms,
 * and 6 so, both with generic plans (docs/scale.md, "Planning over many partitions").
 */
export async function payloadsOf(tx: Tx, events: readonly Pick<FoldEvent, "id" | "kind" | "period">[]): Promise<{ id: number; payload: unknown }[]> {
  return await tx<{ id: number; payload: unknown }[]>`
    select e.id, e.payload
    from unnest(${events.map((e) => e.id)}::bigint[], ${events.map((e) => e.kind)}::text[], ${events.map((e) => e.period)}::date[]) as m(id, kind, period)
    cross join lateral (select e.id, e.payload from order_events e where e.kind = m.kind and e.period = m.period and e.id = m.id offset 0) e`;
}

/** The log's id range (0, 0 when empty). */
export async function eventIdRange(sql: Tx): Promise<{ first: number; last: number }> {
  const [row] = await sql<{ first: number | null; last: number | null }[]>`select min(id) as first, max(id) as last from order_events`;
  return { first: row?.first ?? 0, last: row?.last ?? 0 };
}

/**
 * How much earlier than its insert an event's received_at may be: it is when the event's
 * transaction began (now()), and appends are single statements or short transactions. A
 * few minutes is generous; a write transaction held longer than this is a fault of its own.
 */
export const RECEIVED_BEFORE_INSERT_MS = 10 * 60_000;

/**
 * An event id from which every event received at or after `since` is read (null when none
 * was received since RECEIVED_BEFORE_INSERT_MS before it): a binary search over the id
 * index (order_events_id_idx), some twenty index lookups however long the log. Ids are
 * handed out as rows are inserted, and received_at is when each row's transaction began:
 * one that began first may insert after one that began later, so near `since` a lower id
 * may have been received later. The search is for RECEIVED_BEFORE_INSERT_MS earlier: every
 * id below the one found was inserted no later than an event received before that, so was
 * received before `since`. What lies in between is read too (a rebuild re-derives a few
 * more orders, which changes nothing right).
 */
export async function firstEventReceivedSince(sql: Tx, receivedSince: Date): Promise<number | null> {
  const since = new Date(receivedSince.getTime() - RECEIVED_BEFORE_INSERT_MS);
  const { first, last } = await eventIdRange(sql);
  if (last === 0) return null;
  const receivedAtOrAfter = async (id: number) => {
    const [row] = await sql<{ id: number; received_at: Date }[]>`
      select id, received_at from order_events where id >= ${id} order by id limit 1`;
    return row ?? null;
  };
  let lo = first;
  let hi = last;
  const lastRow = await receivedAtOrAfter(last);
  if (!lastRow || lastRow.received_at < since) return null;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const row = await receivedAtOrAfter(mid);
    if (row && row.received_at >= since) hi = Math.min(row.id, mid);
    else lo = (row?.id ?? mid) + 1;
  }
  return lo;
}

/**
 * A page of the log's order keys (each event's provider id, else the merchant's), in key
 * order after `afterKey`: order_periods holds one row per key, so a walk of every order in
 * the log reads one row per order, not one per event.
 */
export async function orderKeyPage(sql: Tx, afterKey: string | null, limit: number): Promise<string[]> {
  const rows = await sql<{ order_key: string }[]>`
    select order_key from order_periods ${afterKey === null ? sql`` : sql`where order_key > ${afterKey}`}
    order by order_key limit ${limit}`;
  return rows.map((r) => r.order_key);
}

/** How many order keys the log holds. */
export async function orderKeyCount(sql: Tx): Promise<number> {
  const [row] = await sql<{ n: number }[]>`select count(*)::int as n from order_periods`;
  return row?.n ?? 0;
}

/**
 * The distinct identifier pairs of the events with ids in (afterId, upToId]: one id range
 * of the log, what a rebuild reads a slice at a time, in bounded memory.
 */
export async function identitiesIn(sql: Tx, afterId: number, upToId: number): Promise<{ svc_order_id: string | null; client_order_id: string | null }[]> {
  return await sql<{ svc_order_id: string | null; client_order_id: string | null }[]>`
    select distinct svc_order_id, client_order_id from order_events where id > ${afterId} and id <= ${upToId}`;
}

/**
 * An order_events row `e` as EventRow types it: every column, `period` as text (postgres.js
 * reads a date as a Date, the schema's date columns are strings).
 */
const eventRowColumns = (sql: Tx) =>
  sql`e.id, e.dedupe_key, e.source, e.kind, e.svc_order_id, e.client_order_id, e.provider_status, e.occurred_at, e.received_at, e.payload, e.period::text as period`;

export interface TimelineCursor {
  /** occurred_at in microseconds since the epoch: exact, where a JS Date keeps only ms. */
  micros: string;
  id: number;
}

/**
 * Events of an order by either of its identifiers, in event-time order; keyset pages. Each
 * id is its own range scan of its (id, occurred_at, id) index starting after the cursor,
 * stopping after a page: a deep page costs what the first does, however long the order.
 */
export async function orderTimeline(
  sql: Tx,
  order: { svc_order_id: string | null; client_order_id: string | null },
  page: { limit: number; after?: TimelineCursor | undefined },
): Promise<{ rows: (EventRow & { micros: string })[]; next: TimelineCursor | null }> {
  if (order.svc_order_id === null && order.client_order_id === null) return { rows: [], next: null };
  const micros = sql`((extract(epoch from occurred_at) * 1000000)::bigint)::text`;
  // The cursor's instant, exactly (microseconds, as timestamptz stores them).
  const after = page.after
    ? sql`and (occurred_at, id) > (timestamptz 'epoch' + ${page.after.micros}::bigint * interval '1 microsecond', ${page.after.id}::bigint)`
    : sql``;
  const n = page.limit + 1;
  const bySvc =
    order.svc_order_id !== null
      ? sql`(select * from order_events where svc_order_id = ${order.svc_order_id} ${after} order by occurred_at, id limit ${n})`
      : sql`(select * from order_events where false)`;
  const byClient =
    order.client_order_id !== null
      ? sql`(select * from order_events where client_order_id = ${order.client_order_id} ${after} order by occurred_at, id limit ${n})`
      : sql`(select * from order_events where false)`;
  // An event with both ids comes from both sides: once is kept. The first n distinct events
  // after the cursor are all among the two sides' first n each.
  const rows = await sql<(EventRow & { micros: string })[]>`
    select distinct on (occurred_at, id) ${eventRowColumns(sql)}, ${micros} as micros from (${bySvc} union all ${byClient}) e
    order by occurred_at, id
    limit ${n}`;
  const more = rows.length > page.limit;
  const items = more ? rows.slice(0, page.limit) : rows;
  const last = items[items.length - 1];
  return { rows: items, next: more && last ? { micros: last.micros, id: last.id } : null };
}

/**
 * The newest `limit` events of an order by either of its identifiers, in event-time order,
 * and whether older ones exist: what a person looking at the order needs (its latest
 * status, the rider's latest location), however long the order ran. Each id is a backward
 * scan of the same indexes as orderTimeline.
 */
export async function latestOrderEvents(
  sql: Tx,
  order: { svc_order_id: string | null; client_order_id: string | null },
  limit: number,
): Promise<{ rows: EventRow[]; older: boolean }> {
  if (order.svc_order_id === null && order.client_order_id === null) return { rows: [], older: false };
  const n = limit + 1;
  const bySvc =
    order.svc_order_id !== null
      ? sql`(select * from order_events where svc_order_id = ${order.svc_order_id} order by occurred_at desc, id desc limit ${n})`
      : sql`(select * from order_events where false)`;
  const byClient =
    order.client_order_id !== null
      ? sql`(select * from order_events where client_order_id = ${order.client_order_id} order by occurred_at desc, id desc limit ${n})`
      : sql`(select * from order_events where false)`;
  // As in orderTimeline: an event with both ids comes from both sides, and is kept once.
  const rows = await sql<EventRow[]>`
    select distinct on (occurred_at, id) ${eventRowColumns(sql)} from (${bySvc} union all ${byClient}) e
    order by occurred_at desc, id desc
    limit ${n}`;
  const older = rows.length > limit;
  return { rows: (older ? rows.slice(0, limit) : rows).reverse(), older };
}

/**
 * The latest event the provider itself sent (a callback or a status poll, not tracklane's
 * own) that names this client_order_id: proof that the provider has an order under it,
 * even when it gave no id of its own. Served by order_events_client_order_id_idx.
 */
export async function latestProviderEventNaming(sql: Tx, clientOrderId: string): Promise<{ provider_status: string | null; occurred_at: Date } | undefined> {
  const [row] = await sql<{ provider_status: string | null; occurred_at: Date }[]>`
    select provider_status, occurred_at from order_events
    where client_order_id = ${clientOrderId} and source <> 'tracklane'
    order by occurred_at desc, id desc
    limit 1`;
  return row;
}

/**
 * Redaction, the one change the log allows (migration 0009's trigger checks it): the
 * payloads of the order's events, as `redact` returns them (null: unchanged), with values
 * replaced by "[redacted]" and nothing else. How many events changed.
 */
export async function redactOrderEvents(
  tx: TransactionSql,
  order: { svcOrderIds: readonly string[]; clientOrderId: string | null },
  redact: (payload: JsonObject) => JsonObject | null,
): Promise<number> {
  const rows = await tx<{ id: number; payload: unknown }[]>`
    select id, payload from order_events
    where svc_order_id = any(${order.svcOrderIds as string[]}::text[])
      ${order.clientOrderId !== null ? tx`or client_order_id = ${order.clientOrderId}` : tx``}`;
  const changed = rows.flatMap((r) => {
    const redacted = isJsonObject(r.payload) ? redact(r.payload) : null;
    return redacted === null ? [] : [{ id: r.id, payload: redacted }];
  });
  if (changed.length === 0) return 0;
  const ids = changed.map((c) => c.id);
  await tx`set local tracklane.redacting = 'on'`;
  await tx`
    update order_events e set payload = v.payload
    from unnest(${ids}::bigint[], string_to_array(${jsonLines(changed.map((c) => JSON.stringify(c.payload)))}::text, E'\n')::jsonb[])
      as v(id, payload)
    where e.id = v.id and e.id = any(${ids}::bigint[])`;
  await tx`set local tracklane.redacting = 'off'`;
  return changed.length;
}
