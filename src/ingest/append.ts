/**
 * Appending events: one statement for any number of events inserts them (duplicates
 * skipped by the unique dedupe key), queues the new ones for projection
 * (projection_queue) and adds one `projection__drain` job, all in that one statement, so
 * an event is never stored without the job that projects it. A flush costs one job
 * whatever the number of events or orders in it (src/projection/queue.ts). Only a batch
 * holding a body that names its order by `order_id` alone pays one lookup before it
 * (knownClientIds).
 */
import type { Sql, TransactionSql } from "postgres";
import type { JsonObject, NormalisedEvent } from "../domain/normalise.ts";
import { DRAIN_TASK } from "../projection/queue.ts";

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

type Tx = Sql | TransactionSql;

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
async function knownClientIds(tx: Tx, inputs: readonly EventInput[]): Promise<ReadonlySet<string>> {
  const ambiguous = [...new Set(inputs.flatMap((i) => (i.event.ambiguousId == null ? [] : [i.event.ambiguousId])))];
  if (ambiguous.length === 0) return NONE;
  const rows = await tx<{ id: string }[]>`
    select v as id from unnest(${ambiguous}::text[]) as v
    where exists (select from orders o where o.client_order_id = v)
      and not exists (select from orders o where o.svc_order_id = v)`;
  return new Set(rows.map((r) => r.id));
}

/**
 * Appends events and answers each input in order. The insert, the queue rows and the job
 * are one statement, so this is atomic without a transaction of its own (the batcher
 * runs it in autocommit); inside a caller's transaction it commits with the caller. The
 * ids of duplicates are read afterwards: stored events never change, so that read needs
 * no transaction either.
 */
export async function appendEvents(tx: Tx, inputs: readonly EventInput[]): Promise<Appended[]> {
  // Duplicates inside one batch collapse to the first occurrence. Sorted by dedupe key, so
  // that concurrent batches take the unique-index locks they share in the same order and
  // never deadlock over them.
  const unique = [...new Map(inputs.map((i) => [i.event.dedupeKey, i])).values()].sort((a, b) =>
    a.event.dedupeKey < b.event.dedupeKey ? -1 : a.event.dedupeKey > b.event.dedupeKey ? 1 : 0,
  );
  const asClient = await knownClientIds(tx, unique);
  const rows = unique.map((i) => {
    const ambiguous = i.event.ambiguousId ?? null;
    const client = ambiguous !== null && asClient.has(ambiguous);
    return {
      dedupe_key: i.event.dedupeKey,
      source: i.source ?? "provider",
      kind: i.event.kind,
      svc_order_id: client ? null : i.event.svcOrderId,
      client_order_id: client ? ambiguous : i.event.clientOrderId,
      provider_status: i.event.providerStatus,
      occurred_at: i.event.occurredAt.toISOString(),
      payload: i.payload,
    };
  });
  // The whole batch travels as one JSON parameter, expanded server-side: one statement,
  // one round trip, whatever the batch size. Only the rows actually inserted are queued
  // (a duplicate needs no projection).
  const result = await tx<{ id: string; dedupe_key: string | null }[]>`
    with input as (
      select * from json_to_recordset(${JSON.stringify(rows)}::text::json) as t(
        dedupe_key text, source text, kind text, svc_order_id text, client_order_id text,
        provider_status text, occurred_at timestamptz, payload jsonb)
    ),
    inserted as (
      insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload)
      select dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload
      from input order by dedupe_key
      on conflict (dedupe_key) do nothing
      returning id, dedupe_key
    ),
    queued as (
      insert into projection_queue (event_id) select id from inserted
      returning 1
    ),
    job as (
      select (graphile_worker.add_job(${DRAIN_TASK})).id where exists (select from queued)
    )
    select id::text, dedupe_key from inserted
    union all
    select id::text, null from job`;

  const ids = new Map<string, { id: string; duplicate: boolean }>();
  for (const r of result) if (r.dedupe_key !== null) ids.set(r.dedupe_key, { id: r.id, duplicate: false });

  const missing = unique.filter((i) => !ids.has(i.event.dedupeKey)).map((i) => i.event.dedupeKey);
  if (missing.length > 0) {
    const existing = await tx<{ id: string; dedupe_key: string }[]>`
      select id::text, dedupe_key from order_events where dedupe_key = any(${missing}::text[])`;
    for (const row of existing) ids.set(row.dedupe_key, { id: row.id, duplicate: true });
  }

  const seen = new Set<string>();
  return inputs.map((i) => {
    const found = ids.get(i.event.dedupeKey);
    if (!found) throw new Error(`event ${i.event.dedupeKey} neither inserted nor found`);
    // The second copy inside one batch is a duplicate of the first.
    const duplicate = found.duplicate || seen.has(i.event.dedupeKey);
    seen.add(i.event.dedupeKey);
    return { eventId: found.id, duplicate };
  });
}
