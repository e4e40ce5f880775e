import type { Sql } from "postgres";

/**
 * True when both schemas are in place (used by /readyz). Apart from src/db/migrate.ts so
 * that a web process, which never migrates, does not load graphile-worker for it.
 */
export async function migrationsApplied(sql: Sql): Promise<boolean> {
  const rows = await sql<{ ok: boolean }[]>`
    select to_regclass('public.order_events') is not null
       and to_regclass('graphile_worker.jobs') is not null as ok`;
  return rows[0]?.ok === true;
}
