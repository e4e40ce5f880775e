/**
 * The console's system page: the version, which roles are connected to the database (and
 * to the read database, with how far behind it is), the projection's backlog,
 * graphile-worker's queue, and the configuration (secrets never shown: settingsShown hides
 * them), with links to the API docs and the metrics.
 */
import { readFileSync } from "node:fs";
import { Hono } from "hono";
import { settingsShown } from "../../config.ts";
import { POOL_NAMES } from "../../db/client.ts";
import { readServerState } from "../../db/replica.ts";
import type { ReadServerState } from "../../db/replica.ts";
import { backlogFigures } from "../../projection/backlog.ts";
import { connectionsByApplication, failedJobCounts, jobQueueDepth, workerProcesses } from "../../worker/figures.ts";
import type { ConsoleEnv } from "./auth.ts";
import { html } from "./html.ts";
import { renderPage } from "./layout.ts";
import type { ConsolePools } from "./pools.ts";

export interface SystemPagesDeps extends ConsolePools {
  timeZone: string;
}

type Connections = Awaited<ReturnType<typeof connectionsByApplication>>;

/** tracklane's version, read once. */
const VERSION = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** "45 s", "12 min", "3 h 5 min". */
function seconds(s: number): string {
  if (s < 120) return `${Math.round(s)} s`;
  const min = Math.floor(s / 60);
  return min < 120 ? `${min} min` : `${Math.floor(min / 60)} h ${min % 60} min`;
}

/** What the read database is, in a sentence. */
function readServerSentence(s: ReadServerState): string {
  if (!s.replica) return "a writable server, not a replica: pages read it, and it has only what is written to it (the same database as DATABASE_URL, or a copy).";
  if (s.lagSeconds === null) return "a replica that has replayed no transaction since it started.";
  if (s.lagSeconds === 0) return "a replica, caught up: it has replayed everything the primary sent it.";
  return `a replica, ${s.lagSeconds < 1 ? "less than a second" : seconds(s.lagSeconds)} behind: pages may miss what happened since.`;
}

const connectionsTable = (rows: Connections, caption: string) =>
  rows.length === 0
    ? html`<p>No connections.</p>`
    : html`<table>
        <caption>${caption}</caption>
        <thead><tr><th scope="col">Application</th><th scope="col" class="num">Connections</th><th scope="col" class="num">Busy now</th></tr></thead>
        <tbody>
          ${rows.map((r) => html`<tr><td>${r.application === "" ? "(unnamed)" : r.application}</td><td class="num">${r.connections}</td><td class="num">${r.active}</td></tr>`)}
        </tbody>
      </table>`;

export function systemPages(deps: SystemPagesDeps) {
  const { sql, readSql, timeZone } = deps;
  const app = new Hono<ConsoleEnv>();

  app.get("/system", async (c) => {
    // Connections are each server's own (pg_stat_activity is not replicated): the
    // primary's are read on the primary, the read pool's on the read server. The figures
    // are read like any page's.
    const separate = readSql !== sql;
    const [connections, readConnections, readServer, backlog, jobs, failedJobs, workers] = await Promise.all([
      connectionsByApplication(sql),
      separate ? connectionsByApplication(readSql) : null,
      separate ? readServerState(readSql) : null,
      backlogFigures(readSql),
      jobQueueDepth(readSql),
      failedJobCounts(readSql),
      // pg_stat_activity is the primary's own: who runs jobs there.
      workerProcesses(sql),
    ]);
    const settings = settingsShown();
    const count = (n: number) => n.toLocaleString("en-GB");
    return renderPage(c, {
      title: "System",
      nav: "/system",
      csrf: c.get("session").csrfToken,
      body: html`<h1>System</h1>
        <dl class="facts">
          <dt>Version</dt><dd id="version">tracklane ${VERSION}</dd>
          <dt>Node.js</dt><dd>${process.versions.node}</dd>
          <dt>Times shown in</dt><dd>${timeZone}</dd>
          <dt>More</dt><dd><a href="/docs">API docs</a> · <a href="/metrics">Metrics</a> (Prometheus)</dd>
        </dl>

        <h2>Connected to the database</h2>
        ${connectionsTable(connections, `Connections to this database by application name: ${POOL_NAMES.web} and ${POOL_NAMES.worker} are tracklane's roles.`)}
        ${readConnections === null || readServer === null
          ? null
          : html`<h2>Connected to the read database</h2>
              <p id="read-server">DATABASE_READ_URL is ${readServerSentence(readServer)}</p>
              ${connectionsTable(readConnections, `Connections to the read database by application name, as it counts them: ${POOL_NAMES.read} is the web processes' read pool, where the API's GETs and these pages read.`)}`}

        <h2>Projection</h2>
        <p>
          ${backlog.waiting === 0
            ? "Every stored event is projected into its order."
            : `${count(backlog.waiting)} event${backlog.waiting === 1 ? "" : "s"} waiting to be projected; the oldest for ${seconds(backlog.oldestSeconds)}.`}
        </p>

        <h2>Job queue</h2>
        <p id="workers" class=${workers === 0 ? "error" : undefined} role=${workers === 0 ? "alert" : undefined}>
          ${workers === 0
            ? "No worker is running: jobs wait and callbacks are not projected until one starts (npm run worker, or npm start)."
            : `${count(workers)} worker process${workers === 1 ? "" : "es"} running${jobs.waiting === 0 ? "." : `; the oldest job due has waited ${seconds(jobs.oldestWaitingSeconds)}.`}`}
        </p>
        <div class="cards">
          <div class="card" id="jobs-waiting"><div class="figure">${count(jobs.waiting)}</div>waiting (due now)</div>
          <div class="card" id="jobs-running"><div class="figure">${count(jobs.running)}</div>running</div>
          <div class="card" id="jobs-scheduled"><div class="figure">${count(jobs.scheduled)}</div>scheduled or waiting to retry</div>
          <div class="card" id="jobs-failed"><div class="figure">${count(jobs.failed)}</div>failed (out of attempts)</div>
        </div>
        ${failedJobs.length === 0
          ? null
          : html`<table>
              <caption>Failed jobs by task.</caption>
              <thead><tr><th scope="col">Task</th><th scope="col" class="num">Failed</th></tr></thead>
              <tbody>${failedJobs.map((f) => html`<tr><td>${f.task}</td><td class="num">${f.n}</td></tr>`)}</tbody>
            </table>`}

        <h2>Configuration</h2>
        <table>
          <caption>Every setting this process was given; secrets are never shown.</caption>
          <thead><tr><th scope="col">Variable</th><th scope="col">Value</th><th scope="col" class="wide">What it does</th></tr></thead>
          <tbody class="settings">
            ${settings.map(
              (s) => html`<tr>
                <td><code>${s.name}</code></td>
                <td>${s.value === null ? (s.default === undefined ? "default" : html`default (<code>${s.default}</code>)`) : html`<code>${s.value}</code>`}</td>
                <td class="wide">${s.description}</td>
              </tr>`,
            )}
          </tbody>
        </table>`,
    });
  });

  return app;
}
