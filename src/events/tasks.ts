/** The event log's worker task: every hour, partitions made ahead, and those past retention dropped (partitions.ts). */
import { z } from "zod";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import { dropExpiredPartitions, ensurePartitions } from "./partitions.ts";

const PARTITIONS_TASK = "events__partitions";

/** Hourly at :07, one run at a time. */
export const PARTITIONS_CRONTAB = `7 * * * * ${PARTITIONS_TASK} ?id=event_partitions&jobKey=event_partitions&queue=retention&max=3`;

const eventPartitions = defineTask(PARTITIONS_TASK, z.unknown(), async (_payload, { deps, log }) => {
  const { partition, locationDays, statusDays } = deps.config.events;
  const made = await ensurePartitions(deps.sql, partition);
  if (made.length > 0) log.info({ made }, "event log: partitions made ahead");
  const { dropped, held } = await dropExpiredPartitions(deps.sql, { locationDays, statusDays });
  if (dropped.length > 0) log.info({ dropped, locationDays, statusDays }, "event log: partitions past retention dropped");
  if (held.length > 0) log.warn({ held }, "event log: partitions past retention kept, some of their events are not projected yet");
});

export const eventTasks: readonly TaskDefinition[] = [eventPartitions];
