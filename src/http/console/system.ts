/**
 * The console's system page: the version, which roles are connected to the database, the
 * projection's backlog, graphile-worker's queue, and the configuration (secrets never
 * shown: settingsShown hides them), with links to the API docs and the metrics.
 */
import { readFileSync } from "node:fs";
import { Hono } from "hono";
import type { Sql } from "postgres";
import { settingsShown } from "../../config.ts";
import { backlogFigures } from "../../projection/backlog.ts";
import { connectionsByApplication, failedJobCounts, jobQueueDepth } from "../../worker/figures.ts";
import type { ConsoleEnv } from "./auth.ts";
import { html } from "./html.ts";
import { renderPage } from "./layout.ts";

export interface SystemPagesDeps {
  sql: Sql;
  timeZone: string;
}

/** tracklane's version, read once. */
const VERSION = (JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }).version;

/** "45 s", "12 min", "3 h 5 min". */
function seconds(s: number): string {
  if (s < 120) return `${Math.round(s)} s`;
  const min = Math.floor(s / 60);
  return min < 120 ? `${min} min` : `${Math.floor(min / 60)} h ${min % 60} min`;
}

export function systemPages(deps: SystemPagesDeps) {
  const { sql, timeZone } = deps;
  const app = new Hono<ConsoleEnv>();

  app.get("/system", async (c) => {
    const [connections, backlog, jobs, failedJobs] = await Promise.all([connectionsByApplication(sql), backlogFigures(sql), jobQueueDepth(sql), failedJobCounts(sql)]);
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
        ${connections.length === 0
          ? html`<p>No connections.</p>`
          : html`<table>
              <caption>Connections to this database by application name: tracklane-web and tracklane-worker are tracklane's roles.</caption>
              <thead><tr><th scope="col">Application</th><th scope="col" class="num">Connections</th><th scope="col" class="num">Busy now</th></tr></thead>
              <tbody>
                ${connections.map((r) => html`<tr><td>${r.application === "" ? "(unnamed)" : r.application}</td><td class="num">${r.connections}</td><td class="num">${r.active}</td></tr>`)}
              </tbody>
            </table>`}

        <h2>Projection</h2>
        <p>
          ${backlog.waiting === 0
            ? "Every stored event is projected into its order."
            : `${count(backlog.waiting)} event${backlog.waiting === 1 ? "" : "s"} waiting to be projected; the oldest for ${seconds(backlog.oldestSeconds)}.`}
        </p>

        <h2>Job queue</h2>
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
