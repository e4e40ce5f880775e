/**
 * The console's first page: what needs a person now, in one list that updates itself.
 * Unconfirmed placements, failed commands, active orders gone silent, callbacks refused
 * since someone last looked, failing notification endpoints and an AWB pool below its
 * low watermark; each row links to the page where it is dealt with. Every read is
 * bounded: a few rows per kind, counts that stop at a cap.
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { z } from "zod";
import { availableUpTo } from "../../awb/pool.ts";
import { countFailedCommands, listCommands } from "../../commands/store.ts";
import type { CommandListRow } from "../../commands/store.ts";
import { CANONICAL_STATUSES, canonicalStatus, isTerminal } from "../../domain/statuses.ts";
import { lastRejectedId, rejectedSince } from "../../ingest/rejected.ts";
import type { RejectedSummary } from "../../ingest/rejected.ts";
import { endpointHealth } from "../../notify/deliveries.ts";
import type { EndpointHealth } from "../../notify/deliveries.ts";
import { listOrders, placementCounts, silentOrders } from "../../orders/read.ts";
import type { OrderRow, SilentOrder } from "../../orders/read.ts";
import { advanceMark, getMark } from "../../sessions/marks.ts";
import type { ConsoleEnv } from "./auth.ts";
import { problemOf } from "./forms.ts";
import { html } from "./html.ts";
import type { JSXNode } from "./html.ts";
import { badge, bidi, csrfField, errorBox, renderFragment, renderPage, timeOf } from "./layout.ts";
import type { ConsolePools } from "./pools.ts";

export interface AttentionDeps extends ConsolePools {
  timeZone: string;
  /** STUCK_AFTER_MIN: an active order without an event for this long is listed. */
  stuckAfterMin: number;
  /** AWB_POOL_LOW_WATERMARK. */
  lowWatermark: number;
}

/** Rows shown per kind; the count card says how many there are. */
const ROWS = 20;
/** Rejected callbacks shown (the newest), and the characters of each body. */
const REJECTED_ROWS = 5;
const EXCERPT_CHARS = 120;
/** Counts stop here ("1000+"): counting every row of a big backlog would cost more than it tells. */
const COUNT_CAP = 1000;

const ACTIVE = CANONICAL_STATUSES.filter((s) => !isTerminal(s));

interface Attention {
  unconfirmed: { count: number; rows: OrderRow[] };
  failedCommands: { count: number; rows: CommandListRow[] };
  silent: { count: number; rows: SilentOrder[] };
  rejected: { count: number; rows: RejectedSummary[] };
  endpoints: EndpointHealth[];
  /** Available numbers when below the low watermark; null when not. */
  awbAvailable: number | null;
}

/** An endpoint needs a person when disabled, or when its recent deliveries failed or are being retried. */
export const endpointFailing = (e: EndpointHealth) => !e.enabled || e.failed > 0 || e.retrying > 0;

const capped = (n: number) => (n >= COUNT_CAP ? `${COUNT_CAP.toLocaleString("en-GB")}+` : n.toLocaleString("en-GB"));

