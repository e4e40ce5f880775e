/** The commands' worker task; the work itself is in execute.ts. */
import { z } from "zod";
import { abandonCommand, executeCommand } from "./execute.ts";
import { COMMAND_TASK } from "./store.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";

const payloadSchema = z.object({ command_id: z.coerce.number().int().positive() });

/** Sends one order command (place, edit, cancel, dispatch-ready, stop-reattempt) to the provider. */
const commandExecute = defineTask(COMMAND_TASK, payloadSchema, async (payload, { deps, log, job }) => {
  const execute = {
    sql: deps.sql,
    provider: deps.provider,
    log,
    maxAttempts: deps.config.commands.maxAttempts,
    retryBaseMs: deps.config.commands.retryBaseMs,
    dedupesOrders: deps.config.provider.dedupesOrders,
  };
  try {
    await executeCommand(execute, payload.command_id);
  } catch (err) {
    // graphile-worker retries a job that throws, with a growing delay, and stops after
    // its last attempt: the command then ends failed or unconfirmed instead of pending.
    if (!job.lastAttempt) throw err;
    let abandoned: boolean;
    try {
      abandoned = await abandonCommand(execute, payload.command_id, err, job.attempts);
    } catch (cause) {
      log.error({ err, cause }, "the command's last run failed, and so did recording that it ended; it stays pending");
      throw err;
    }
    if (!abandoned) log.warn({ err }, "the command's last run failed after the command had ended");
  }
});

export const commandTasks: readonly TaskDefinition[] = [commandExecute];
