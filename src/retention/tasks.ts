/** Retention's worker task: once a day, rows past their retention go (purge.ts), and finished orders' personal data (redact.ts). */
import type { Sql } from "postgres";
import { z } from "zod";
import { databaseNow } from "../db/client.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import { PURGE_BATCH, purgeExpired } from "./purge.ts";
import { redactDue } from "./redact.ts";

export const PURGE_TASK = "retention__purge";
const PURGE_KEY = "retention_purge";
const PURGE_QUEUE = "retention";

/** Daily at 03:17 UTC (graphile-worker's cron reads UTC), one run at a time; a missed day is made up by the next. */
export const RETENTION_CRONTAB = `17 3 * * * ${PURGE_TASK} ?id=retention_purge&jobKey=${PURGE_KEY}&queue=${PURGE_QUEUE}&max=3`;

/**
 * A run cut short by a stopping worker: the same job again, due at once, so the next
 * worker finishes it rather than the cron a day later. Its key clears the running job's
 * (graphile-worker keeps a locked job and adds a new one).
 */
async function queueTheRest(sql: Sql): Promise<void> {
  await sql`select graphile_worker.add_job(${PURGE_TASK}, queue_name := ${PURGE_QUEUE}, job_key := ${PURGE_KEY}, max_attempts := 3)`;
}

/**
 * Batches of deletions, then orders one at a time, each its own transaction: a stopping
 * worker (shared.stopping) ends the run between two of them, well within its 15 s for
 * running jobs, and the rest is queued for the next worker.
 */
const retentionPurge = defineTask(PURGE_TASK, z.unknown(), async (_payload, { deps, shared, log }) => {
  const { stopping } = shared;
  // The database's clock, which dated the rows (received_at, finished_at, …): a worker
  // host's clock running ahead would remove them early.
  const now = await databaseNow(deps.sql);
  const purged = await purgeExpired(deps.sql, deps.config.retention, now, PURGE_BATCH, stopping);
  log.info({ purged, days: deps.config.retention }, "retention: expired rows removed");
  const { failed, ...redacted } = stopping.aborted ? { failed: [] } : await redactDue(deps.sql, deps.config.retention.piiDays, now, stopping);
  if (!stopping.aborted) log.info({ redacted, piiDays: deps.config.retention.piiDays }, "retention: personal data of finished orders redacted");
  for (const { orderId, error } of failed) log.error({ err: error, orderId }, "retention: an order's personal data could not be redacted; tried again next run");
  if (stopping.aborted) {
    await queueTheRest(deps.sql);
    log.info({ purged, redacted }, "retention: stopped with the worker; the rest is queued for the next worker");
    return;
  }
  // The job fails (counted in /metrics, retried) once everything else is done.
  if (failed.length > 0) throw new Error(`personal data of ${failed.length} order(s) could not be redacted: ${failed.map((f) => f.orderId).join(", ")}`);
});

export const retentionTasks: readonly TaskDefinition[] = [retentionPurge];
