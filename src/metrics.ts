import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";

/**
 * Every Prometheus metric tracklane exports, on two registries per process: `registry`,
 * what the process counts itself, always exported; `figures`, what /metrics reads from the
 * database at each scrape, exported only when that read succeeded (a figure the database
 * could not give is absent, not the last value read: see `databaseUp`).
 */
export function createMetrics() {
  const registry = new Registry();
  const figures = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "tracklane_" });
  return {
    registry,
    figures,
    databaseUp: new Gauge({
      name: "tracklane_database_up",
      help: "1 when this scrape read its figures from the database, 0 when it could not (the figures read from it are then left out, not repeated stale)",
      registers: [registry],
    }),
    callbacks: new Counter({
      name: "tracklane_callbacks_total",
      help: "Callbacks received, by result (stored, duplicate, rejected_*, unauthorized, too_large, unavailable)",
      labelNames: ["result"] as const,
      registers: [registry],
    }),
    previousSecretUsed: new Counter({
      name: "tracklane_previous_secret_used_total",
      help: "Requests let in by a secret being rotated out, by variable (CALLBACK_SECRET_PREVIOUS, API_TOKEN_PREVIOUS): once it stops growing, the variable can go",
      labelNames: ["variable"] as const,
      registers: [registry],
    }),
    ingestBatchSize: new Histogram({
      name: "tracklane_ingest_batch_size",
      help: "Events per group-commit flush",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers: [registry],
    }),
    projectionLag: new Histogram({
      name: "tracklane_projection_lag_seconds",
      help: "Time from an event being stored to its order row being updated",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    jobs: new Counter({
      name: "tracklane_jobs_total",
      help: "Worker job outcomes, by task and outcome (success, failure)",
      labelNames: ["task", "outcome"] as const,
      registers: [registry],
    }),
    providerRequests: new Counter({
      name: "tracklane_provider_requests_total",
      help: "Calls to the provider, by client operation (placeOrder, cancelOrder, orderStatus, generatePoolAwbs, …; token: an OAuth token exchange) and outcome (ok, or why it failed: network, timeout, rate_limited, server, client, auth, failure, invalid_response, invalid_request; error: a fault inside tracklane)",
      labelNames: ["operation", "outcome"] as const,
      registers: [registry],
    }),
    providerDuration: new Histogram({
      name: "tracklane_provider_request_duration_seconds",
      help: "Time a provider call took, answered or not (an OAuth exchange it needed included), by client operation (token: the exchange alone)",
      labelNames: ["operation"] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30],
      registers: [registry],
    }),
    commands: new Counter({
      name: "tracklane_commands_total",
      help: "Order commands that ended, by kind (place, edit, cancel, dispatch_ready, stop_reattempt) and outcome (succeeded, failed, unconfirmed)",
      labelNames: ["kind", "outcome"] as const,
      registers: [registry],
    }),
    jobsQueued: new Gauge({
      name: "tracklane_jobs_queued",
      help: "graphile-worker jobs not yet done, by state: waiting (due now, no worker on them), scheduled (due later, or waiting for a retry), running",
      labelNames: ["state"] as const,
      registers: [figures],
    }),
    workers: new Gauge({
      name: "tracklane_workers",
      help: "Worker processes connected to the database (npm run worker or npm start); 0: no job runs and nothing is projected",
      registers: [figures],
    }),
    jobsOldestWaiting: new Gauge({
      name: "tracklane_jobs_oldest_waiting_seconds",
      help: "How long the oldest job that is due and has attempts left has waited for a worker (0 when none waits): grows while no worker runs",
      registers: [figures],
    }),
    placements: new Gauge({
      name: "tracklane_orders_placement",
      help: "Orders placed through tracklane that are not (yet) placed, by placement state (pending, unconfirmed, failed)",
      labelNames: ["state"] as const,
      registers: [figures],
    }),
    notifyMessages: new Counter({
      name: "tracklane_notifications_total",
      help: "Notification deliveries that ended, by message type and outcome (delivered, failed, gone)",
      labelNames: ["type", "outcome"] as const,
      registers: [registry],
    }),
    notifyAttempts: new Counter({
      name: "tracklane_notification_attempts_total",
      help: "Notification delivery attempts, by outcome (delivered, failed, gone)",
      labelNames: ["outcome"] as const,
      registers: [registry],
    }),
    notifyLag: new Histogram({
      name: "tracklane_notification_delivery_lag_seconds",
      help: "Time from a change being committed (its message written) to the receiver accepting the message",
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
      registers: [registry],
    }),
    notifyBurstWaits: new Counter({
      name: "tracklane_notification_burst_waits_total",
      help: "Delivery runs put off by a second because the worker was projecting a burst of callbacks (NOTIFY_BURST_EVENTS_S)",
      registers: [registry],
    }),
    notifyEndpoints: new Gauge({
      name: "tracklane_notification_endpoints",
      help: "Notification endpoints, by state (enabled, disabled)",
      labelNames: ["state"] as const,
      registers: [figures],
    }),
    notifyPending: new Gauge({
      name: "tracklane_notification_deliveries_pending",
      help: "Notification deliveries waiting to be delivered (first attempts and retries)",
      registers: [figures],
    }),
    awbPool: new Gauge({
      name: "tracklane_awb_pool",
      help: "AWB numbers in the pool, by state (available, allocated)",
      labelNames: ["state"] as const,
      registers: [figures],
    }),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
