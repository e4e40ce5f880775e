/**
 * Every task a worker runs and its cron lines, in one list: each feature defines its own
 * tasks (src/<feature>/tasks.ts), the runner takes them from here.
 */
import { AWB_CRONTAB } from "../awb/jobs.ts";
import { awbTasks } from "../awb/tasks.ts";
import { COMMANDS_CRONTAB, commandTasks } from "../commands/tasks.ts";
import { PARTITIONS_CRONTAB, eventTasks } from "../events/tasks.ts";
import { DRAIN_CRONTAB } from "../projection/queue.ts";
import { projectionTasks } from "../projection/tasks.ts";
import { NOTIFY_CRONTAB, notifyTasks } from "../notify/tasks.ts";
import { RECONCILE_CRONTAB, reconcileTasks } from "../reconcile/tasks.ts";
import { RETENTION_CRONTAB, retentionTasks } from "../retention/tasks.ts";
import type { TaskDefinition } from "./define-task.ts";
import { QUEUES_CRONTAB, queueTasks } from "./queues.ts";

export const TASKS: readonly TaskDefinition[] = [...projectionTasks, ...commandTasks, ...awbTasks, ...reconcileTasks, ...notifyTasks, ...retentionTasks, ...eventTasks, ...queueTasks];

export const CRONTAB: readonly string[] = [AWB_CRONTAB, COMMANDS_CRONTAB, DRAIN_CRONTAB, RECONCILE_CRONTAB, NOTIFY_CRONTAB, RETENTION_CRONTAB, PARTITIONS_CRONTAB, QUEUES_CRONTAB];
