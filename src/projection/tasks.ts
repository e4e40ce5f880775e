/**
 * The projection's worker tasks: draining the queue of stored events (queue.ts), and
 * re-deriving one order on its own after it failed inside a drain batch.
 */
import { z } from "zod";
import { projectPayload, PROJECT_TASK } from "./jobs.ts";
import { projectOrders, reportPlacements } from "./project.ts";
import { DRAIN_TASK } from "./backlog.ts";
import { createDrainer } from "./queue.ts";
import { defineTask } from "../worker/define-task.ts";
import type { TaskDefinition } from "../worker/define-task.ts";

/**
 * Projects the orders of queued events. An ingest flush adds one such job when no drain
 * loop runs (the gate, backlog.ts); each runner has one drainer, which runs a few drain
 * loops and folds the other jobs into them. The payload is not read.
 */
const projectionDrain = defineTask(DRAIN_TASK, z.unknown(), {
  setup: (deps, shared) => createDrainer({ ...deps, load: shared.load, stopping: shared.stopping }, { intervalMs: deps.config.projection.intervalMs }),
  run: (_payload, { state: drainer }) => drainer.drain(),
});

/**
 * Re-derives one order from its events. Projection normally runs in drain batches; an
 * order whose projection failed inside a batch is retried alone here, with
 * graphile-worker's backoff.
 */
const orderProject = defineTask(PROJECT_TASK, projectPayload, async (payload, { deps, log }) => {
  const [result] = await projectOrders(deps.sql, [{ svcOrderId: payload.svc_order_id, clientOrderId: payload.client_order_id }]);
  if (result?.changed && result.newestReceivedAt) {
    deps.metrics.projectionLag.observe(Math.max(0, Date.now() - result.newestReceivedAt.getTime()) / 1000);
  }
  if (result) reportPlacements(log, [result]);
});

export const projectionTasks: readonly TaskDefinition[] = [projectionDrain, orderProject];
