/**
 * The composition root: builds the pieces a process runs (HTTP, worker or both) from the
 * config, and stops them in the right order.
 */
import { getHeapStatistics } from "node:v8";
import type { Config } from "../config.ts";
import { POOL_NAMES, createDatabase } from "../db/client.ts";
import type { Database } from "../db/client.ts";
import type { HttpServer } from "../http/server.ts";
import { ensurePartitions } from "../events/partitions.ts";
import { createIngestor } from "../ingest/batcher.ts";
import type { Ingestor } from "../ingest/batcher.ts";
import type { Logger } from "../logger.ts";
import { createMetrics } from "../metrics.ts";
import { configureOutbox } from "../notify/outbox.ts";
import type { Metrics } from "../metrics.ts";
import type { ProviderClient } from "../provider/client.ts";
import { observedProvider } from "../provider/observed.ts";
import type { SupervisedWorker } from "../worker/supervisor.ts";
import { surviveLostConnections } from "./lifecycle.ts";
import { ListenFailedError } from "./startup-errors.ts";

export interface Services {
  http: HttpServer | undefined;
  database: Database;
  stop(): Promise<void>;
}

export interface ServiceOptions {
  config: Config;
  databaseUrl: string;
  log: Logger;
  web: boolean;
  worker: boolean;
  /** Overrides config.port (tests use 0). */
  port?: number;
  provider?: ProviderClient | undefined;
}

/**
 * The ingest buffer's bound on body bytes: 32 MiB (128 full-size callbacks of 256 KiB;
 * thousands of real ones, a few hundred bytes each), less under a smaller heap. A body
 * costs about three times its size in heap on its way to the database (its text, its
 * parsed value, its share of the batch's insert), above the process's own 30 MiB or so:
 * under --max-old-space-size=96 a fixed 32 MiB let a burst of large callbacks run the
 * process out of memory before the buffer refused any.
 */
export function pendingBytesFor(heapSizeLimit: number): number {
  return Math.min(32 * 1024 * 1024, Math.floor(heapSizeLimit / 16));
}

export function ingestorFor(config: Config, database: Database, log: Logger, metrics: Metrics): Ingestor {
  const { batchMax, batchWaitMs } = config.ingest;
  return createIngestor(
    database.sql,
    {
      batchMax,
      batchWaitMs,
      // Unbatched, every request is its own transaction: allow as many as connections.
      maxInFlight: batchMax === 1 ? config.db.poolMax : Math.max(1, Math.min(4, config.db.poolMax - 2)),
      maxPending: Math.max(1024, batchMax * 16),
      maxPendingBytes: pendingBytesFor(getHeapStatistics().heap_size_limit),
      partitionSpan: config.events.partition,
    },
    log,
    metrics,
  );
}

/**
 * A web process reads its pages on DATABASE_READ_URL when set. A worker has no read pool:
 * what it reads, it reads to write, and a replica's lag would make it act on old state.
 */
function databaseFor(config: Config, databaseUrl: string, web: boolean): Database {
  const read = web && config.databaseReadUrl !== undefined ? { url: config.databaseReadUrl, max: config.db.readPoolMax, name: POOL_NAMES.read } : undefined;
  return createDatabase(databaseUrl, { max: config.db.poolMax, name: web ? POOL_NAMES.web : POOL_NAMES.worker, read });
}

