/**
 * The event log's partitions (migration 0011): made ahead of need, and dropped whole when
 * retention allows. The one owner of `event_partitions`; the only code that removes
 * events. Partitions are ranges of (kind, period), `period` being the UTC day an order
 * was first seen, so a partition holds whole orders' events of one kind.
 */
import type { Sql } from "postgres";
import { createPool, databaseNow } from "../db/client.ts";
import type { Logger } from "../logger.ts";
import { dayOf, pastRetention, rangesToAdd } from "../domain/periods.ts";
import type { Day, PartitionSpan } from "../domain/periods.ts";

export const EVENT_KINDS = ["location", "status"] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

/**
 * Whole spans made ahead of the current one, about a week or more: appends never wait for
 * the hourly job, and a worker down for days still finds its partitions. Few, because
 * every read by order id looks into each partition, empty or not.
 */
export const SPANS_AHEAD: Record<PartitionSpan, number> = { month: 1, week: 1, day: 7 };

/** Arbitrary constant key of the advisory lock that serialises partition changes. */
export const PARTITIONS_LOCK = 7_305_201_145;

/**
 * How long the hourly job's DDL waits for a lock (PostgreSQL's lock_timeout) before it
 * gives up for this run. Detaching a partition waits for every transaction that was using
 * the log; one left open (a session idle in a transaction) would hold the job, and the
 * retention queue it shares with the daily redaction, for as long as it stays open.
 */
export const PARTITION_LOCK_TIMEOUT_MS = 10_000;

/** lock_not_available: the DDL waited lock_timeout and was cancelled. */
export const isLockNotAvailable = (err: unknown): boolean => typeof err === "object" && err !== null && (err as { code?: unknown }).code === "55P03";

/** A session holding a lock on the log or on one of its partitions: what a DDL that gave up waited for. */
export interface LockHolder {
  pid: number;
  application_name: string;
  state: string | null;
  /** When its transaction began. */
  xact_start: Date | null;
  /** Its last statement, cut short. */
  query: string;
}

/** Sessions holding a lock on any of these tables, oldest transaction first (this session left out). */
async function lockHolders(sql: Sql, tables: readonly string[]): Promise<LockHolder[]> {
  return await sql<LockHolder[]>`
    select a.pid, a.application_name, a.state, a.xact_start, left(a.query, 200) as query
    from pg_stat_activity a
    where a.pid <> pg_backend_pid() and a.pid in (
      select l.pid from pg_locks l
      where l.locktype = 'relation' and l.granted
        and l.relation = any(select to_regclass(t) from unnest(${tables as string[]}::text[]) t))
    order by a.xact_start nulls last, a.pid`;
}

export interface EventPartition {
  kind: EventKind;
  starts: Day;
  ends: Day;
  name: string;
}

export async function listPartitions(sql: Sql): Promise<EventPartition[]> {
  return await sql<EventPartition[]>`
    select kind, starts::text, ends::text, name from event_partitions order by kind, starts`;
}

/**
 * Makes the partitions each kind needs through SPANS_AHEAD spans past today's; the names
 * made. Today is the database's (databaseNow) unless `now` is given: appends date an order
 * by it. One transaction under an advisory lock: processes starting together make each
 * partition once. Attaching locks the log with SHARE UPDATE EXCLUSIVE only, so appends
 * and reads go on.
 */
export async function ensurePartitions(sql: Sql, span: PartitionSpan, now?: Date, options: { lockTimeoutMs?: number } = {}): Promise<string[]> {
  return await sql.begin(async (tx) => {
    // The hourly job's bound (lock_not_available when reached); appends that make their
    // partitions wait as long as it takes, as any other write does.
    if (options.lockTimeoutMs !== undefined) await tx`select set_config('lock_timeout', ${`${options.lockTimeoutMs}ms`}, true)`;
    await tx`select pg_advisory_xact_lock(${PARTITIONS_LOCK})`;
    const today = dayOf(now ?? (await databaseNow(tx)));
    const lasts = await tx<{ kind: EventKind; ends: Day }[]>`
      select kind, max(ends)::text as ends from event_partitions group by kind`;
    const made: string[] = [];
    for (const kind of EVENT_KINDS) {
      const last = lasts.find((l) => l.kind === kind)?.ends ?? null;
      for (const r of rangesToAdd(last, today, span, SPANS_AHEAD[span])) {
        const [row] = await tx<{ name: string }[]>`select order_events_attach_partition(${kind}, ${r.starts}::date, ${r.ends}::date) as name`;
        made.push(row!.name);
      }
    }
    return made;
  });
}

/**
 * PostgreSQL's refusal of a row no partition of the log takes (check_violation, "no
 * partition of relation … found for row"): the partitions for today's orders were not
 * made ahead, because no worker ran the hourly job for longer than SPANS_AHEAD spans. A
 * server whose messages are not in English still names no constraint for it, as every
 * CHECK constraint's violation does.
 */
export function isMissingPartition(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, message, constraint_name } = err as { code?: unknown; message?: unknown; constraint_name?: unknown };
  if (code !== "23514") return false;
  return (typeof message === "string" && message.startsWith("no partition of relation")) || constraint_name === undefined || constraint_name === null;
}

