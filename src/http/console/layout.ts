/**
 * The console's page shell (head, navigation, sign-out) and the small pieces every page
 * uses: times in the merchant's zone, status badges, the CSRF field.
 */
import type { Context } from "hono";
import { assetUrl } from "./assets.ts";
import { CSRF_FIELD } from "./auth.ts";
import type { ConsoleEnv } from "./auth.ts";
import { html } from "./html.ts";
import type { Child, JSXNode } from "./html.ts";

export const NAV = [
  { href: "/", label: "Needs attention" },
  { href: "/orders", label: "Orders" },
  { href: "/awb", label: "AWB pool" },
  { href: "/notifications", label: "Notifications" },
  { href: "/system", label: "System" },
] as const;

export type NavHref = (typeof NAV)[number]["href"];

export interface PageOptions {
  title: string;
  /** The navigation entry to mark as current; none on the sign-in page. */
  nav?: NavHref | undefined;
  body: Child;
  status?: 200 | 400 | 403 | 404 | 409 | 422 | 429 | 502;
  /** The session's CSRF token: with it the header offers signing out. */
  csrf?: string | undefined;
}

/** A whole page, server-rendered. */
export async function renderPage(c: Context, o: PageOptions): Promise<Response> {
  const doc = html`<html lang="en">
    <head>
      <meta charset="utf-8" />
      <meta name="viewport" content="width=device-width, initial-scale=1" />
      <title>${(o.status ?? 200) >= 400 ? `Error: ${o.title}` : o.title} · tracklane</title>
      <link rel="icon" type="image/svg+xml" href=${assetUrl.icon} />
      <link rel="stylesheet" href=${assetUrl.css} />
      <script src=${assetUrl.js} defer></script>
    </head>
    <body>
      <a class="skip" href="#main">Skip to the page</a>
      <header class="top">
        <a class="brand" href="/">tracklane</a>
        ${o.csrf === undefined
          ? null
          : html`<nav aria-label="Console">
                <ul>
                  ${NAV.map((n) => html`<li><a href=${n.href} aria-current=${n.href === o.nav ? "page" : undefined}>${n.label}</a></li>`)}
                </ul>
              </nav>
              <form method="post" action="/sign-out">${csrfField(o.csrf)}<button type="submit">Sign out</button></form>`}
      </header>
      <main id="main">${o.body}</main>
    </body>
  </html>`;
  return c.html(`<!doctype html>${await doc.toString()}`, o.status ?? 200);
}

/** A fragment for live updates (no shell). */
export async function renderFragment(c: Context<ConsoleEnv>, node: JSXNode): Promise<Response> {
  c.header("cache-control", "no-store");
  return c.html(await node.toString());
}

export const csrfField = (token: string) => html`<input type="hidden" name=${CSRF_FIELD} value=${token} />`;

/** "23 Nov 2026, 14:05" in `timeZone`, inside <time> with the exact instant. */
export function timeOf(at: Date | null, timeZone: string): JSXNode | string {
  if (at === null) return "–";
  const text = new Intl.DateTimeFormat("en-GB", { timeZone, day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" }).format(at);
  return html`<time datetime=${at.toISOString()}>${text}</time>`;
}

const STATUS_TONE: Record<string, "ok" | "warn" | "bad" | ""> = {
  DELIVERED: "ok",
  CANCELLED: "bad",
  CANCELLED_BY_CUSTOMER: "bad",
  RETURNED_TO_SELLER: "warn",
  placed: "ok",
  external: "",
  pending: "warn",
  unconfirmed: "bad",
  failed: "bad",
  succeeded: "ok",
  delivered: "ok",
};

/**
 * `text` with a line-break opportunity (<wbr>) after each "_", so a long status word such as
 * CUSTOMER_DOOR_STEP wraps between its parts on a phone instead of widening its table.
 */
export function breakable(text: string): Child {
  const parts = text.split(/(?<=_)/);
  return parts.length === 1 ? text : parts.flatMap((part, i) => (i === 0 ? [part] : [html`<wbr />`, part]));
}

/**
 * Text that comes from outside (a rider's name, an order id, the provider's words), set
 * apart for the bidirectional algorithm: its direction is its own (<bdi> is dir="auto"),
 * and it cannot reorder what stands beside it. Without it, an Urdu or Arabic rider name
 * pulled the contact after it into its right-to-left run: "+91 98765 43210" showed as
 * "43210 98765 91+".
 */
export const bidi = (text: string | null | undefined): Child => (text === null || text === undefined || text === "" ? (text ?? null) : html`<bdi>${text}</bdi>`);

/** A status word in a coloured badge (the word itself carries the meaning). */
export const badge = (word: string | null) => (word === null ? "–" : html`<span class=${`badge ${STATUS_TONE[word] ?? ""}`.trim()}>${breakable(word)}</span>`);

/** An error box naming what went wrong; `id` when a field's aria-describedby names it (fieldError). */
export const errorBox = (message: string, id?: string) => html`<p id=${id} class="error" role="alert">${message}</p>`;

/** The id of a form's error box, for the field it is about. */
export const FIELD_ERROR_ID = "field-error";

/**
 * The attributes of a form field a refused post was about: it is marked invalid, described
 * by the error box (errorBox(message, FIELD_ERROR_ID)), and takes the focus as the page
 * loads, with no script. Nothing for any other field.
 */
export const fieldError = (invalid: boolean): Record<string, string | boolean> =>
  invalid ? { "aria-invalid": "true", "aria-describedby": FIELD_ERROR_ID, autofocus: true } : {};
export const noticeBox = (message: string) => html`<p class="notice" role="status">${message}</p>`;
