/** The commands' worker tasks and cron line; the work itself is in execute.ts. */
import { z } from "zod";
import { abandonCommand, abandonStranded, executeCommand } from "./execute.ts";
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
    metrics: deps.metrics,
  };
  try {
    await executeCommand(execute, payload.command_id, job.id);
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

const SWEEP_TASK = "command__sweep";

/**
 * Every five minutes, one run across all workers, never two at once, at most one attempt
 * (the next tick is the retry): as the reconciliation's cron line.
 */
export const COMMANDS_CRONTAB = `*/5 * * * * ${SWEEP_TASK} ?id=command_sweep&jobKey=command_sweep&queue=command-sweep&max=1`;

/** Ends the pending commands that no job will run again (abandonStranded). The payload is not read. */
const commandSweep = defineTask(SWEEP_TASK, z.unknown(), async (_payload, { deps, log }) => {
  const ended = await abandonStranded({ sql: deps.sql, log, metrics: deps.metrics });
  if (ended > 0) log.warn({ ended }, "ended stranded commands");
});

export const commandTasks: readonly TaskDefinition[] = [commandExecute, commandSweep];
