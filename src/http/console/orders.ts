/**
 * The console's orders: a filtered list that updates itself, and an order's page with its
 * status, placement, rider, path, timeline, commands and the actions a person may take.
 * Every action has a confirmation page (a GET) whose form posts it, so they work with
 * JavaScript off; after the post the browser is sent back to the order (303).
 */
import { Hono } from "hono";
import type { Context } from "hono";
import type { Sql } from "postgres";
import { z } from "zod";
import { confirmPlacement, createCommandOnce, retryCommand, retryPlacement } from "../../commands/service.ts";
import type { ResendOptions } from "../../commands/service.ts";
import { commandById, commandsWithAnswersOf } from "../../commands/store.ts";
import type { CommandRow, CommandWithAnswer } from "../../commands/store.ts";
import { coordinates, isJsonObject } from "../../domain/normalise.ts";
import { REDACTED } from "../../domain/redact.ts";
import { CANONICAL_STATUSES, canonicalStatus } from "../../domain/statuses.ts";
import { clipText, telNumber } from "../../domain/text.ts";
import { latestOrderEvents } from "../../events/log.ts";
import { PLACEMENT_STATES } from "../../orders/json.ts";
import { findOrder, findOrderById, listOrders } from "../../orders/read.ts";
import type { OrderRow } from "../../orders/read.ts";
import { CANCEL_USERS, CancelOrderBodySchema, MAX_STRING_LENGTH } from "../../provider/schemas.ts";
import { toApiError } from "../errors.ts";
import type { ConsoleEnv } from "./auth.ts";
import { blankToUndefined, fieldOf, problemOf } from "./forms.ts";
import { html } from "./html.ts";
import type { JSXNode } from "./html.ts";
import { badge, bidi, breakable, csrfField, errorBox, FIELD_ERROR_ID, fieldError, noticeBox, renderFragment, renderPage, timeOf } from "./layout.ts";
import { pagePool } from "./pools.ts";
import type { ConsolePools } from "./pools.ts";
import { riderPath } from "./svg.ts";
import type { PathPoint } from "./svg.ts";

export interface OrdersDeps extends ConsolePools {
  timeZone: string;
  /** How a placement is sent again by hand (PROVIDER_DEDUPES_ORDERS). */
  resend: ResendOptions;
  /**
   * Runs an action, which may append to the event log (a confirmation by hand), so that a
   * log whose partitions were not made ahead gets them instead of a 500, as the API's
   * (events/partitions.ts withPartitionsMade).
   */
  appending?: <T>(work: () => Promise<T>) => Promise<T>;
}

const PAGE_SIZE = 50;
/** Events shown on an order's page, the newest; the API pages through the rest. */
const TIMELINE_MAX = 500;

const SINCE = { "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000 } as const;

const ListQuery = z.object({
  q: z.preprocess(blankToUndefined, z.string().trim().max(128).optional()),
  status: z.preprocess(blankToUndefined, z.enum(CANONICAL_STATUSES).optional()),
  placement: z.preprocess(blankToUndefined, z.enum(PLACEMENT_STATES).optional()),
  store: z.preprocess(blankToUndefined, z.string().trim().max(64).optional()),
  updated: z.preprocess(blankToUndefined, z.enum(["1h", "24h", "7d"]).optional()),
  before: z.preprocess(blankToUndefined, z.coerce.number().int().positive().optional()),
});
type ListQuery = z.infer<typeof ListQuery>;

const OrderId = z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER);

/**
 * Is this URL one to link to? The provider's track_url is linked only when it is http or
 * https: any other scheme (`javascript:`, `data:`) shows as text.
 */
export function isWebUrl(url: string): boolean {
  try {
    const { protocol } = new URL(url);
    return protocol === "http:" || protocol === "https:";
  } catch {
    return false;
  }
}

/**
 * Placements a person may have to act on. On a phone the list has no room for a Placement
 * column: these show under the status instead (a placed order's placement goes unsaid).
 */
const UNSETTLED: ReadonlySet<string> = new Set(["pending", "unconfirmed", "failed"]);

