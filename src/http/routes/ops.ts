/**
 * Operational endpoints: liveness, readiness, Prometheus metrics. Unauthenticated, except
 * /metrics when METRICS_TOKEN is set.
 */
import { Hono } from "hono";
import { Gauge } from "prom-client";
import type { Sql } from "postgres";
import { poolCounts } from "../../awb/pool.ts";
import { migrationsApplied } from "../../db/ready.ts";
import type { Metrics } from "../../metrics.ts";
import { safeEqual } from "../auth.ts";
import { ApiError } from "../errors.ts";
import type { AppEnv } from "../types.ts";

export interface OpsOptions {
  /** Bearer token /metrics requires (METRICS_TOKEN); undefined: open. */
  metricsToken?: string | undefined;
}

export function opsRoutes(sql: Sql, metrics: Metrics, options: OpsOptions = {}) {
  const app = new Hono<AppEnv>();
  const { metricsToken } = options;

  // Metrics name order volumes and failures: on a shared network, only the scraper reads
  // them. Same header grammar as the API's bearerAuth, with its own message.
  if (metricsToken !== undefined) {
    app.use("/metrics", async (c, next) => {
      const header = c.req.header("authorization") ?? "";
      const match = /^Bearer[ \t]+([\x21-\x7e]+)[ \t]*$/i.exec(header);
      if (!match || !safeEqual(match[1]!, metricsToken)) {
        c.header("www-authenticate", 'Bearer realm="tracklane-metrics"');
        throw new ApiError("unauthorized", header ? "invalid metrics token" : "missing Authorization: Bearer <METRICS_TOKEN> header");
      }
      await next();
    });
  }

  // Read from the database at scrape time, so they are right whichever process did the work.
  const backlog = new Gauge({
    name: "tracklane_projection_backlog",
    help: "Events waiting to be projected (projection_queue rows)",
    registers: [metrics.registry],
  });
  const oldest = new Gauge({
    name: "tracklane_projection_oldest_pending_seconds",
    help: "Age of the oldest event waiting to be projected (current projection lag)",
    registers: [metrics.registry],
  });
  const failedJobs = new Gauge({
    name: "tracklane_jobs_failed_permanently",
    help: "Jobs that used up their attempts, by task",
    labelNames: ["task"] as const,
    registers: [metrics.registry],
  });

  app.get("/healthz", (c) => c.json({ ok: true }));

  app.get("/readyz", async (c) => {
    try {
      const ready = await migrationsApplied(sql);
      return ready ? c.json({ ok: true }) : c.json({ ok: false, reason: "migrations not applied" }, 503);
    } catch {
      return c.json({ ok: false, reason: "database unreachable" }, 503);
    }
  });

  app.get("/metrics", async (c) => {
    try {
      const [queue] = await sql<{ waiting: number; oldest: number | null }[]>`
        select count(*)::int as waiting, extract(epoch from now() - min(enqueued_at))::float8 as oldest
        from projection_queue`;
      backlog.set(queue?.waiting ?? 0);
      oldest.set(Math.max(0, queue?.oldest ?? 0));
      failedJobs.reset();
      const failed = await sql<{ task: string; n: number }[]>`
        select task_identifier as task, count(*)::int as n from graphile_worker.jobs
        where attempts >= max_attempts group by 1`;
      for (const row of failed) failedJobs.set({ task: row.task }, row.n);
      // Placed and external orders are most of the table and are left out: counting them
      // would read it all at every scrape. These three states are few, and need a person.
      const placements = await sql<{ state: string; n: number }[]>`
        select placement_state as state, count(*)::int as n from orders
        where placement_state in ('pending', 'unconfirmed', 'failed') group by 1`;
      for (const state of ["pending", "unconfirmed", "failed"]) {
        metrics.placements.set({ state }, placements.find((p) => p.state === state)?.n ?? 0);
      }
      const awb = await poolCounts(sql);
      metrics.awbPool.set({ state: "available" }, awb.available);
      metrics.awbPool.set({ state: "allocated" }, awb.allocated);
    } catch {
      // Metrics still answer with what the process knows when the database is away.
    }
    c.header("content-type", metrics.registry.contentType);
    return c.body(await metrics.registry.metrics());
  });

  return app;
}
