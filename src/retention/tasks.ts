/** Retention's worker task: once a day, rows past their retention go (purge.ts), and finished orders' personal data (redact.ts). */
import { z } from "zod";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import { purgeExpired } from "./purge.ts";
import { redactDue } from "./redact.ts";

const PURGE_TASK = "retention__purge";

/** Daily at 03:17 UTC (graphile-worker's cron reads UTC), one run at a time; a missed day is made up by the next. */
export const RETENTION_CRONTAB = `17 3 * * * ${PURGE_TASK} ?id=retention_purge&jobKey=retention_purge&queue=retention&max=3`;

const retentionPurge = defineTask(PURGE_TASK, z.unknown(), async (_payload, { deps, log }) => {
  const purged = await purgeExpired(deps.sql, deps.config.retention);
  log.info({ purged, days: deps.config.retention }, "retention: expired rows removed");
  const { failed, ...redacted } = await redactDue(deps.sql, deps.config.retention.piiDays);
  log.info({ redacted, piiDays: deps.config.retention.piiDays }, "retention: personal data of finished orders redacted");
  for (const { orderId, error } of failed) log.error({ err: error, orderId }, "retention: an order's personal data could not be redacted; tried again next run");
  // The job fails (counted in /metrics, retried) once everything else is done.
  if (failed.length > 0) throw new Error(`personal data of ${failed.length} order(s) could not be redacted: ${failed.map((f) => f.orderId).join(", ")}`);
});

export const retentionTasks: readonly TaskDefinition[] = [retentionPurge];
