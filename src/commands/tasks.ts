/** The commands' worker task; the work itself is in execute.ts. */
import { z } from "zod";
import { executeCommand } from "./execute.ts";
import { COMMAND_TASK } from "./store.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";

const payloadSchema = z.object({ command_id: z.coerce.number().int().positive() });

/** Sends one order command (place, edit, cancel, dispatch-ready, stop-reattempt) to the provider. */
const commandExecute = defineTask(COMMAND_TASK, payloadSchema, async (payload, { deps, log }) => {
  await executeCommand(
    {
      sql: deps.sql,
      provider: deps.provider,
      log,
      maxAttempts: deps.config.commands.maxAttempts,
      retryBaseMs: deps.config.commands.retryBaseMs,
      dedupesOrders: deps.config.provider.dedupesOrders,
    },
    payload.command_id,
  );
});

export const commandTasks: readonly TaskDefinition[] = [commandExecute];
