/**
 * Appending events: one set-based INSERT for any number of events, duplicates skipped by
 * the unique dedupe key, and one projection job per order enqueued with a single
 * `graphile_worker.add_jobs` call in the same transaction, so an event is never stored
 * without the job that projects it (and add_jobs NOTIFYs once, not once per event).
 */
import type { Sql, TransactionSql } from "postgres";
import type { JsonObject, NormalisedEvent } from "../domain/normalise.ts";
import { projectionJob } from "../tasks/jobs.ts";

export type EventSource = "provider" | "tracklane";

export interface EventInput {
  event: NormalisedEvent;
  payload: JsonObject;
  source?: EventSource;
}

export interface Appended {
  eventId: string;
  duplicate: boolean;
}

type Tx = Sql | TransactionSql;

/** Appends events (in the caller's transaction) and answers each input in order. */
export async function appendEvents(tx: Tx, inputs: readonly EventInput[]): Promise<Appended[]> {
  // Duplicates inside one batch collapse to the first occurrence.
  const unique = [...new Map(inputs.map((i) => [i.event.dedupeKey, i])).values()];
  // The whole batch travels as one JSON parameter, expanded server-side: one statement,
  // one round trip, whatever the batch size.
  const rows = unique.map((i) => ({
    dedupe_key: i.event.dedupeKey,
    source: i.source ?? "provider",
    kind: i.event.kind,
    svc_order_id: i.event.svcOrderId,
    client_order_id: i.event.clientOrderId,
    provider_status: i.event.providerStatus,
    occurred_at: i.event.occurredAt.toISOString(),
    payload: i.payload,
  }));
  const inserted = await tx<{ id: string; dedupe_key: string }[]>`
    insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload)
    select * from json_to_recordset(${JSON.stringify(rows)}::text::json) as t(
      dedupe_key text, source text, kind text, svc_order_id text, client_order_id text,
      provider_status text, occurred_at timestamptz, payload jsonb)
    on conflict (dedupe_key) do nothing
    returning id::text, dedupe_key`;
  const ids = new Map<string, { id: string; duplicate: boolean }>();
  for (const row of inserted) ids.set(row.dedupe_key, { id: row.id, duplicate: false });

  const missing = unique.filter((i) => !ids.has(i.event.dedupeKey)).map((i) => i.event.dedupeKey);
  if (missing.length > 0) {
    const existing = await tx<{ id: string; dedupe_key: string }[]>`
      select id::text, dedupe_key from order_events where dedupe_key = any(${missing}::text[])`;
    for (const row of existing) ids.set(row.dedupe_key, { id: row.id, duplicate: true });
  }

  const jobs = new Map<string, ReturnType<typeof projectionJob>>();
  for (const i of unique) {
    if (ids.get(i.event.dedupeKey)?.duplicate !== false) continue;
    const job = projectionJob(i.event.svcOrderId, i.event.clientOrderId);
    jobs.set(job.key, job);
  }
  if (jobs.size > 0) {
    await tx`
      select count(*) from graphile_worker.add_jobs((
        select array_agg(row('order__project', j->'payload', null, null, null, j->>'key', null, null)::graphile_worker.job_spec)
        from json_array_elements(${JSON.stringify([...jobs.values()])}::text::json) as j
      ))`;
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
