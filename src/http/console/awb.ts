/**
 * The console's AWB pool: how many numbers are available and allocated, the settings, the
 * available level over the last day as a chart, the top-up requests, and a Replenish
 * button (a confirmation page whose form queues the same top-up as POST /v1/awb/replenish).
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import { enqueueManualReplenish } from "../../awb/jobs.ts";
import { lastReplenishedAt, listAwbRequests, poolCounts, poolLevels } from "../../awb/pool.ts";
import type { AwbRequestRow } from "../../awb/pool.ts";
import type { ProviderClient } from "../../provider/client.ts";
import { MAX_AWB_COUNT } from "../../provider/schemas.ts";
import type { ConsoleEnv } from "./auth.ts";
import { blankToUndefined, fieldOf, problemOf } from "./forms.ts";
import { html } from "./html.ts";
import { csrfField, errorBox, FIELD_ERROR_ID, fieldError, noticeBox, renderPage, timeOf } from "./layout.ts";
import { pagePool } from "./pools.ts";
import type { ConsolePools } from "./pools.ts";
import { levelChart } from "./svg.ts";

export interface AwbPagesDeps extends ConsolePools {
  timeZone: string;
  settings: { lowWatermark: number; target: number; mode: "pool" | "fresh" };
  /** The provider's API: without it nothing can be replenished. */
  provider: ProviderClient | undefined;
}

/** The chart's span and step: 24 hours in 5-minute buckets, at most 289 points. */
const CHART_HOURS = 24;
const CHART_STEP_S = 300;

const MODES = ["pool", "fresh"] as const;
const REQUEST_TONE: Record<string, string> = { pending: "warn", completed: "ok", failed: "bad" };

const ReplenishForm = z.object({
  count: z.preprocess(
    blankToUndefined,
    z.coerce.number().int("must be a whole number").min(1, "must be at least 1").max(MAX_AWB_COUNT, `must be at most ${MAX_AWB_COUNT}`).optional(),
  ),
  mode: z.enum(MODES, { error: "must be pool or fresh" }),
});

const NO_PROVIDER = "No provider is configured (PROVIDER_BASE_URL), so tracklane cannot ask for AWB numbers.";