/**
 * Runs `work`, which appends to the log in statements or transactions of its own; when it
 * finds no partition for its events (isMissingPartition), makes them as the hourly job
 * would and runs it once more: what it appends is stored instead of failing with a 500.
 */
export async function withPartitionsMade<T>(sql: Sql, span: PartitionSpan, log: Logger, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (!isMissingPartition(err)) throw err;
    const made = await ensurePartitions(sql, span);
    log.warn({ made }, "event log: an append found no partition for its events, so they were made now; is a worker running the hourly events__partitions job?");
    return await work();
  }
}

/**
 * ensurePartitions on its own connection, for npm run migrate: a log that went without a
 * worker for a while gets its partitions before any append needs them. (npm start makes
 * them as its worker starts: runtime/services.ts.)
 */
export async function ensureEventPartitions(url: string, span: PartitionSpan, log: Logger): Promise<void> {
  const sql = createPool(url, 1, "tracklane-migrate");
  try {
    const made = await ensurePartitions(sql, span);
    if (made.length > 0) log.info({ made }, "event log: partitions made ahead");
  } finally {
    await sql.end({ timeout: 5 });
  }
}

export interface Retention {
  /** Days each kind is kept, counted from the order's first event; 0: forever. */
  locationDays: number;
  statusDays: number;
}

export interface Dropped {
  dropped: string[];
  /** Past retention but kept: some of their events are not projected yet. */
  held: string[];
  /**
   * The partition whose detach or drop waited longer than the lock timeout, and who held
   * locks on the log or on it then; the run stopped there, and the next one goes on from
   * it. Null when nothing waited that long.
   */
  blocked: { partition: string; holders: LockHolder[] } | null;
}

/**
 * A connection of its own with lock_timeout set, for the DDL that runs outside a
 * transaction (DETACH … CONCURRENTLY cannot run in one, so SET LOCAL cannot bound it).
 */
async function withLockTimeout<T>(sql: Sql, ms: number, work: (conn: Sql) => Promise<T>): Promise<T> {
  const conn = await sql.reserve();
  try {
    await conn`select set_config('lock_timeout', ${`${ms}ms`}, false)`;
    try {
      return await work(conn);
    } finally {
      await conn`reset lock_timeout`;
    }
  } finally {
    conn.release();
  }
}

/**
 * Drops the partitions past their kind's retention, counted to the database's today
 * (databaseNow, the clock that dated their orders) unless `now` is given, oldest first,
 * never a partition that still holds an event waiting for projection (it goes on a later
 * run), nor a younger one of the same kind behind it: appends send a late event to the
 * oldest partition its kind has left when its own period's is gone, and a held partition
 * below a dropped one would leave the dropped range with nowhere to go (the insert would
 * fail). Per partition:
 * its event_partitions row goes first (appends stop routing late events to it), then it is
 * detached CONCURRENTLY (no lock that stops appends or reads), then dropped. A run cut
 * off half way is finished by the next one.
 *
 * The detach waits for every transaction using the log, and the drop for any on the
 * partition: with `lockTimeoutMs`, either gives up once it has waited that long, and the
 * run stops there, naming who held locks (`blocked`). A detach given up is left pending
 * (its row already gone, so no append is sent to it), and the next run finishes it.
 * Once `stopping` aborts (the worker is stopping), no further partition is begun: each may
 * wait twice `lockTimeoutMs`, and the next run drops the rest.
 */
