/**
 * The console's notifications: each endpoint (never its secrets) with how its recent
 * deliveries went, and the messages whose delivery failed, each with a Resend button
 * (a confirmation page whose form sends the message again to its enabled endpoints).
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { Sql } from "postgres";
import { z } from "zod";
import { endpointHealth, HEALTH_WINDOW, listDeliveries, messageDetail, resendMessageOnce } from "../../notify/deliveries.ts";
import type { DeliveryListRow, EndpointHealth, MessageDetail } from "../../notify/deliveries.ts";
import type { ConsoleEnv } from "./auth.ts";
import { blankToUndefined, problemOf } from "./forms.ts";
import { html } from "./html.ts";
import { badge, bidi, csrfField, errorBox, noticeBox, renderPage, timeOf } from "./layout.ts";
import { pagePool } from "./pools.ts";
import type { ConsolePools } from "./pools.ts";

export interface NotificationPagesDeps extends ConsolePools {
  timeZone: string;
}

const PAGE_SIZE = 50;

const ListQuery = z.object({
  before: z.preprocess(blankToUndefined, z.coerce.number().int("must be a whole number").positive("must be positive").max(Number.MAX_SAFE_INTEGER).optional()),
  done: z.string().optional(),
  deliveries: z.string().optional(),
  already: z.string().optional(),
});

/** A message id as tracklane makes them (`msg_` and a time-ordered id). */
const MessageId = z.string().regex(/^msg_[0-9A-Za-z]{1,64}$/);


