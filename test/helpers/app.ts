/**
 * A whole tracklane (app, ingestor, worker tasks) on a fresh database, for integration
 * and HTTP tests. Requests go through the app (`request`) or, for tests that need a real
 * socket, through `listen()`. Jobs run deterministically with `runJobs()`.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { runOnce } from "graphile-worker";
import { loadConfig } from "../../src/config.ts";
import type { Config } from "../../src/config.ts";
import { createDatabase } from "../../src/db/client.ts";
import type { Database } from "../../src/db/client.ts";
import { createApp } from "../../src/http/app.ts";
import { listen } from "../../src/http/server.ts";
import { createLogger } from "../../src/logger.ts";
import type { Logger } from "../../src/logger.ts";
import { configureOutbox } from "../../src/notify/outbox.ts";
import { createMetrics } from "../../src/metrics.ts";
import type { Metrics } from "../../src/metrics.ts";
import { ingestorFor } from "../../src/runtime/services.ts";
import { graphileLogger } from "../../src/worker/logger.ts";
import { taskList } from "../../src/worker/runner.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { observedProvider } from "../../src/provider/observed.ts";
import { createTestDatabase } from "./db.ts";
import type { TestDatabase } from "./db.ts";

export const API_TOKEN = "test-api-token-0123456789abcdef";
export const CALLBACK_SECRET = "test-callback-secret-0123456789";
/** The application_name of a test app's read pool (createTestApp with DATABASE_READ_URL). */
export const TEST_READ_POOL = "tracklane-test-read";

export interface TestApp {
  app: ReturnType<typeof createApp>;
  config: Config;
  database: Database;
  testDb: TestDatabase;
  metrics: Metrics;
  log: Logger;
  /** Every log line written so far (JSON strings). */
  logLines: string[];
  request(path: string, init?: RequestInit & { json?: unknown; token?: string | null }): Promise<Response>;
  callback(body: unknown, options?: { path?: string; method?: string; headers?: Record<string, string> }): Promise<Response>;
  /** Runs every due job (and the jobs they enqueue) to completion. */
  runJobs(): Promise<void>;
  listen(): Promise<{ url: string; close(): Promise<void> }>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  provider?: ProviderClient;
}

export async function createTestApp(env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const testDb = await createTestDatabase();
  const config = loadConfig({
    DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-test-")),
    DATABASE_URL: testDb.url,
    API_TOKEN,
    CALLBACK_SECRET,
    LOG_LEVEL: "debug",
    ...env,
  });
  const logLines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  const log = createLogger({ level: config.logLevel, destination: sink });
  const metrics = createMetrics();
  configureOutbox({ locationIntervalS: config.notify.locationIntervalS, retryScheduleS: config.notify.retryScheduleS });
  // With DATABASE_READ_URL (the caller's database), a read pool as a web process has one.
  const read = config.databaseReadUrl === undefined ? undefined : { url: config.databaseReadUrl, max: 4, name: TEST_READ_POOL };
  const database = createDatabase(testDb.url, { max: 6, name: "tracklane-test", read });
  const ingestor = ingestorFor(config, database, log, metrics);
  // As startServices does: every provider call counted for /metrics.
  const provider = options.provider && observedProvider(options.provider, metrics);
  const app = createApp({ config, sql: database.sql, readSql: database.readSql, ingestor, log, metrics, provider });
  const deps = { config, databaseUrl: testDb.url, sql: database.sql, log, metrics, provider };

  return {
    app,
    config,
    database,
    testDb,
    metrics,
    log,
    logLines,
    request(path, init = {}) {
      const headers = new Headers(init.headers);
      const token = init.token === undefined ? API_TOKEN : init.token;
      if (token !== null) headers.set("authorization", `Bearer ${token}`);
      let body = init.body;
      if (init.json !== undefined) {
        headers.set("content-type", "application/json");
        body = JSON.stringify(init.json);
      }
      return Promise.resolve(app.request(path, { ...init, headers, body }));
    },
    callback(body, options = {}) {
      const raw = typeof body === "string" || body instanceof Uint8Array ? body : JSON.stringify(body);
      return Promise.resolve(
        app.request(options.path ?? `/callbacks/${CALLBACK_SECRET}`, {
          method: options.method ?? "POST",
          headers: { "content-type": "application/json", ...options.headers },
          body: raw,
        }),
      );
    },
    async runJobs() {
      // graphile-worker's runOnce does not wait for a job's completion to be written before
      // it returns, so one call can leave a due job behind or a finished one still locked.
      // Run until nothing is due; jobs waiting for a retry are left alone (tests make them due).
      for (let i = 0; i < 10; i++) {
        await runOnce({ connectionString: testDb.url, taskList: taskList(deps), logger: graphileLogger(log) });
        for (let wait = 0; wait < 500; wait++) {
          const [busy] = await database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where locked_at is not null`;
          if (busy!.n === 0) break;
          await new Promise((r) => setTimeout(r, 10));
        }
        const [due] = await database.sql<{ n: number }[]>`
          select count(*)::int as n from graphile_worker.jobs where run_at <= now() and locked_at is null and attempts = 0`;
        if (due!.n === 0) return;
      }
      throw new Error("jobs still due after 10 runs");
    },
    async listen() {
      return await listen(app, 0, "127.0.0.1", config.http);
    },
    async close() {
      await ingestor.close();
      await database.close();
      await testDb.drop();
    },
  };
}

/** Shuffles in place (Fisher-Yates) with a seeded generator, so failures reproduce. */
export function shuffle<T>(items: T[], seed = 42): T[] {
  let s = seed >>> 0;
  const rand = () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
