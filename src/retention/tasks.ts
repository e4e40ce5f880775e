/** Retention's worker task: once a day, rows past their retention go (purge.ts). */
import { z } from "zod";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import { purgeExpired } from "./purge.ts";

const PURGE_TASK = "retention__purge";

/** Daily at 03:17 (the server's time), one run at a time; a missed day is made up by the next. */
export const RETENTION_CRONTAB = `17 3 * * * ${PURGE_TASK} ?id=retention_purge&jobKey=retention_purge&queue=retention&max=3`;

const retentionPurge = defineTask(PURGE_TASK, z.unknown(), async (_payload, { deps, log }) => {
  const purged = await purgeExpired(deps.sql, deps.config.retention);
  log.info({ purged, days: deps.config.retention }, "retention: expired rows removed");
});

export const retentionTasks: readonly TaskDefinition[] = [retentionPurge];