/** "52 min", "3 h 5 min", "2 d 4 h": how long ago `since` was. */
export function durationSince(since: Date, now = Date.now()): string {
  const min = Math.max(0, Math.floor((now - since.getTime()) / 60_000));
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 48) return `${h} h ${min % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

export function attentionPages(deps: AttentionDeps) {
  const { sql, readSql, timeZone, stuckAfterMin, lowWatermark } = deps;
  const at = (d: Date | null) => timeOf(d, timeZone);
  const app = new Hono<ConsoleEnv>();

  const load = async (): Promise<Attention> => {
    // The mark is the console's own, just moved by "Mark as seen" (which redirects here):
    // read from the primary, or the rejected callbacks marked would come back for a moment.
    // The rows after it may come from a replica: one behind only shows fewer of them.
    const [mark, failedSeen] = await Promise.all([getMark(sql, "rejected_seen"), getMark(sql, "failed_seen")]);
    const [placements, unconfirmed, failedCount, failed, silent, rejected, endpoints, available] = await Promise.all([
      placementCounts(readSql),
      listOrders(readSql, { placement: "unconfirmed", limit: ROWS }),
      countFailedCommands(readSql, COUNT_CAP, failedSeen),
      listCommands(readSql, { state: "failed", limit: ROWS, retryableOnly: true, completedAfterUs: failedSeen }),
      silentOrders(readSql, ACTIVE, stuckAfterMin, ROWS),
      rejectedSince(readSql, mark, { limit: REJECTED_ROWS, cap: COUNT_CAP, excerptChars: EXCERPT_CHARS }),
      endpointHealth(readSql),
      availableUpTo(readSql, lowWatermark),
    ]);
    return {
      unconfirmed: { count: placements.unconfirmed, rows: unconfirmed.rows },
      failedCommands: { count: failedCount, rows: failed.rows },
      silent: { count: silent.total, rows: silent.rows },
      rejected,
      endpoints: endpoints.filter(endpointFailing),
      awbAvailable: available < lowWatermark ? available : null,
    };
  };

  const more = (shown: number, count: number) => (count > shown ? html`<p>Showing ${shown} of ${capped(count)}.</p>` : null);

  const unconfirmedTable = (rows: readonly OrderRow[]) => html`<table aria-labelledby="unconfirmed-title">
      <thead><tr><th scope="col">Order</th><th scope="col" class="wide">Provider id</th><th scope="col">Why</th><th scope="col" class="wide">Since</th></tr></thead>
      <tbody>
        ${rows.map(
          (o) => html`<tr>
            <td class="id"><a href=${`/orders/${o.id}`}>${o.client_order_id ?? `#${o.id}`}</a></td>
            <td class="wide id">${o.svc_order_id ?? "–"}</td>
            <td class="long">${o.placement_error ?? "The provider's answer to the placement was lost."}</td>
            <td class="wide">${at(o.updated_at)}</td>
          </tr>`,
        )}
      </tbody>
    </table>`;

  const failedCommandsTable = (rows: readonly CommandListRow[], csrf: string) => html`<table aria-labelledby="failed-commands-title">
      <thead><tr><th scope="col">Order, command and error</th><th scope="col" class="wide">Attempts</th><th scope="col" class="wide">Failed</th></tr></thead>
      <tbody>
        ${rows.map(
          (k) => html`<tr>
            <td class="long">
              <bdi><a href=${`/orders/${k.order_id}`}>${k.client_order_id ?? k.svc_order_id ?? `#${k.order_id}`}</a></bdi>: command #${k.id} ${k.kind}<br />
              ${bidi(k.last_error) ?? "no error recorded"} <a href=${`/commands/${k.id}/retry`}>Retry…</a>
            </td>
            <td class="wide num">${k.attempts}</td>
            <td class="wide">${at(k.completed_at)}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    <form method="post" action="/attention/failed-seen">
      ${csrfField(csrf)}
      <input type="hidden" name="upto" value=${String(Math.max(0, ...rows.map((k) => k.completed_at?.getTime() ?? 0)))} />
      <div class="actions"><button type="submit" class="secondary" aria-describedby="failed-commands-title">Mark as seen</button></div>
    </form>`;

  const silentTable = (rows: readonly SilentOrder[]) => html`<table aria-labelledby="silent-title">
      <thead><tr><th scope="col">Order</th><th scope="col">Status</th><th scope="col">Silent for</th><th scope="col" class="wide">Last heard</th></tr></thead>
      <tbody>
        ${rows.map(
          (o) => html`<tr>
            <td class="id"><a href=${`/orders/${o.id}`}>${o.client_order_id ?? o.svc_order_id ?? `#${o.id}`}</a></td>
            <td>${badge(canonicalStatus(o.status) ?? o.placement_state)}</td>
            <td>${durationSince(o.silent_since)}</td>
            <td class="wide">${at(o.silent_since)}</td>
          </tr>`,
        )}
      </tbody>
    </table>`;

  const rejectedSection = (r: Attention["rejected"], csrf: string) => html`<table aria-labelledby="rejected-title">
      <thead><tr><th scope="col">Reason</th><th scope="col" class="wide">Received</th><th scope="col">Body</th></tr></thead>
      <tbody>
        ${r.rows.map(
          (x) => html`<tr>
            <td>${x.reason}</td>
            <td class="wide">${at(x.received_at)}</td>
            <td><code>${x.cut ? `${x.excerpt}…` : x.excerpt}</code></td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${more(r.rows.length, r.count)}
    <form method="post" action="/attention/rejected-seen">
      ${csrfField(csrf)}
      <input type="hidden" name="upto" value=${String(r.rows[0]?.id ?? 0)} />
      <div class="actions"><button type="submit" class="secondary" aria-describedby="rejected-title">Mark as seen</button></div>
    </form>`;

  const endpointsTable = (rows: readonly EndpointHealth[]) => html`<table aria-labelledby="endpoints-title">
      <thead><tr><th scope="col">Endpoint</th><th scope="col">State</th><th scope="col" class="wide">Delivered</th><th scope="col">Last error</th></tr></thead>
      <tbody>
        ${rows.map(
          (e) => html`<tr>
            <td class="long"><a href="/notifications">${e.url}</a></td>
            <td>${e.enabled ? html`${badge("enabled")} ${e.failed} failed, ${e.retrying} retrying` : html`<span class="badge bad">disabled</span> ${e.disabled_reason ?? "by hand"}`}</td>
            <td class="wide">${e.success_rate === null ? "–" : `${Math.round(e.success_rate * 100)}% of the last ${e.recent}`}</td>
            <td class="long">${e.last_error ?? (e.last_status_code !== null ? `HTTP ${e.last_status_code}` : "–")}</td>
          </tr>`,
        )}
      </tbody>
    </table>`;

  const content = (a: Attention, csrf: string): JSXNode => {
    const kinds = [
      { id: "unconfirmed", title: "Unconfirmed placements", count: a.unconfirmed.count, shown: a.unconfirmed.rows.length, body: () => unconfirmedTable(a.unconfirmed.rows) },
      { id: "failed-commands", title: "Failed commands", count: a.failedCommands.count, shown: a.failedCommands.rows.length, body: () => failedCommandsTable(a.failedCommands.rows, csrf) },
      { id: "silent", title: `Active orders silent for ${stuckAfterMin} min or more`, count: a.silent.count, shown: a.silent.rows.length, body: () => silentTable(a.silent.rows) },
      { id: "rejected", title: "Rejected callbacks since last seen", count: a.rejected.count, shown: a.rejected.count, body: () => rejectedSection(a.rejected, csrf) },
      { id: "endpoints", title: "Failing notification endpoints", count: a.endpoints.length, shown: a.endpoints.length, body: () => endpointsTable(a.endpoints) },
      {
        id: "awb",
        title: "AWB pool below its low watermark",
        count: a.awbAvailable === null ? 0 : 1,
        shown: a.awbAvailable === null ? 0 : 1,
        body: () => html`<p><a href="/awb">${a.awbAvailable} available</a>, below the low watermark of ${lowWatermark}. A top-up should be under way; the AWB pool page shows its requests.</p>`,
      },
    ];
    const open = kinds.filter((k) => k.count > 0);
    return html`<div class="cards">
        ${kinds.map(
          (k) => html`<div class="card" id=${`card-${k.id}`}>
            <div class="figure">${capped(k.count)}</div>
            ${k.count > 0 ? html`<a href=${`#${k.id}`}>${k.title}</a>` : k.title}
          </div>`,
        )}
      </div>
      ${open.length === 0
        ? html`<p class="notice" role="status">Nothing needs attention right now.</p>`
        : open.map(
            (k) => html`<section id=${k.id} aria-labelledby=${`${k.id}-title`}>
              <h2 id=${`${k.id}-title`}>${k.title} (${capped(k.count)})</h2>
              ${k.body()}
              ${k.id === "rejected" ? null : more(k.shown, k.count)}
            </section>`,
          )}`;
  };

  app.get("/attention/live", async (c) => renderFragment(c, content(await load(), c.get("session").csrfToken)));

  app.get("/", async (c) => {
    const csrf = c.get("session").csrfToken;
    return renderPage(c, {
      title: "Needs attention",
      nav: "/",
      csrf,
      body: html`<h1>Needs attention</h1>
        <p class="lead">What needs a person now; this page updates by itself.</p>
        <div data-live="/attention/live">${content(await load(), csrf)}</div>`,
    });
  });

  // A path without a page of its own: the list is on "/".
  app.get("/attention", (c) => c.redirect("/", 303));

  const SeenForm = z.object({ upto: z.coerce.number().int("must be a whole number").min(0, "must not be negative").max(Number.MAX_SAFE_INTEGER) });

  app.post("/attention/rejected-seen", async (c) => {
    const parsed = SeenForm.safeParse(await c.req.parseBody());
    const last = parsed.success ? await lastRejectedId(sql) : 0;
    if (!parsed.success || parsed.data.upto > last) {
      const problem = parsed.success ? `There is no rejected callback ${parsed.data.upto}: the newest is ${last}.` : problemOf(parsed.error);
      return badSeen(c, problem);
    }
    await advanceMark(sql, "rejected_seen", parsed.data.upto);
    return c.redirect("/", 303);
  });

  // Failed commands up to the newest one shown (its completion, in ms): those failing again
  // after it, retried or not, show again. The mark keeps microseconds: up to the end of that ms.
  app.post("/attention/failed-seen", async (c) => {
    const parsed = SeenForm.safeParse(await c.req.parseBody());
    if (!parsed.success) return badSeen(c, problemOf(parsed.error), "Failed commands");
    if (parsed.data.upto > Date.now() + 86_400_000) return badSeen(c, `upto: ${parsed.data.upto} is in the future`, "Failed commands");
    await advanceMark(sql, "failed_seen", parsed.data.upto * 1000 + 999);
    return c.redirect("/", 303);
  });

  const badSeen = (c: Context<ConsoleEnv>, problem: string, what = "Rejected callbacks") =>
    renderPage(c, {
      title: "Needs attention",
      nav: "/",
      csrf: c.get("session").csrfToken,
      status: 422,
      body: html`<h1>${what} not marked as seen</h1>${errorBox(problem)}<p><a href="/">Back to what needs attention</a></p>`,
    });

  return app;
}
