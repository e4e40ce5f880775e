/**
 * Housekeeping: rows kept for diagnosis go once they are older than their retention
 * (REJECTED_RETENTION_DAYS, COMMAND_RETENTION_DAYS, NOTIFY_ATTEMPT_RETENTION_DAYS,
 * NOTIFY_MESSAGE_RETENTION_DAYS; 0 keeps them forever). Each table's owner deletes its own rows, in small batches (short
 * transactions, no long locks), until none is left.
 */
import type { Sql } from "postgres";
import { purgeFinishedCommands } from "../commands/store.ts";
import { purgeRejected } from "../ingest/rejected.ts";
import { purgeAttempts } from "../notify/deliveries.ts";
import { purgeMessages } from "../notify/outbox.ts";

export const PURGE_BATCH = 5000;

export interface RetentionDays {
  rejectedDays: number;
  commandDays: number;
  attemptDays: number;
  messageDays: number;
}

export interface Purged {
  rejected: number;
  commands: number;
  attempts: number;
  messages: number;
}

/**
 * Deletes in batches while a batch comes back full, and no batch begins once `stopping`
 * has aborted: each batch is its own transaction, so what is left waits for the next run.
 */
async function drain(step: () => Promise<number>, batch: number, stopping: AbortSignal | undefined): Promise<number> {
  let total = 0;
  while (stopping?.aborted !== true) {
    const n = await step();
    total += n;
    if (n < batch) break;
  }
  return total;
}

/** What is past its retention, deleted; cut short when `stopping` aborts (the worker is stopping). */
export async function purgeExpired(sql: Sql, days: RetentionDays, now = new Date(), batch = PURGE_BATCH, stopping?: AbortSignal): Promise<Purged> {
  const before = (d: number) => new Date(now.getTime() - d * 86_400_000);
  return {
    rejected: days.rejectedDays > 0 ? await drain(() => purgeRejected(sql, before(days.rejectedDays), batch), batch, stopping) : 0,
    commands: days.commandDays > 0 ? await drain(() => purgeFinishedCommands(sql, before(days.commandDays), batch), batch, stopping) : 0,
    attempts: days.attemptDays > 0 ? await drain(() => purgeAttempts(sql, before(days.attemptDays), batch), batch, stopping) : 0,
    messages: days.messageDays > 0 ? await drain(() => purgeMessages(sql, before(days.messageDays), batch), batch, stopping) : 0,
  };
}
