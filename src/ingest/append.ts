/**
 * Appending events: one statement for any number of events inserts them (duplicates
 * skipped by the unique dedupe key) and enqueues one projection job per order of the new
 * ones with a single `graphile_worker.add_jobs` call, in the caller's transaction, so an
 * event is never stored without the job that projects it (and add_jobs NOTIFYs once, not
 * once per event).
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
type Job = ReturnType<typeof projectionJob>;

/** Appends events (in the caller's transaction) and answers each input in order. */
export async function appendEvents(tx: Tx, inputs: readonly EventInput[]): Promise<Appended[]> {
  // Duplicates inside one batch collapse to the first occurrence. Sorted by dedupe key
  // (and the jobs by job key), so that concurrent batches take the unique-index and job
  // row locks they share in the same order and never deadlock over them.
  const unique = [...new Map(inputs.map((i) => [i.event.dedupeKey, i])).values()].sort((a, b) =>
    a.event.dedupeKey < b.event.dedupeKey ? -1 : a.event.dedupeKey > b.event.dedupeKey ? 1 : 0,
  );
  const rows = unique.map((i) => {
    const job = projectionJob(i.event.svcOrderId, i.event.clientOrderId);
    return {
      dedupe_key: i.event.dedupeKey,
      source: i.source ?? "provider",
      kind: i.event.kind,
      svc_order_id: i.event.svcOrderId,
      client_order_id: i.event.clientOrderId,
      provider_status: i.event.providerStatus,
      occurred_at: i.event.occurredAt.toISOString(),
      payload: i.payload,
      job_key: job.key,
      job_payload: job.payload,
    };
  });
  // The whole batch travels as one JSON parameter, expanded server-side: one statement,
  // one round trip, whatever the batch size. The jobs are those of the rows actually
  // inserted (a duplicate needs no projection).
  const result = await tx<{ kind: "event" | "job"; id: string | null; key: string }[]>`
    with input as (
      select * from json_to_recordset(${JSON.stringify(rows)}::text::json) as t(
        dedupe_key text, source text, kind text, svc_order_id text, client_order_id text,
        provider_status text, occurred_at timestamptz, payload jsonb, job_key text, job_payload json)
    ),
    inserted as (
      insert into order_events (dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload)
      select dedupe_key, source, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload
      from input order by dedupe_key
      on conflict (dedupe_key) do nothing
      returning id, dedupe_key
    ),
    specs as (
      select array_agg(row('order__project', j.job_payload, null, null, null, j.job_key, null, null)::graphile_worker.job_spec
                       order by j.job_key) as specs
      from (select distinct on (input.job_key) input.job_key, input.job_payload
            from inserted join input using (dedupe_key) order by input.job_key) as j
    ),
    added as (
      select a.key from specs cross join lateral graphile_worker.add_jobs(specs.specs) as a
      where specs.specs is not null
    )
    select 'event' as kind, id::text, dedupe_key as key from inserted
    union all
    select 'job', null, key from added`;

  const ids = new Map<string, { id: string; duplicate: boolean }>();
  const added = new Set<string>();
  for (const r of result) {
    if (r.kind === "event") ids.set(r.key, { id: r.id!, duplicate: false });
    else added.add(r.key);
  }

  const missing = unique.filter((i) => !ids.has(i.event.dedupeKey)).map((i) => i.event.dedupeKey);
  if (missing.length > 0) {
    const existing = await tx<{ id: string; dedupe_key: string }[]>`
      select id::text, dedupe_key from order_events where dedupe_key = any(${missing}::text[])`;
    for (const row of existing) ids.set(row.dedupe_key, { id: row.id, duplicate: true });
  }

  const wanted = new Map<string, Job>();
  for (const i of unique) {
    if (ids.get(i.event.dedupeKey)?.duplicate !== false) continue;
    const job = projectionJob(i.event.svcOrderId, i.event.clientOrderId);
    if (!added.has(job.key)) wanted.set(job.key, job);
  }
  await enqueueProjections(tx, [...wanted.values()]);

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

/** Attempts before giving up on enqueueing (each lost race needs another job to be locked). */
const ENQUEUE_ATTEMPTS = 10;

/**
 * add_jobs again for jobs it returned no row for. Such a job key lost a race: the pending
 * job with that key was locked by a worker after add_jobs cleared the keys of locked
 * jobs and before its upsert, whose `where locked_at is null` then skipped it. That job
 * may already have read the order's events without ours, so without a new job our events
 * would never be projected (graphile/worker#580; before this, the benchmark saw ~7% of
 * its orders end stale). Asking again clears the now-locked job's key and inserts a new
 * job.
 */
async function enqueueProjections(tx: Tx, jobs: Job[]): Promise<void> {
  let pending = jobs.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (let attempt = 1; pending.length > 0; attempt++) {
    if (attempt > ENQUEUE_ATTEMPTS) throw new Error(`could not enqueue ${pending.length} projection jobs`);
    const added = await tx<{ key: string }[]>`
      select key from graphile_worker.add_jobs((
        select array_agg(row('order__project', j->'payload', null, null, null, j->>'key', null, null)::graphile_worker.job_spec)
        from json_array_elements(${JSON.stringify(pending)}::text::json) as j
      ))`;
    const done = new Set(added.map((r) => r.key));
    pending = pending.filter((j) => !done.has(j.key));
  }
}