/** The query string of a list (the filters only, for links and the live fragment). */
function filterQuery(q: ListQuery, extra: Record<string, string> = {}): string {
  const params = new URLSearchParams();
  for (const key of ["status", "placement", "store", "updated"] as const) {
    const value = q[key];
    if (value !== undefined) params.set(key, value);
  }
  for (const [k, v] of Object.entries(extra)) params.set(k, v);
  const text = params.toString();
  return text === "" ? "" : `?${text}`;
}


export function orderPages(deps: OrdersDeps) {
  const { sql, readSql, timeZone } = deps;
  const appending = deps.appending ?? (<T>(work: () => Promise<T>) => work());
  const at = (d: Date | null) => timeOf(d, timeZone);
  const app = new Hono<ConsoleEnv>();

  const rowsOf = (rows: readonly OrderRow[]) =>
    rows.length === 0
      ? html`<tr><td colspan="8">No orders match.</td></tr>`
      : rows.map(
          (o) => html`<tr>
            <td class="id"><a href=${`/orders/${o.id}`}>${o.client_order_id ?? `#${o.id}`}</a></td>
            <td class="wider id">${o.svc_order_id ?? "–"}</td>
            <td>
              ${badge(canonicalStatus(o.status))}
              ${UNSETTLED.has(o.placement_state) ? html`<span class="narrow"><br />placement ${badge(o.placement_state)}</span>` : null}
            </td>
            <td class="wide">${badge(o.placement_state)}</td>
            <td class="wide long">${o.rider_name ?? o.rider_id ?? "–"}</td>
            <td class="wide long">${o.store_code ?? "–"}</td>
            <td>${at(o.last_event_at)}</td>
            <td class="wider">${at(o.updated_at)}</td>
          </tr>`,
        );

  const filtersOf = (q: ListQuery) => ({
    status: q.status,
    placement: q.placement,
    storeCode: q.store,
    updatedAfter: q.updated === undefined ? undefined : new Date(Date.now() - SINCE[q.updated]),
  });

  app.get("/orders/rows", async (c) => {
    const parsed = ListQuery.safeParse(c.req.query());
    if (!parsed.success) return c.text(problemOf(parsed.error, "query"), 400);
    const page = await listOrders(readSql, { ...filtersOf(parsed.data), limit: PAGE_SIZE });
    return renderFragment(c, html`${rowsOf(page.rows)}`);
  });

  app.get("/orders", async (c) => {
    const parsed = ListQuery.safeParse(c.req.query());
    const csrf = c.get("session").csrfToken;
    if (!parsed.success) {
      return renderPage(c, { title: "Orders", nav: "/orders", csrf, status: 400, body: html`<h1>Orders</h1>${errorBox(problemOf(parsed.error, "query"))}<p><a href="/orders">All orders</a></p>` });
    }
    const q = parsed.data;
    let searched: JSXNode | null = null;
    if (q.q !== undefined) {
      const order = (await findOrder(readSql, { by: "client", id: q.q })) ?? (await findOrder(readSql, { by: "svc", id: q.q }));
      if (order) return c.redirect(`/orders/${order.id}`, 303);
      searched = errorBox(`No order has the id ${q.q} (neither as client_order_id nor as svc_order_id).`);
    }
    const page = await listOrders(readSql, { ...filtersOf(q), limit: PAGE_SIZE, beforeId: q.before });
    const option = (value: string, current: string | undefined, label = value) => html`<option value=${value} selected=${value === (current ?? "")}>${label}</option>`;
    const live = q.before === undefined ? `/orders/rows${filterQuery(q)}` : undefined;
    return renderPage(c, {
      title: "Orders",
      nav: "/orders",
      csrf,
      status: searched ? 404 : 200,
      body: html`<h1>Orders</h1>
        ${searched}
        <form class="filters" method="get" action="/orders" role="search">
          <label>Order id (either)<input name="q" type="search" value=${q.q ?? ""} placeholder="client or provider id" /></label>
          <label>Status<select name="status">${option("", q.status, "any")}${CANONICAL_STATUSES.map((s) => option(s, q.status))}</select></label>
          <label>Placement<select name="placement">${option("", q.placement, "any")}${PLACEMENT_STATES.map((s) => option(s, q.placement))}</select></label>
          <label>Store<input name="store" value=${q.store ?? ""} size="10" /></label>
          <label>Updated<select name="updated">${option("", q.updated, "any time")}${option("1h", q.updated, "last hour")}${option("24h", q.updated, "last 24 hours")}${option("7d", q.updated, "last 7 days")}</select></label>
          <button type="submit">Show</button>
        </form>
        <table>
          <caption>${live ? "Newest first; this list updates by itself." : "Newest first."}</caption>
          <thead><tr><th scope="col">Order</th><th scope="col" class="wider">Provider id</th><th scope="col">Status</th><th scope="col" class="wide">Placement</th><th scope="col" class="wide">Rider</th><th scope="col" class="wide">Store</th><th scope="col">Last event</th><th scope="col" class="wider">Updated</th></tr></thead>
          <tbody data-live=${live}>${rowsOf(page.rows)}</tbody>
        </table>
        <p class="pager">
          ${q.before !== undefined ? html`<a href=${`/orders${filterQuery(q)}`}>Newest</a>` : null}
          ${page.nextId !== null ? html`<a href=${`/orders${filterQuery(q, { before: String(page.nextId) })}`}>Older orders</a>` : null}
        </p>`,
    });
  });

  /** The order of the path's id, read on `db`, or a 404 page. */
  const orderOf = async (c: Context<ConsoleEnv>, db: Sql): Promise<OrderRow | Response> => {
    const id = OrderId.safeParse(c.req.param("id"));
    const order = id.success ? await findOrderById(db, id.data) : undefined;
    if (order) return order;
    return renderPage(c, {
      title: "Order not found",
      nav: "/orders",
      csrf: c.get("session").csrfToken,
      status: 404,
      body: html`<h1>Order not found</h1>${errorBox(`There is no order ${c.req.param("id") ?? ""}.`)}<p><a href="/orders">All orders</a></p>`,
    });
  };

  const summaryOf = (o: OrderRow) => html`<dl class="facts">
      <dt>Status</dt><dd>${badge(canonicalStatus(o.status))} ${o.provider_status && o.provider_status !== o.status ? html`(provider: ${bidi(o.provider_status)})` : null} ${at(o.status_at)}</dd>
      <dt>Placement</dt><dd>${badge(o.placement_state)} ${bidi(o.placement_error)}</dd>
      <dt>Rider</dt><dd>${bidi(o.rider_name ?? o.rider_id) ?? "none yet"}${o.rider_contact === REDACTED ? html`, contact ${REDACTED}` : o.rider_contact ? html`, ${contactLink(o.rider_contact)}` : null}${o.rider_location_at ? html`; last seen ${at(o.rider_location_at)}` : null}</dd>
      <dt>Client id</dt><dd>${bidi(o.client_order_id) ?? "–"}</dd>
      <dt>Provider ids</dt><dd>${o.svc_order_ids.length > 0 ? o.svc_order_ids.join(", ") : (o.svc_order_id ?? "none yet")}</dd>
      <dt>Store</dt><dd>${bidi(o.store_code) ?? "–"}</dd>
      <dt>AWB</dt><dd>${o.awb_number ?? "–"}</dd>
      <dt>Tracking</dt><dd>${o.track_url === null ? "–" : isWebUrl(o.track_url) ? html`<a href=${o.track_url} rel="noreferrer noopener">${o.track_url}</a>` : o.track_url}</dd>
      <dt>Events</dt><dd>${o.event_count}, last ${at(o.last_event_at)}</dd>
    </dl>`;

  // On a phone the action column gives way (a Retry… button beside the answer made a
  // 320 px page scroll sideways): the link shows under the command's state instead.
  const retryLink = (k: CommandWithAnswer) => html`<a class="button secondary" href=${`/commands/${k.id}/retry`}>Retry…</a>`;
  const commandsOf = (o: OrderRow, commands: readonly CommandWithAnswer[]) =>
    commands.length === 0
      ? html`<p>No commands sent for this order.</p>`
      : html`<table aria-labelledby="commands-title">
          <thead><tr><th scope="col">Command</th><th scope="col">State</th><th scope="col" class="wide num">Attempts</th><th scope="col">Provider's answer</th><th scope="col" class="wide">Sent</th><th scope="col" class="wide"><span class="visually-hidden">Action</span></th></tr></thead>
          <tbody>
            ${commands.map(
              (k) => html`<tr>
                <td>#${k.id} ${breakable(k.kind)}</td>
                <td>${badge(k.state)}${k.outcome_unknown ? " (outcome unknown)" : ""}${retryable(k, o) ? html`<span class="narrow"><br />${retryLink(k)}</span>` : null}</td>
                <td class="wide num">${k.attempts}</td>
                <td class="long">${answerOf(k)}</td>
                <td class="wide">${at(k.created_at)}</td>
                <td class="wide">${retryable(k, o) ? retryLink(k) : null}</td>
              </tr>`,
            )}
          </tbody>
        </table>`;

  const timelineOf = (events: readonly { id: number; kind: string; provider_status: string | null; occurred_at: Date; source: string; payload: unknown }[]) =>
    events.length === 0
      ? html`<p>No events yet.</p>`
      : html`<table aria-labelledby="timeline-title">
          <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col" class="wide">From</th></tr></thead>
          <tbody>
            ${events.map(
              (e) => html`<tr><td>${at(e.occurred_at)}</td><td>${whatHappened(e)}</td><td class="wide">${e.source}</td></tr>`,
            )}
          </tbody>
        </table>`;

  /** The parts of an order's page that move: status, actions, commands and timeline. */
  const liveParts = async (db: Sql, o: OrderRow) => {
    const [timeline, commands] = await Promise.all([latestOrderEvents(db, o, TIMELINE_MAX), commandsWithAnswersOf(db, o.id)]);
    const path: PathPoint[] = [];
    for (const e of timeline.rows) {
      const point = isJsonObject(e.payload) ? coordinates(e.payload) : null;
      if (point) path.push({ ...point, at: e.occurred_at });
    }
    const describe = (d: Date) => new Intl.DateTimeFormat("en-GB", { timeZone, hour: "2-digit", minute: "2-digit" }).format(d);
    return html`<h2>Summary</h2>
      ${summaryOf(o)}
      <h2>Actions</h2>
      ${actionsOf(o)}
      <h2>Rider's path</h2>
      ${riderPath(path, describe)}
      <h2 id="commands-title">Commands</h2>
      ${commandsOf(o, commands)}
      <h2 id="timeline-title">Timeline</h2>
      ${timelineOf(timeline.rows)}
      ${timeline.older ? html`<p>Showing the latest ${TIMELINE_MAX} events; the API (GET /v1/orders/{order}/events) pages through all of them.</p>` : null}`;
  };

  app.get("/orders/:id/live", async (c) => {
    const order = await orderOf(c, readSql);
    if (order instanceof Response) return order;
    return renderFragment(c, await liveParts(readSql, order));
  });

  app.get("/orders/:id", async (c) => {
    // After an action (`?done=`): from the primary, with the command just recorded.
    const db = pagePool(c, deps);
    const order = await orderOf(c, db);
    if (order instanceof Response) return order;
    const csrf = c.get("session").csrfToken;
    const done = doneNotice(c.req.query("done"), c.req.query("command"), c.req.query("already") === "1");
    return renderPage(c, {
      title: `Order ${order.client_order_id ?? order.id}`,
      nav: "/orders",
      csrf,
      body: html`<p><a href="/orders">← Orders</a></p>
        <h1>Order ${order.client_order_id === null ? `#${order.id}` : bidi(order.client_order_id)}</h1>
        ${done ? noticeBox(done) : null}
        <div data-live=${`/orders/${order.id}/live`}>${await liveParts(db, order)}</div>`,
    });
  });

  // ---------------------------------------------------------------- actions

  for (const action of ORDER_ACTIONS) {
    app.get(`/orders/:id/${action.path}`, async (c) => {
      const order = await orderOf(c, readSql);
      if (order instanceof Response) return order;
      return confirmPage(c, order, action);
    });
    app.post(`/orders/:id/${action.path}`, async (c) => {
      const order = await orderOf(c, sql);
      if (order instanceof Response) return order;
      const form = await c.req.parseBody();
      const input = action.fields.safeParse(form);
      if (!input.success) return confirmPage(c, order, action, { status: 422, error: problemOf(input.error), field: fieldOf(input.error) });
      try {
        const { commandId, created } = await appending(() => action.run(sql, order, input.data, deps.resend));
        return c.redirect(`/orders/${order.id}?done=${action.path}&command=${commandId}${created ? "" : "&already=1"}`, 303);
      } catch (err) {
        const api = toApiError(err);
        if (api.code === "internal_error" || api.code === "database_unavailable") throw err;
        return confirmPage(c, order, action, { status: api.code === "order_not_found" ? 404 : 409, error: api.message });
      }
    });
  }

  /** `problem.field`: the field the refusal is about (marked, described by the error, focused). */
  const confirmPage = (c: Context<ConsoleEnv>, order: OrderRow, action: OrderAction, problem?: { status: 404 | 409 | 422; error: string; field?: string | undefined }) =>
    renderPage(c, {
      title: `${action.title} · order ${order.client_order_id ?? order.id}`,
      nav: "/orders",
      csrf: c.get("session").csrfToken,
      status: problem?.status ?? 200,
      body: html`<p><a href=${`/orders/${order.id}`}>← Order ${order.client_order_id ?? `#${order.id}`}</a></p>
        <h1>${action.title}?</h1>
        ${problem ? errorBox(problem.error, problem.field === undefined ? undefined : FIELD_ERROR_ID) : null}
        <p>${action.explain(order)}</p>
        <form method="post" action=${`/orders/${order.id}/${action.path}`}>
          ${csrfField(c.get("session").csrfToken)}
          ${action.inputs?.(problem?.field)}
          <div class="actions">
            <button type="submit" class=${action.danger ? "danger" : undefined}>${action.title}</button>
            <a class="button secondary" href=${`/orders/${order.id}`}>Keep it as it is</a>
          </div>
        </form>`,
    });

  app.get("/commands/:id/retry", async (c) => {
    const command = await commandOf(c, readSql);
    if (command instanceof Response) return command;
    // A place whose outcome is unknown is never retried as a command (it could create a
    // second order): send the person to the placement's own actions instead of a form
    // whose post is always refused.
    const order = await findOrderById(readSql, command.order_id);
    if (command.state !== "failed") return notFailedPage(c, command, order);
    if (order && command.kind === "place" && !retryable(command, order)) return unknownPlacePage(c, command, order);
    return retryCommandPage(c, command, order);
  });
  app.post("/commands/:id/retry", async (c) => {
    const command = await commandOf(c, sql);
    if (command instanceof Response) return command;
    try {
      const id = await retryCommand(sql, command.id, deps.resend);
      return c.redirect(`/orders/${command.order_id}?done=retry-command&command=${id}`, 303);
    } catch (err) {
      const api = toApiError(err);
      if (api.code === "internal_error" || api.code === "database_unavailable") throw err;
      // Read again: a retry sent twice (a double click, or someone else first) finds the
      // command pending, and the page says so instead of "it failed" beside a Retry button.
      const now = (await commandById(sql, command.id)) ?? command;
      const order = await findOrderById(sql, now.order_id);
      if (now.state !== "failed") return notFailedPage(c, now, order, api.message);
      return retryCommandPage(c, now, order, api.message);
    }
  });

  const commandOf = async (c: Context<ConsoleEnv>, db: Sql) => {
    const id = OrderId.safeParse(c.req.param("id"));
    const command = id.success ? await commandById(db, id.data) : undefined;
    if (command) return command;
    return renderPage(c, { title: "Command not found", nav: "/orders", csrf: c.get("session").csrfToken, status: 404, body: html`<h1>Command not found</h1>${errorBox(`There is no command ${c.req.param("id") ?? ""}.`)}` });
  };

  /** "order SO-1" (its client id, else the provider's, else its number), for a command's pages. */
  const orderName = (command: CommandRow, order: OrderRow | undefined) => `order ${order?.client_order_id ?? order?.svc_order_id ?? `#${command.order_id}`}`;

  const retryCommandPage = (c: Context<ConsoleEnv>, command: CommandRow, order: OrderRow | undefined, error?: string) =>
    renderPage(c, {
      title: `Retry command #${command.id}`,
      nav: "/orders",
      csrf: c.get("session").csrfToken,
      status: error ? 409 : 200,
      body: html`<p><a href=${`/orders/${command.order_id}`}>← ${upperFirst(orderName(command, order))}</a></p>
        <h1>Retry command #${command.id} (${command.kind}) of ${orderName(command, order)}?</h1>
        ${error ? errorBox(error) : null}
        <p>${retryExplained(command, orderName(command, order))}</p>
        <p>It failed after ${command.attempts} attempt${command.attempts === 1 ? "" : "s"}: ${command.last_error ?? "no error recorded"}. Retrying sends the same request to the provider again, as a new round of attempts.</p>
        <form method="post" action=${`/commands/${command.id}/retry`}>
          ${csrfField(c.get("session").csrfToken)}
          <div class="actions"><button type="submit" class=${command.kind === "cancel" ? "danger" : undefined}>Retry</button><a class="button secondary" href=${`/orders/${command.order_id}`}>Leave it</a></div>
        </form>`,
    });

  /** A command that is not failed (any more): nothing to retry; after a refused post, why. */
  const notFailedPage = (c: Context<ConsoleEnv>, command: CommandRow, order: OrderRow | undefined, error?: string) =>
    renderPage(c, {
      title: `Command #${command.id}`,
      nav: "/orders",
      csrf: c.get("session").csrfToken,
      status: error ? 409 : 200,
      body: html`<p><a href=${`/orders/${command.order_id}`}>← ${upperFirst(orderName(command, order))}</a></p>
        <h1>Command #${command.id} (${command.kind}) of ${orderName(command, order)} ${command.state === "pending" ? "is pending" : `has ${command.state}`}</h1>
        ${error ? errorBox("Nothing more was sent: this command is no longer failed (it was retried already).") : null}
        <p>${command.state === "pending" ? "It is being sent to the provider (it was retried already): its answer shows on the order's page." : "There is nothing to retry."}</p>
        <div class="actions"><a class="button" href=${`/orders/${command.order_id}`}>Open ${orderName(command, order)}</a></div>`,
    });

  const unknownPlacePage = (c: Context<ConsoleEnv>, command: CommandRow, order: OrderRow) =>
    renderPage(c, {
      title: `Command #${command.id}`,
      nav: "/orders",
      csrf: c.get("session").csrfToken,
      body: html`<p><a href=${`/orders/${order.id}`}>← Order ${order.client_order_id ?? `#${order.id}`}</a></p>
        <h1>Command #${command.id} (place) is not retried</h1>
        <p>Its outcome is unknown (${command.last_error ?? "no answer"}): the provider may have created the order, and sending it again could create a second one. Look for the order at the provider, then resolve the placement:</p>
        ${order.placement_state === "unconfirmed"
          ? html`<div class="actions"><a class="button" href=${`/orders/${order.id}/confirm-placement`}>Confirm the placement…</a><a class="button secondary" href=${`/orders/${order.id}/retry-placement`}>Place it again…</a></div>`
          : html`<p>The order's placement is ${order.placement_state} now: nothing is left to resolve.</p>`}`,
    });

  return app;
}

/**
 * Whether the console offers "Retry…" for a command: only where POST /commands/{id}/retry
 * can succeed. A place whose outcome is unknown (the order's placement is unconfirmed) is
 * refused there, since it may create a second order: the placement's actions resolve it.
 * A confirmation by hand has nothing to send again.
 */
function retryable(k: Pick<CommandRow, "state" | "kind" | "outcome_unknown">, o: Pick<OrderRow, "placement_state">): boolean {
  if (k.state !== "failed" || k.kind === "confirm_placement") return false;
  return k.kind !== "place" || (!k.outcome_unknown && o.placement_state !== "unconfirmed");
}

const upperFirst = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/** What a retry of `command` asks of the provider, in words. */
function retryExplained(command: CommandRow, order: string): string {
  const request = isJsonObject(command.request) ? command.request : {};
  switch (command.kind) {
    case "cancel": {
      const reason = typeof request["reason"] === "string" ? ` (reason: ${request["reason"]}; asked by ${String(request["user"] ?? "–")})` : "";
      return `tracklane asks the provider again to cancel ${order}${reason}. A rider on the way is called off.`;
    }
    case "place":
      return `tracklane sends ${order} to the provider again. Its outcome is known (refused, or never sent), so the provider has no order from it.`;
    case "dispatch_ready":
      return `tracklane tells the provider again that ${order} is ready to be picked up.`;
    case "stop_reattempt":
      return `tracklane asks the provider again to stop re-attempting delivery of ${order}.`;
    case "edit":
      return `tracklane sends the same edit of ${order} to the provider again.`;
    default:
      return `tracklane sends this command for ${order} again.`;
  }
}

/** A timeline row's "What": a rider location, the status, or what tracklane itself recorded (its note). */
function whatHappened(e: { kind: string; provider_status: string | null; payload: unknown }): JSXNode | string {
  if (e.kind === "location") return "rider location";
  if (e.provider_status !== null) return badge(canonicalStatus(e.provider_status) ?? e.provider_status);
  const note = isJsonObject(e.payload) ? e.payload["tracklane"] : undefined;
  return typeof note === "string" ? note : "–";
}

/** A rider's contact, as a link to call it when it holds a number (its digits in ASCII: a dialler reads no other). */
function contactLink(contact: string): JSXNode {
  const number = telNumber(contact);
  return number === null ? html`<bdi>${contact}</bdi>` : html`<bdi><a href=${`tel:${number}`}>${contact}</a></bdi>`;
}

/** The provider's last answer to a command, or its error, shortened. */
function answerOf(k: CommandWithAnswer): string {
  if (k.last_error) return k.last_error;
  if (k.response === null || k.response === undefined) return k.state === "pending" ? "waiting" : "–";
  const text = JSON.stringify(k.response);
  return clipText(text, 300);
}

/**
 * The notice after an action, from its name (never text taken from the URL). `already`:
 * the same command was recorded before (a form sent twice), and nothing more was.
 */
function doneNotice(done: string | undefined, command: string | undefined, already = false): string | null {
  const action = ORDER_ACTIONS.find((a) => a.path === done);
  const what = action?.title ?? (done === "retry-command" ? "Retry" : null);
  if (what === null) return null;
  const id = command !== undefined && /^\d{1,15}$/.test(command) ? ` as command #${command}` : "";
  if (already) return `${what}: already recorded${id}, so nothing more was sent. The provider's answer shows under Commands as soon as it comes.`;
  return `${what}: recorded${id}. The provider's answer shows under Commands as soon as it comes.`;
}

interface OrderAction {
  path: string;
  title: string;
  danger?: boolean;
  explain: (o: OrderRow) => string;
  /** The form's fields; `invalid`: the one a refused post was about. */
  inputs: ((invalid: string | undefined) => JSXNode) | null;
  fields: z.ZodType<Record<string, string>>;
  /** Does it: the command's id, and false when that command was recorded before (a form sent twice). */
  run: (sql: Sql, o: OrderRow, input: Record<string, string>, resend: ResendOptions) => Promise<{ commandId: number; created: boolean }>;
}

const noFields = z.object({}).transform(() => ({}) as Record<string, string>);

const ORDER_ACTIONS: readonly OrderAction[] = [
  {
    path: "cancel",
    title: "Cancel the order",
    danger: true,
    explain: () =>
      "tracklane asks the provider to cancel this order (each provider order, if it made two). A rider on the way is called off. An order whose placement has not reached the provider yet is not sent at all.",
    inputs: (invalid) => html`<p><label>Reason<input name="reason" required maxlength=${String(MAX_STRING_LENGTH)} ...${fieldError(invalid === "reason")} /></label></p>
      <p><label>Asked by<select name="user" ...${fieldError(invalid === "user")}>${CANCEL_USERS.map((u) => html`<option value=${u} selected=${u === "Seller"}>${u}</option>`)}</select></label></p>`,
    // The API's own check of a cancel (what the provider takes): a longer reason would be
    // recorded here and then refused at every attempt to send it.
    fields: z.object({ reason: z.string().trim().min(1, "give a reason").pipe(CancelOrderBodySchema.shape.reason), user: CancelOrderBodySchema.shape.user }),
    run: async (sql, o, input) => await createCommandOnce(sql, o, "cancel", { reason: input["reason"]!, user: input["user"]! }),
  },
  {
    path: "dispatch-ready",
    title: "Mark ready for pickup",
    explain: () => "tracklane tells the provider the shipment is ready to be picked up now.",
    inputs: null,
    fields: noFields,
    run: async (sql, o) => await createCommandOnce(sql, o, "dispatch_ready", { shipment_ready_timestamp: new Date().toISOString() }),
  },
  {
    path: "stop-reattempt",
    title: "Stop re-attempts",
    explain: () => "tracklane asks the provider to stop re-attempting delivery of this order.",
    inputs: null,
    fields: noFields,
    run: async (sql, o) => await createCommandOnce(sql, o, "stop_reattempt", {}),
  },
  {
    path: "confirm-placement",
    title: "Confirm the placement",
    explain: () =>
      "Nobody knows whether the provider created this order: its answer was lost. If you found it at the provider, give the provider's order id; the order becomes placed with it.",
    inputs: (invalid) => html`<p><label>The provider's order id<input name="svc_order_id" required maxlength="128" inputmode="numeric" ...${fieldError(invalid === "svc_order_id")} /></label></p>`,
    fields: z.object({ svc_order_id: z.string().trim().min(1, "give the provider's order id").max(128) }),
    run: async (sql, o, input) => await confirmPlacement(sql, o.id, input["svc_order_id"]!),
  },
  {
    path: "retry-placement",
    title: "Place it again",
    danger: true,
    explain: () =>
      "Only when you checked that the provider has no such order: the original request is sent again. If the lost attempt did create an order, this creates a second one.",
    inputs: null,
    fields: noFields,
    run: async (sql, o, _input, resend) => ({ commandId: await retryPlacement(sql, o.id, resend), created: true }),
  },
];

/** The actions that make sense for the order now, as links to their confirmation pages. */
function actionsOf(o: OrderRow): JSXNode {
  const status = canonicalStatus(o.status);
  const finished = status === "DELIVERED" || status === "CANCELLED" || status === "CANCELLED_BY_CUSTOMER" || status === "RETURNED_TO_SELLER";
  const offered = ORDER_ACTIONS.filter((a) => {
    if (a.path === "confirm-placement" || a.path === "retry-placement") return o.placement_state === "unconfirmed";
    return !finished && o.placement_state !== "pending" && o.placement_state !== "unconfirmed" && o.placement_state !== "failed";
  });
  // A refused placement waits for nobody: a person fixes its cause and sends it again.
  if (offered.length === 0 && !finished && o.placement_state === "failed") {
    return html`<p>The provider refused this order's placement: once its cause is fixed, retry the place command under Commands.</p>`;
  }
  if (offered.length === 0) return html`<p>Nothing to do: ${finished ? "the order is finished." : "wait for its placement."}</p>`;
  return html`<div class="actions">${offered.map((a) => html`<a class=${a.danger ? "button secondary" : "button"} href=${`/orders/${o.id}/${a.path}`}>${a.title}…</a>`)}</div>`;
}
