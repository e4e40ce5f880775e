/**
 * Figures of graphile-worker's job table for /metrics: read with tracklane's pool, so a
 * web process reports them without loading graphile-worker.
 */
import type { Tx } from "../db/client.ts";

/** Jobs that used up their attempts, by task. */
export async function failedJobCounts(sql: Tx): Promise<{ task: string; n: number }[]> {
  return await sql<{ task: string; n: number }[]>`
    select task_identifier as task, count(*)::int as n from graphile_worker.jobs
    where attempts >= max_attempts group by 1`;
}