export function notificationPages(deps: NotificationPagesDeps) {
  const { sql, readSql, timeZone } = deps;
  const at = (d: Date | null) => timeOf(d, timeZone);
  const app = new Hono<ConsoleEnv>();

  const endpointsTable = (endpoints: readonly EndpointHealth[]) =>
    endpoints.length === 0
      ? html`<p>No endpoints: add one with POST /v1/notifications/endpoints (see the <a href="/docs">API docs</a>).</p>`
      : html`<table>
          <caption>Success is over each endpoint's latest ${HEALTH_WINDOW} deliveries.</caption>
          <thead><tr><th scope="col">Endpoint</th><th scope="col" class="wide">Types</th><th scope="col">State</th><th scope="col">Success</th><th scope="col" class="wide">Last error</th></tr></thead>
          <tbody>
            ${endpoints.map(
              (e) => html`<tr>
                <td class="long">${e.url}${e.description ? html`<br />${bidi(e.description)}` : null}<br /><small>${e.id}</small></td>
                <td class="wide">${e.events.length === 0 ? "all" : e.events.join(", ")}</td>
                <td>
                  ${e.enabled ? html`<span class="badge ok">enabled</span>` : html`<span class="badge bad">disabled</span> ${e.disabled_reason ?? "by hand"}`}
                  ${e.retrying > 0 ? html`<br />${e.retrying} retrying` : null}
                </td>
                <td>${e.success_rate === null ? "nothing sent yet" : `${Math.round(e.success_rate * 100)}%`} <span class="wide">(${e.delivered} delivered, ${e.failed} failed of ${e.recent})</span></td>
                <td class="wide long">${bidi(e.last_error) ?? "–"}${e.last_status_code !== null ? ` (last answer HTTP ${e.last_status_code})` : ""}</td>
              </tr>`,
            )}
          </tbody>
        </table>`;

  const failedTable = (rows: readonly DeliveryListRow[], urls: ReadonlyMap<string, string>) =>
    rows.length === 0
      ? html`<p>No failed messages.</p>`
      : html`<table>
          <caption>Newest first.</caption>
          <thead><tr><th scope="col">Message</th><th scope="col">Order</th><th scope="col" class="wide">Endpoint</th><th scope="col" class="wide">Created</th><th scope="col">Error</th></tr></thead>
          <tbody>
            ${rows.map((d) => {
              const order = d.client_order_id ?? d.svc_order_id;
              return html`<tr>
                <td class="long">${d.type}<br /><small>${d.message_id}</small></td>
                <td class="id">${order === null ? "–" : html`<a href=${`/orders?q=${encodeURIComponent(order)}`}>${order}</a>`}</td>
                <td class="wide long">${urls.get(d.endpoint_id) ?? d.endpoint_id}</td>
                <td class="wide">${at(d.created_at)}</td>
                <td class="long">${bidi(d.last_error) ?? "–"} <span class="wide">(${d.attempts} attempt${d.attempts === 1 ? "" : "s"})</span> <a href=${`/notifications/messages/${d.message_id}/resend`}>Resend…</a></td>
              </tr>`;
            })}
          </tbody>
        </table>`;

  app.get("/notifications", async (c) => {
    const csrf = c.get("session").csrfToken;
    const parsed = ListQuery.safeParse(c.req.query());
    if (!parsed.success) {
      return renderPage(c, { title: "Notifications", nav: "/notifications", csrf, status: 400, body: html`<h1>Notifications</h1>${errorBox(problemOf(parsed.error, "query"))}<p><a href="/notifications">Notifications</a></p>` });
    }
    const q = parsed.data;
    // After a resend (`?done=resend`): from the primary, where its deliveries are no longer failed.
    const db = pagePool(c, deps);
    const [endpoints, failed] = await Promise.all([endpointHealth(db), listDeliveries(db, { status: "failed", limit: PAGE_SIZE, beforeId: q.before })]);
    const urls = new Map(endpoints.map((e) => [e.id, e.url]));
    const count = (n: string | undefined) => (q.done === "resend" && n !== undefined && /^\d{1,9}$/.test(n) ? Number(n) : null);
    const sent = count(q.deliveries);
    const already = count(q.already) ?? 0;
    return renderPage(c, {
      title: "Notifications",
      nav: "/notifications",
      csrf,
      body: html`<h1>Notifications</h1>
        ${sent !== null ? noticeBox(resendNotice(sent, already)) : null}
        <h2>Endpoints</h2>
        ${endpointsTable(endpoints)}
        <h2>Failed messages</h2>
        ${failedTable(failed.rows, urls)}
        <p class="pager">
          ${q.before !== undefined ? html`<a href="/notifications">Newest</a>` : null}
          ${failed.nextId !== null ? html`<a href=${`/notifications?before=${failed.nextId}`}>Older failed messages</a>` : null}
        </p>`,
    });
  });

  /** The message of the path's id, read on `db`, or a 404 page. */
  const messageOf = async (c: Context<ConsoleEnv>, db: Sql): Promise<MessageDetail | Response> => {
    const id = MessageId.safeParse(c.req.param("id"));
    const detail = id.success ? await messageDetail(db, id.data) : null;
    return detail ?? notFound(c);
  };

  const notFound = (c: Context<ConsoleEnv>) =>
    renderPage(c, {
      title: "Message not found",
      nav: "/notifications",
      csrf: c.get("session").csrfToken,
      status: 404,
      body: html`<h1>Message not found</h1>${errorBox(`There is no notification message ${c.req.param("id") ?? ""}.`)}<p><a href="/notifications">Notifications</a></p>`,
    });

  const resendPage = async (c: Context<ConsoleEnv>, db: Sql, detail: MessageDetail, error?: string) => {
    const m = detail.message;
    const urls = new Map((await endpointHealth(db)).map((e) => [e.id, e]));
    return renderPage(c, {
      title: `Resend ${m.id}`,
      nav: "/notifications",
      csrf: c.get("session").csrfToken,
      status: error ? 409 : 200,
      body: html`<p><a href="/notifications">← Notifications</a></p>
        <h1>Send ${m.type} again?</h1>
        ${error ? errorBox(error) : null}
        <p>
          Message <code>${m.id}</code> for order ${bidi(m.client_order_id ?? m.svc_order_id) ?? "–"}, created ${at(m.created_at)}. It goes again, with the same
          webhook-id, to each enabled endpoint it went to; each delivery starts a new round of attempts.
        </p>
        <table>
          <caption>Its deliveries, one to each endpoint it went to.</caption>
          <thead><tr><th scope="col">Endpoint</th><th scope="col">Delivery</th><th scope="col" class="wide">Attempts</th><th scope="col">Last error</th></tr></thead>
          <tbody>
            ${detail.deliveries.map((d) => {
              const e = urls.get(d.endpoint_id);
              return html`<tr>
                <td class="long">${e?.url ?? d.endpoint_id}${e && !e.enabled ? html` <span class="badge bad">disabled</span>` : null}</td>
                <td>${badge(d.status)}</td>
                <td class="wide num">${d.attempts}</td>
                <td class="long">${d.last_error ?? "–"}</td>
              </tr>`;
            })}
          </tbody>
        </table>
        <form method="post" action=${`/notifications/messages/${m.id}/resend`}>
          ${csrfField(c.get("session").csrfToken)}
          <div class="actions"><button type="submit">Resend</button><a class="button secondary" href="/notifications">Leave it</a></div>
        </form>`,
    });
  };

  app.get("/notifications/messages/:id/resend", async (c) => {
    const detail = await messageOf(c, readSql);
    if (detail instanceof Response) return detail;
    return resendPage(c, readSql, detail);
  });

  app.post("/notifications/messages/:id/resend", async (c) => {
    const detail = await messageOf(c, sql);
    if (detail instanceof Response) return detail;
    // Once: a Resend sent twice (a double click, or a second person) queues nothing more.
    const resent = await resendMessageOnce(sql, detail.message.id);
    if (resent === null) return notFound(c); // gone meanwhile
    if (resent.queued + resent.already === 0) return resendPage(c, sql, detail, "None of the endpoints this message went to is enabled: enable one (PATCH /v1/notifications/endpoints/{id}), then resend.");
    return c.redirect(`/notifications?done=resend&deliveries=${resent.queued}${resent.already > 0 ? `&already=${resent.already}` : ""}`, 303);
  });

  return app;
}

const deliveriesOf = (n: number) => `${n} deliver${n === 1 ? "y" : "ies"}`;

/** The notice after a Resend: what it queued, and what was queued already (nothing more was sent for it). */
function resendNotice(sent: number, already: number): string {
  if (sent === 0) return `Already queued: ${deliveriesOf(already)} of this message ${already === 1 ? "was" : "were"} waiting to go (a Resend sent twice, or still being attempted), so nothing more was sent. Each shows here again if it fails.`;
  const rest = already > 0 ? ` ${deliveriesOf(already)} ${already === 1 ? "was" : "were"} queued already, so nothing more was sent for ${already === 1 ? "it" : "them"}.` : "";
  return `Sent again: ${deliveriesOf(sent)} queued.${rest} Each shows here again if it fails.`;
}
