import { readFileSync } from "node:fs";
import type { Sql } from "postgres";
import { z } from "zod";

/**
 * The newest migration this release ships: drizzle records each applied migration with its
 * journal entry's `when` as `created_at`. Read from the journal (not from migrate.ts) so that
 * a web process, which never migrates, does not load graphile-worker for it.
 */
const Journal = z.object({ entries: z.array(z.object({ when: z.number().int(), tag: z.string() })).min(1) });
const journal = Journal.parse(JSON.parse(readFileSync(new URL("../../migrations/meta/_journal.json", import.meta.url), "utf8")));
const newest = journal.entries.reduce((a, b) => (b.when > a.when ? b : a));

/**
 * The database writes dates in another style than ISO (its DateStyle): both drivers
 * (postgres.js and graphile-worker's node-postgres) read only ISO timestamps, and every
 * request and job would fail or wait on what they misread.
 */
export class DateStyleError extends Error {
  readonly dateStyle: string;
  constructor(dateStyle: string) {
    super(`the database's DateStyle is "${dateStyle}", not ISO`);
    this.name = "DateStyleError";
    this.dateStyle = dateStyle;
  }
}

/**
 * Refuses a database whose sessions get another DateStyle than ISO (postgresql.conf, ALTER
 * DATABASE or ROLE ... SET): checked before `npm run migrate` changes anything and at every
 * start, so the setting is named instead of a date misread later.
 */
export async function requireIsoDateStyle(sql: Sql): Promise<void> {
  const [style] = await sql<{ datestyle: string }[]>`select current_setting('DateStyle') as datestyle`;
  if (style !== undefined && !/^\s*ISO\b/i.test(style.datestyle)) throw new DateStyleError(style.datestyle);
}

/**
 * The database lacks migrations of this release below the newest one it has applied:
 * drizzle applies only migrations newer than that, so it would pass over these for ever
 * (a migration merged with an older journal `when` than one a database already ran).
 */
export class MigrationsSkippedError extends Error {
  readonly tags: readonly string[];
  constructor(tags: readonly string[]) {
    super(`the database lacks migrations ${tags.join(", ")} below newer ones it has applied`);
    this.name = "MigrationsSkippedError";
    this.tags = tags;
  }
}

/**
 * A migration failed: drizzle ran it with every other pending one in one transaction, so
 * none of them is applied and the next run starts again from the first.
 */
export class MigrationFailedError extends Error {
  readonly tag: string | null;
  readonly reason: string;
  constructor(tag: string | null, reason: string, cause: unknown) {
    super(`migration ${tag ?? "(unknown)"} failed: ${reason}`, { cause });
    this.name = "MigrationFailedError";
    this.tag = tag;
    this.reason = reason;
  }
}

/** This release's migrations, in the journal's order: drizzle records each by its `when`. */
export const MIGRATIONS: readonly { when: number; tag: string }[] = journal.entries;

/**
 * What `npm run migrate` would do to a database whose journal holds `applied` (the
 * `created_at` of each migration it records), given drizzle's rule: it applies a migration
 * only when its `when` is above the newest one applied. `skipped`: migrations of this
 * release missing from the database below its newest, which drizzle would pass over for
 * ever (a migration merged with an older `when` than one already applied); `unknown`: how
 * many applied ones this release does not ship (a later release's).
 */
export function migrationPlan(local: readonly { when: number; tag: string }[], applied: readonly number[]): { skipped: string[]; unknown: number } {
  const recorded = new Set(applied);
  const last = applied.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);
  const ours = new Set(local.map((m) => m.when));
  return {
    skipped: local.filter((m) => m.when <= last && !recorded.has(m.when)).map((m) => m.tag),
    unknown: [...recorded].filter((w) => !ours.has(w)).length,
  };
}

/** No journal table or schema (undefined_table, invalid_schema_name), or not allowed to read it (insufficient_privilege). */
const JOURNAL_UNREADABLE = new Set(["42P01", "3F000", "42501"]);

/**
 * Whether this release can run on the database: `missing`, no tracklane (or graphile-worker)
 * tables at all; `behind`, drizzle's journal lacks this release's newest migration (`npm run
 * migrate` not yet run for this release); `skipped`, it lacks migrations of this release
 * below newer applied ones, which `npm run migrate` refuses (migrationPlan) and so would
 * never apply; `ready` otherwise (a database a later release migrated is ready too).
 */
export type SchemaState = { state: "ready" } | { state: "missing" } | { state: "behind" } | { state: "skipped"; tags: string[] };

/** The `created_at` of every migration drizzle's journal records (its table must exist). */
export async function appliedMigrations(sql: Sql): Promise<number[]> {
  const rows = await sql<{ created_at: string | null }[]>`select created_at::text from drizzle.__drizzle_migrations`;
  return rows.flatMap((r) => (r.created_at === null ? [] : [Number(r.created_at)]));
}

/**
 * The database's SchemaState, by the plan `npm run migrate` goes by. Where the journal
 * cannot be read (a schema restored without it, a role not allowed to read it), the tables
 * are all it can go by, as before. A probe every few seconds reads the journal's few rows.
 */
export async function schemaState(sql: Sql): Promise<SchemaState> {
  const [row] = await sql<{ tables: boolean; journal: boolean }[]>`
    select to_regclass('public.order_events') is not null
       and to_regclass('graphile_worker.jobs') is not null as tables,
           to_regclass('drizzle.__drizzle_migrations') is not null as journal`;
  if (row?.tables !== true) return { state: "missing" };
  // Without the journal table the tables are all there is to go by; looked up first, so that
  // a readiness probe every few seconds does not leave an error in PostgreSQL's log each time.
  if (row.journal !== true) return { state: "ready" };
  let applied: number[];
  try {
    applied = await appliedMigrations(sql);
  } catch (err) {
    if (JOURNAL_UNREADABLE.has(String((err as { code?: unknown }).code))) return { state: "ready" };
    throw err;
  }
  const plan = migrationPlan(MIGRATIONS, applied);
  if (plan.skipped.length > 0) return { state: "skipped", tags: plan.skipped };
  return applied.some((when) => when >= newest.when) ? { state: "ready" } : { state: "behind" };
}

/** The tag of the newest migration this release needs (named when the database lacks it). */
export const NEWEST_MIGRATION = newest.tag;
