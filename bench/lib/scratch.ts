/**
 * The benches' databases: the server (DATABASE_URL's, else the embedded one under
 * .data/bench, started as `npm start` would) and scratch databases on it, migrated for a
 * run and dropped afterwards (kept with BENCH_KEEP_DB=1, for a look inside).
 */
import { resolve } from "node:path";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { withDatabase } from "../../src/db/url.ts";
import type { Logger } from "../../src/logger.ts";
import { resolveDatabase } from "../../src/runtime/database.ts";
import { ROOT } from "./processes.ts";

/** The bench's PostgreSQL server. */
export async function benchServer(log: Logger) {
  return await resolveDatabase({ databaseUrl: process.env.DATABASE_URL || undefined, dataDir: resolve(ROOT, ".data/bench"), log });
}

/** A fresh database `name` with tracklane's migrations for `body`, dropped afterwards (unless BENCH_KEEP_DB). */
export async function scratchDatabase<T>(admin: postgres.Sql, serverUrl: string, name: string, log: Logger, body: (url: string) => Promise<T>): Promise<T> {
  await admin.unsafe(`create database ${name}`);
  const url = withDatabase(serverUrl, name);
  try {
    await runMigrations(url, log);
    return await body(url);
  } finally {
    if (process.env.BENCH_KEEP_DB) console.log(`kept database ${name} (BENCH_KEEP_DB)`);
    else await admin.unsafe(`drop database if exists ${name} with (force)`);
  }
}

/** The server, one scratch database on it for `body`, then everything released. */
export async function onScratchDatabase<T>(name: string, log: Logger, body: (url: string, server: { description: string }) => Promise<T>): Promise<T> {
  const server = await benchServer(log);
  const admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
  try {
    return await scratchDatabase(admin, server.url, name, log, (url) => body(url, server));
  } finally {
    await admin.end();
    await server.release();
  }
}

/**
 * History written straight in SQL must land in partitions of the event log, and its order
 * keys need their periods (order_periods): monthly partitions of both kinds back to the
 * month of `since` (the migration made the current month on), then one period per order
 * key, as the append would have recorded it.
 */
export async function partitionsSince(sql: postgres.Sql, since: Date, kinds: readonly ("location" | "status")[] = ["location", "status"]): Promise<void> {
  await sql`
    select order_events_attach_partition(k, m::date, (m + interval '1 month')::date)
    from unnest(${kinds as string[]}::text[]) as k,
         generate_series(date_trunc('month', ${since}::timestamptz at time zone 'UTC'), date_trunc('month', now() at time zone 'UTC'), interval '1 month') as m
    where not exists (select from event_partitions p where p.kind = k and p.starts <= m::date and p.ends > m::date)`;
}

/**
 * The event log's events and bytes on disk (its partitions and order_periods). As numbers:
 * these connections (driverSql) read a bigint as a string, so count(*) is cast.
 */
export async function logSize(sql: postgres.Sql): Promise<{ events: number; bytes: number }> {
  const [row] = await sql<{ events: number; bytes: number }[]>`
    select (select count(*) from order_events)::float8 as events,
           ((select sum(pg_total_relation_size(relid)) from pg_partition_tree('order_events') where isleaf) + pg_total_relation_size('order_periods'))::float8 as bytes`;
  return row!;
}
