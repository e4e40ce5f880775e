/**
 * Operational endpoints: liveness, readiness, Prometheus metrics. Unauthenticated, except
 * /metrics when METRICS_TOKEN is set.
 */
import { Hono } from "hono";
import { requestId } from "hono/request-id";
import { Gauge } from "prom-client";
import type { Sql } from "postgres";
import { poolCounts } from "../../awb/pool.ts";
import { NEWEST_MIGRATION, schemaState } from "../../db/ready.ts";
import { notificationFigures } from "../../notify/figures.ts";
import { placementCounts } from "../../orders/read.ts";
import { backlogFigures } from "../../projection/backlog.ts";
import { failedJobCounts, jobQueueDepth, workerProcesses } from "../../worker/figures.ts";
import type { Logger } from "../../logger.ts";
import type { Metrics } from "../../metrics.ts";
import { bearerAuth } from "../auth.ts";
import { ApiError, errorHandler } from "../errors.ts";
import type { AppEnv } from "../types.ts";

export interface OpsOptions {
  /** Bearer token /metrics requires (METRICS_TOKEN); undefined: open. */
  metricsToken?: string | undefined;
}

/**
 * How long /readyz and /metrics wait for the database. A server that stopped answering
 * without closing its connections (a silent network cut, a failover whose old address
 * drops packets) would otherwise hold the probe until the prober gives up, telling it
 * nothing; after this it is reported as not answering.
 */
const DATABASE_WAIT_MS = 3000;

/** `work`, or a rejection once `ms` have passed (`work` is left to finish, its failure ignored). */
async function answeredWithin<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the database did not answer within ${ms / 1000} s`)), ms);
  });
  work.catch(() => {});
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * prom-client (15.1) writes a NaN as `Nan`, which the exposition format spells `NaN`: a
 * strict reader refuses the whole scrape. The event loop's lag gauges are NaN whenever two
 * scrapes come within the lag monitor's 10 ms resolution (no sample since the last reset).
 * A sample's value ends its line (prom-client writes no timestamps).
 */
function exposition(text: string): string {
  return text.replace(/ Nan$/gm, " NaN");
}

/** The figures /metrics reads from the database at each scrape. */
async function readFigures(sql: Sql) {
  return {
    queue: await backlogFigures(sql),
    failed: await failedJobCounts(sql),
    jobs: await jobQueueDepth(sql),
    workers: await workerProcesses(sql),
    // Placed and external orders are most of the table and are left out: counting them
    // would read it all at every scrape. These three states are few, and need a person.
    placements: await placementCounts(sql),
    notify: await notificationFigures(sql),
    awb: await poolCounts(sql),
  };
}

export function opsRoutes(sql: Sql, metrics: Metrics, options: OpsOptions = {}) {
  const app = new Hono<AppEnv>();
  const { metricsToken } = options;

  // Metrics name order volumes and failures: on a shared network, only the scraper reads
  // them. The API's bearer check, with its own names.
  if (metricsToken !== undefined) {
    app.use("/metrics", bearerAuth(metricsToken, { realm: "tracklane-metrics", what: "metrics token", setting: "METRICS_TOKEN" }));
  }

  // Read from the database at scrape time, so they are right whichever process did the work;
  // exported only when that read succeeds (metrics.figures).
  const backlog = new Gauge({
    name: "tracklane_projection_backlog",
    help: "Events waiting to be projected (projection_queue rows)",
    registers: [metrics.figures],
  });
  const oldest = new Gauge({
    name: "tracklane_projection_oldest_pending_seconds",
    help: "Age of the oldest event waiting to be projected (current projection lag)",
    registers: [metrics.figures],
  });
  const failedJobs = new Gauge({
    name: "tracklane_jobs_failed_permanently",
    help: "Jobs that used up their attempts and that no worker is running, by task",
    labelNames: ["task"] as const,
    registers: [metrics.figures],
  });

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.get("/readyz", async (c) => {
    try {
      const schema = await answeredWithin(DATABASE_WAIT_MS, schemaState(sql));
      if (schema.state === "ready") return c.json({ ok: true });
      // An older release's schema, or one missing a migration below newer ones: this
      // process's queries may need what that migration adds, so it takes no traffic until
      // the database has every migration of this release.
      const reason =
        schema.state === "missing"
          ? "migrations not applied"
          : schema.state === "skipped"
            ? `migrations not applied: this release needs ${schema.tags.join(", ")}, missing below newer applied ones (npm run migrate refuses the database and says how to apply ${schema.tags.length > 1 ? "them" : "it"})`
            : `migrations not applied: this release needs ${NEWEST_MIGRATION} (run npm run migrate)`;
      return c.json({ ok: false, reason }, 503);
    } catch {
      return c.json({ ok: false, reason: "database unreachable" }, 503);
    }
  });

  app.get("/metrics", async (c) => {
    // Every figure is read before any is set: a database lost halfway through the reads
    // must not leave half of them new and half from an earlier scrape.
    let read: Awaited<ReturnType<typeof readFigures>> | undefined;
    try {
      read = await answeredWithin(DATABASE_WAIT_MS, readFigures(sql));
    } catch {
      // The database is away (or failing): the process's own counters still answer, with
      // tracklane_database_up 0, and the figures only the database knows are left out.
      // Repeating the last ones read would say, say, that the projection keeps up while
      // nothing is projected.
    }
    metrics.databaseUp.set(read === undefined ? 0 : 1);
    if (read !== undefined) {
      backlog.set(read.queue.waiting);
      oldest.set(read.queue.oldestSeconds);
      failedJobs.reset();
      for (const row of read.failed) failedJobs.set({ task: row.task }, row.n);
      for (const state of ["waiting", "scheduled", "running"] as const) metrics.jobsQueued.set({ state }, read.jobs[state]);
      metrics.workers.set(read.workers);
      metrics.jobsOldestWaiting.set(Math.max(0, read.jobs.oldestWaitingSeconds));
      for (const [state, n] of Object.entries(read.placements)) metrics.placements.set({ state }, n);
      metrics.notifyEndpoints.set({ state: "enabled" }, read.notify.enabled);
      metrics.notifyEndpoints.set({ state: "disabled" }, read.notify.disabled);
      metrics.notifyPending.set(read.notify.pending);
      metrics.awbPool.set({ state: "available" }, read.awb.available);
      metrics.awbPool.set({ state: "allocated" }, read.awb.allocated);
    }
    const own = await metrics.registry.metrics();
    c.header("content-type", metrics.registry.contentType);
    return c.body(exposition(read === undefined ? own : `${own}\n${await metrics.figures.metrics()}`));
  });

  return app;
}

/**
 * What `npm run worker` serves on METRICS_PORT: the same three endpoints, so that its own
 * counters (job outcomes, projection lag, notifications), which no web process sees, reach
 * Prometheus, and an orchestrator can probe it. Nothing else: no API, no callbacks.
 */
export function workerOpsApp(sql: Sql, metrics: Metrics, log: Logger, options: OpsOptions = {}) {
  const app = new Hono<AppEnv>();
  // As the web app's: every error names its request.
  app.use(requestId());
  app.route("/", opsRoutes(sql, metrics, options));
  app.notFound((c) => {
    throw new ApiError("not_found", `no route for ${c.req.method} ${c.req.path} (a worker serves /metrics, /healthz and /readyz only)`);
  });
  app.onError(errorHandler(log));
  return app;
}
