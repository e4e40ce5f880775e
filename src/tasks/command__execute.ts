import type { Task } from "graphile-worker";
import { z } from "zod";
import { executeCommand } from "../commands/execute.ts";
import type { WorkerDeps } from "./runner.ts";

const payloadSchema = z.object({ command_id: z.coerce.number().int().positive() });

/** Sends one order command (place, edit, cancel, dispatch-ready, stop-reattempt) to the provider. */
export function commandExecute(deps: WorkerDeps): Task {
  return async (raw, helpers) => {
    const payload = payloadSchema.safeParse(raw);
    if (!payload.success) {
      helpers.logger.error("command__execute: invalid payload, dropped", { issues: payload.error.issues });
      return;
    }
    await executeCommand(
      {
        sql: deps.sql,
        provider: deps.provider,
        log: deps.log,
        maxAttempts: deps.config.commands.maxAttempts,
        retryBaseMs: deps.config.commands.retryBaseMs,
        dedupesOrders: deps.config.provider.dedupesOrders,
      },
      payload.data.command_id,
    );
  };
}