export function awbPages(deps: AwbPagesDeps) {
  const { sql, timeZone, settings } = deps;
  const at = (d: Date | null) => timeOf(d, timeZone);
  const app = new Hono<ConsoleEnv>();

  const requestsTable = (rows: readonly AwbRequestRow[]) =>
    rows.length === 0
      ? html`<p>No top-up requests yet.</p>`
      : html`<table>
          <caption>Pending requests and the 10 latest, newest first.</caption>
          <thead>
            <tr>
              <th scope="col">Asked</th><th scope="col">Mode</th><th scope="col">State</th><th scope="col" class="num">Count</th>
              <th scope="col" class="wide num">Received</th><th scope="col" class="wide num">Added</th><th scope="col" class="wide">Next poll or done</th><th scope="col" class="wide">Last error</th>
            </tr>
          </thead>
          <tbody>
            ${rows.map(
              (r) => html`<tr>
                <td>${at(r.created_at)}</td>
                <td>${r.mode}</td>
                <td><span class=${`badge ${REQUEST_TONE[r.status] ?? ""}`.trim()}>${r.status}</span>${r.polls > 0 ? html` <span class="wide">(${r.polls} poll${r.polls === 1 ? "" : "s"})</span>` : null}</td>
                <td class="num">${r.count}</td>
                <td class="wide num">${r.received}</td>
                <td class="wide num">${r.added}</td>
                <td class="wide">${r.status === "pending" ? at(r.next_poll_at) : at(r.completed_at)}</td>
                <td class="wide">${r.last_error ?? "–"}</td>
              </tr>`,
            )}
          </tbody>
        </table>`;

  app.get("/awb", async (c) => {
    const db = pagePool(c, deps);
    const [counts, levels, requests, last] = await Promise.all([
      poolCounts(db),
      poolLevels(db, { hours: CHART_HOURS, stepS: CHART_STEP_S }),
      listAwbRequests(db),
      lastReplenishedAt(db),
    ]);
    const describe = (d: Date) => new Intl.DateTimeFormat("en-GB", { timeZone, day: "numeric", month: "short", hour: "2-digit", minute: "2-digit" }).format(d);
    const done = c.req.query("done") === "replenish" ? "Top-up queued: the pool fills up as soon as the provider answers; the requests below show its progress." : null;
    const low = counts.available < settings.lowWatermark;
    return renderPage(c, {
      title: "AWB pool",
      nav: "/awb",
      csrf: c.get("session").csrfToken,
      body: html`<h1>AWB pool</h1>
        ${done ? noticeBox(done) : null}
        ${low ? errorBox(`Only ${counts.available} numbers are available, below the low watermark of ${settings.lowWatermark}.`) : null}
        <div class="cards">
          <div class="card" id="awb-available"><div class="figure">${counts.available.toLocaleString("en-GB")}</div>available</div>
          <div class="card" id="awb-allocated"><div class="figure">${counts.allocated.toLocaleString("en-GB")}</div>allocated</div>
          <div class="card"><div class="figure">${settings.lowWatermark.toLocaleString("en-GB")}</div>low watermark: below it a top-up starts</div>
          <div class="card"><div class="figure">${settings.target.toLocaleString("en-GB")}</div>target: a top-up fills up to it (${settings.mode} mode)</div>
        </div>
        <p>${last === null ? "No top-up has added numbers yet." : html`Numbers last added ${at(last)}.`}</p>
        <div class="actions"><a class="button" href="/awb/replenish">Replenish…</a></div>
        <h2>Available over the last ${CHART_HOURS} hours</h2>
        ${levelChart(levels.points, { from: levels.from, to: levels.to, mark: settings.lowWatermark, label: "Available AWB numbers", describe })}
        <h2>Top-up requests</h2>
        ${requestsTable(requests)}`,
    });
  });

  /** `problem.field`: the field the refusal is about (marked, described by the error, focused). */
  const confirmPage = (c: Context<ConsoleEnv>, problem?: { status: 409 | 422; error: string; field?: string | undefined }) =>
    renderPage(c, {
      title: "Replenish the AWB pool",
      nav: "/awb",
      csrf: c.get("session").csrfToken,
      status: problem?.status ?? 200,
      body: html`<p><a href="/awb">← AWB pool</a></p>
        <h1>Replenish the AWB pool?</h1>
        ${problem ? errorBox(problem.error, problem.field === undefined ? undefined : FIELD_ERROR_ID) : null}
        ${deps.provider === undefined && problem === undefined ? errorBox(NO_PROVIDER) : null}
        <p>
          tracklane asks the provider for AWB numbers now, as a top-up job (top-ups run one at a time). Without a count it fills the pool up to
          the target of ${settings.target}.
        </p>
        <form method="post" action="/awb/replenish">
          ${csrfField(c.get("session").csrfToken)}
          <p><label>How many (empty: up to the target)<input name="count" type="number" min="1" max=${String(MAX_AWB_COUNT)} inputmode="numeric" ...${fieldError(problem?.field === "count")} /></label></p>
          <p>
            <label
              >Mode<select name="mode" ...${fieldError(problem?.field === "mode")}>
                ${MODES.map((m) => html`<option value=${m} selected=${m === settings.mode}>${m === "pool" ? "pool (replenishment call)" : "fresh (asynchronous request)"}</option>`)}
              </select></label
            >
          </p>
          <div class="actions">
            <button type="submit">Replenish</button>
            <a class="button secondary" href="/awb">Leave it</a>
          </div>
        </form>`,
    });

  app.get("/awb/replenish", (c) => confirmPage(c));

  app.post("/awb/replenish", async (c) => {
    const input = ReplenishForm.safeParse(await c.req.parseBody());
    if (!input.success) return confirmPage(c, { status: 422, error: problemOf(input.error), field: fieldOf(input.error) });
    if (deps.provider === undefined) return confirmPage(c, { status: 409, error: NO_PROVIDER });
    await enqueueManualReplenish(sql, { count: input.data.count, mode: input.data.mode });
    return c.redirect("/awb?done=replenish", 303);
  });

  return app;
}