export async function dropExpiredPartitions(
  sql: Sql,
  retention: Retention,
  now?: Date,
  options: { lockTimeoutMs?: number; stopping?: AbortSignal | undefined } = {},
): Promise<Dropped> {
  const today = dayOf(now ?? (await databaseNow(sql)));
  const days: Record<EventKind, number> = { location: retention.locationDays, status: retention.statusDays };
  const result: Dropped = { dropped: [], held: [], blocked: null };
  const bounded = async (work: (conn: Sql) => Promise<unknown>) =>
    options.lockTimeoutMs === undefined ? await work(sql) : await withLockTimeout(sql, options.lockTimeoutMs, work);
  const due = (await listPartitions(sql)).filter((p) => pastRetention(p, today, days[p.kind]));
  // A partition whose row an interrupted run already removed: still attached or detached.
  // In the log's own schema only: a table of the same name elsewhere (a copy kept aside)
  // is not the log's, and the unqualified names below would not find it.
  const orphans = await sql<{ name: string }[]>`
    select c.relname as name from pg_class c
    where c.relname ~ '^order_events_(location|status)_[0-9]{8}$' and c.relkind = 'r'
      and c.relnamespace = (select relnamespace from pg_class where oid = 'order_events'::regclass)
      and not exists (select from event_partitions p where p.name = c.relname)`;
  const heldKinds = new Set<EventKind>();
  const candidates: { name: string; partition: EventPartition | null }[] = [
    ...orphans.map((o) => ({ name: o.name, partition: null })),
    ...due.map((p) => ({ name: p.name, partition: p })),
  ];
  for (const { name: p, partition } of candidates) {
    if (options.stopping?.aborted === true) return result;
    const kind = partition?.kind ?? null;
    if ((kind !== null && heldKinds.has(kind)) || (await holdsQueuedEvents(sql, p))) {
      // An orphan left pending detach that holds queued events (an append that read its row
      // before it went stored one while the detach waited, then gave up): attached again,
      // with its row. Pending, the log hides its events from the projection, and no other
      // partition of the log could be detached.
      if (partition === null) {
        try {
          const restored = await restorePending(sql, p, bounded);
          if (restored !== null) heldKinds.add(restored.kind);
        } catch (err) {
          if (!isLockNotAvailable(err)) throw err;
          result.blocked = { partition: p, holders: await lockHolders(sql, ["order_events", p]) };
          return result;
        }
      }
      result.held.push(p);
      if (kind !== null) heldKinds.add(kind);
      continue;
    }
    await sql`delete from event_partitions where name = ${p}`;
    try {
      await bounded((conn) => detach(conn, p));
    } catch (err) {
      if (!isLockNotAvailable(err)) throw err;
      result.blocked = { partition: p, holders: await lockHolders(sql, ["order_events", p]) };
      return result;
    }
    // An append that read the partition's row before it went may have stored an event in
    // it since the check above: the detach waited for it to commit. Such an event is
    // acknowledged and not projected yet: the partition goes back, held.
    if (partition !== null && (await holdsQueuedEvents(sql, p))) {
      await reattach(sql, partition);
      result.held.push(p);
      heldKinds.add(partition.kind);
      continue;
    }
    try {
      await bounded((conn) => conn`drop table if exists ${conn(p)}`);
    } catch (err) {
      // Detached, its row gone: the next run finds it and drops it.
      if (!isLockNotAvailable(err)) throw err;
      result.blocked = { partition: p, holders: await lockHolders(sql, [p]) };
      return result;
    }
    result.dropped.push(p);
  }
  return result;
}

/**
 * A partition left pending detach (a DETACH … CONCURRENTLY given up after its first step),
 * detached for good and attached again with its row, as it was: its bounds are read before
 * FINALIZE clears them. Null when it is not pending (an attached orphan's events are seen).
 */
async function restorePending(sql: Sql, name: string, bounded: (work: (conn: Sql) => Promise<unknown>) => Promise<unknown>): Promise<EventPartition | null> {
  const [row] = await sql<{ bound: string | null }[]>`
    select pg_get_expr(c.relpartbound, c.oid) as bound from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhrelid = to_regclass(${name}) and i.inhparent = 'order_events'::regclass and i.inhdetachpending`;
  if (row === undefined) return null;
  const m = /^FOR VALUES FROM \('(location|status)', '(\d{4}-\d{2}-\d{2})'\) TO \('\1', '(\d{4}-\d{2}-\d{2})'\)$/.exec(row.bound ?? "");
  if (!m) throw new Error(`partition ${name} is pending detach with bounds tracklane does not make: ${row.bound ?? "none"}`);
  const partition: EventPartition = { kind: m[1] as EventKind, starts: m[2] as Day, ends: m[3] as Day, name };
  await bounded((conn) => conn`alter table order_events detach partition ${conn(name)} finalize`);
  await reattach(sql, partition);
  return partition;
}

/** A detached partition attached again as it was, with its row (one transaction). */
async function reattach(sql: Sql, p: EventPartition): Promise<void> {
  await sql.begin(async (tx) => {
    // DDL takes no parameters: PostgreSQL's format() quotes the bounds, as migration 0011's
    // order_events_attach_partition does.
    const [statement] = await tx<{ ddl: string }[]>`
      select format('ALTER TABLE order_events ATTACH PARTITION %I FOR VALUES FROM (%L, %L) TO (%L, %L)',
        ${p.name}::text, ${p.kind}::text, ${p.starts}::text, ${p.kind}::text, ${p.ends}::text) as ddl`;
    await tx.unsafe(statement!.ddl);
    await tx`insert into event_partitions (kind, starts, ends, name) values (${p.kind}, ${p.starts}, ${p.ends}, ${p.name})`;
  });
}

async function holdsQueuedEvents(sql: Sql, partition: string): Promise<boolean> {
  const [row] = await sql<{ held: boolean }[]>`
    select exists (select from projection_queue q join ${sql(partition)} e on e.id = q.event_id) as held`;
  return row?.held === true;
}

/** Detaches a partition from the log if it still is attached; finishes a detach cut off half way. */
async function detach(sql: Sql, partition: string): Promise<void> {
  const [state] = await sql<{ pending: boolean }[]>`
    select i.inhdetachpending as pending from pg_inherits i
    where i.inhrelid = to_regclass(${partition}) and i.inhparent = 'order_events'::regclass`;
  if (state === undefined) return;
  // DETACH ... CONCURRENTLY runs in two transactions of its own: never inside sql.begin.
  if (state.pending) await sql`alter table order_events detach partition ${sql(partition)} finalize`;
  else await sql`alter table order_events detach partition ${sql(partition)} concurrently`;
}