export async function startServices(options: ServiceOptions): Promise<Services> {
  const { config, log } = options;
  const metrics = createMetrics();
  // Every provider call this process makes is counted and timed (provider/observed.ts).
  const provider = options.provider && observedProvider(options.provider, metrics);
  configureOutbox({ locationIntervalS: config.notify.locationIntervalS, retryScheduleS: config.notify.retryScheduleS });
  const database = databaseFor(config, options.databaseUrl, options.web);
  let ingestor: Ingestor | undefined;
  let http: HttpServer | undefined;
  let worker: SupervisedWorker | undefined;
  /** A worker process's /metrics, /healthz and /readyz (METRICS_PORT). */
  let opsHttp: HttpServer | undefined;
  let draining = false;
  // A process that runs a worker (npm run worker, npm start) makes the log's partitions
  // once as it starts, before its web (npm start) takes a callback and before its jobs
  // append (a place's outcome, a status poll): after weeks without a worker the hourly
  // job's next run may be an hour off. A web process on its own makes them only when an
  // append finds none (withPartitionsMade).
  if (options.worker) {
    try {
      const made = await ensurePartitions(database.sql, config.events.partition);
      if (made.length > 0) log.info({ made }, "event log: partitions made ahead");
    } catch (err) {
      log.warn({ err }, "event log: could not make partitions ahead at start; the hourly job tries again");
    }
  }
  // Each role loads only its own code: a worker process never loads the HTTP stack
  // (OpenAPI, the docs page, the API; with METRICS_PORT only Hono and the ops routes) and
  // a web process never loads graphile-worker, which keeps each some 20-30 MB smaller.
  // A worker's supervisor survives a connection lost in a promise nobody awaits; a web
  // process on its own needs the same (lifecycle.ts).
  const unguard = options.web && !options.worker ? surviveLostConnections(log) : undefined;
  if (options.web) {
    const [{ createApp }, { listen }] = await Promise.all([import("../http/app.ts"), import("../http/server.ts")]);
    ingestor = ingestorFor(config, database, log, metrics);
    const app = createApp({ config, sql: database.sql, readSql: database.readSql, ingestor, log, metrics, provider });
    // Node's server.close() keeps a keep-alive connection open for as long as its client
    // sends on it, so under steady traffic a stopping web process never got to stop.
    // While stopping, every response asks its client to close the connection.
    const fetch: typeof app.fetch = async (req, env, ctx) => {
      const res = await app.fetch(req, env, ctx);
      if (!draining) return res;
      const headers = new Headers(res.headers);
      headers.set("connection", "close");
      return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
    };
    const port = options.port ?? config.port;
    try {
      http = await listen({ fetch }, port, config.host, config.http);
    } catch (err) {
      // Named as PORT's or HOST's problem (startup-errors.ts): bare, a HOST that does not
      // resolve (ENOTFOUND) read as the database's.
      throw new ListenFailedError("PORT", port, err);
    }
  }
  if (options.worker) {
    const { superviseWorker } = await import("../worker/supervisor.ts");
    worker = await superviseWorker({ config, databaseUrl: options.databaseUrl, sql: database.sql, log, metrics, provider });
    // A worker of its own (npm run worker) counts what no web process sees: its jobs'
    // outcomes, the projection's lag, the notifications it sent. Served on METRICS_PORT.
    if (!options.web && config.metricsPort !== undefined) {
      const [{ workerOpsApp }, { listen }] = await Promise.all([import("../http/routes/ops.ts"), import("../http/server.ts")]);
      const app = workerOpsApp(database.sql, metrics, log, { metricsToken: config.metricsToken });
      try {
        opsHttp = await listen(app, config.metricsPort, config.host, config.http);
      } catch (err) {
        await worker.stop();
        await database.close();
        // Named as METRICS_PORT's problem (startup-errors.ts words it): bare, it would name PORT.
        throw new ListenFailedError("METRICS_PORT", config.metricsPort, err);
      }
      log.info({ url: `${opsHttp.url}/metrics` }, "worker metrics listening");
    }
  }
  return {
    http,
    database,
    /**
     * In order, one log line a step: stop taking requests (those in flight are answered),
     * commit what was acknowledged-to-be, let running jobs finish (bounded by the worker),
     * close the pools (the read pool too). The caller stops the emulator and the database after this.
     */
    async stop() {
      draining = true;
      if (http) {
        await http.close();
        log.info("stopped accepting requests");
      }
      if (ingestor) {
        await ingestor.close();
        log.info("ingest buffer flushed");
      }
      if (worker) {
        await worker.stop();
        log.info("worker stopped");
      }
      // Last: /readyz and /metrics answer while the jobs finish.
      if (opsHttp) await opsHttp.close();
      await database.close();
      unguard?.();
    },
  };
}
