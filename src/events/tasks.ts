/** The event log's worker task: every hour, partitions made ahead, and those past retention dropped (partitions.ts). */
import { z } from "zod";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";
import { dropExpiredPartitions, ensurePartitions, isLockNotAvailable, PARTITION_LOCK_TIMEOUT_MS } from "./partitions.ts";

const PARTITIONS_TASK = "events__partitions";

/** Hourly at :07, one run at a time. */
export const PARTITIONS_CRONTAB = `7 * * * * ${PARTITIONS_TASK} ?id=event_partitions&jobKey=event_partitions&queue=retention&max=3`;

const eventPartitions = defineTask(PARTITIONS_TASK, z.unknown(), async (_payload, { deps, shared, log }) => {
  const { partition, locationDays, statusDays } = deps.config.events;
  // Each DDL waits PARTITION_LOCK_TIMEOUT_MS for its locks at most: a session left open in
  // a transaction costs a run, not the retention queue (shared with the daily redaction).
  const bound = { lockTimeoutMs: PARTITION_LOCK_TIMEOUT_MS };
  try {
    // Today is the database's: the day appends date new orders by (partitions.ts).
    const made = await ensurePartitions(deps.sql, partition, undefined, bound);
    if (made.length > 0) log.info({ made }, "event log: partitions made ahead");
  } catch (err) {
    if (!isLockNotAvailable(err)) throw err;
    log.warn({ err, lockTimeoutMs: bound.lockTimeoutMs }, "event log: partitions not made ahead, a lock on the log was not granted in time; tried again next run");
  }
  // Partitions are made in one short transaction; drops go one partition at a time, and a
  // stopping worker ends them between two (the next run drops the rest).
  const { dropped, held, blocked } = await dropExpiredPartitions(deps.sql, { locationDays, statusDays }, undefined, { ...bound, stopping: shared.stopping });
  if (dropped.length > 0) log.info({ dropped, locationDays, statusDays }, "event log: partitions past retention dropped");
  if (held.length > 0) log.warn({ held }, "event log: partitions past retention kept, some of their events are not projected yet");
  if (blocked !== null) {
    log.warn(
      { partition: blocked.partition, holders: blocked.holders, lockTimeoutMs: bound.lockTimeoutMs },
      "event log: dropping a partition past retention waited too long for sessions holding locks on the log (holders, oldest first: one idle in a transaction?); tried again next run",
    );
  }
});

export const eventTasks: readonly TaskDefinition[] = [eventPartitions];
