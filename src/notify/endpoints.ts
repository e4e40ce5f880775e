/**
 * The `notification_endpoints` table's one owner: where notifications go, which types each
 * wants, and its signing secrets (a rotated-out secret keeps signing for 24 hours).
 */
import type { Tx } from "../db/client.ts";
import type { notificationEndpoints } from "../db/schema/index.ts";
import { DomainError } from "../domain/errors.ts";
import { newEndpointId, newSecret } from "./sign.ts";
import type { NotificationType } from "./types.ts";
import { ForbiddenUrlError, checkEndpointUrl } from "./url-guard.ts";
import { headOf } from "../domain/text.ts";

export type EndpointRow = typeof notificationEndpoints.$inferSelect;

/** How long a rotated-out secret keeps signing. */
export const PREVIOUS_SECRET_HOURS = 24;

/**
 * The URL as an endpoint may have it, or DomainError `endpoint_url_forbidden` naming the
 * reason (loopback, private, link-local and metadata addresses unless `allowPrivate`).
 */
export async function checkUrl(raw: string, options: { allowPrivate: boolean }): Promise<string> {
  try {
    await checkEndpointUrl(raw, options);
  } catch (err) {
    if (err instanceof ForbiddenUrlError) throw new DomainError("endpoint_url_forbidden", err.reason);
    throw err;
  }
  return raw;
}

/** A new endpoint with a fresh id and secret. The URL must have passed `checkUrl`. */
export async function createEndpoint(
  sql: Tx,
  e: { url: string; events: readonly NotificationType[]; description: string | null },
): Promise<EndpointRow> {
  const [row] = await sql<EndpointRow[]>`
    insert into notification_endpoints (id, url, events, description, secret)
    values (${newEndpointId()}, ${e.url}, ${e.events as string[]}::text[], ${e.description}, ${newSecret()})
    returning *`;
  return row!;
}

/** Every endpoint, oldest first. */
export async function listEndpoints(sql: Tx): Promise<EndpointRow[]> {
  return await sql<EndpointRow[]>`select * from notification_endpoints order by created_at, id`;
}

export async function getEndpoint(sql: Tx, id: string): Promise<EndpointRow | undefined> {
  const [row] = await sql<EndpointRow[]>`select * from notification_endpoints where id = ${id}`;
  return row;
}

/** The endpoint, or DomainError `notification_endpoint_not_found`. */
export async function requireEndpoint(sql: Tx, id: string): Promise<EndpointRow> {
  const row = await getEndpoint(sql, id);
  if (!row) throw notFound(id);
  return row;
}

/** What a PATCH may change; absent fields stay. A url must have passed `checkUrl`. */
export interface EndpointPatch {
  url?: string | undefined;
  events?: readonly NotificationType[] | undefined;
  description?: string | null | undefined;
  enabled?: boolean | undefined;
}

/** Changes the given fields. Enabling (by hand) clears the reason tracklane disabled it for. */
export async function updateEndpoint(sql: Tx, id: string, patch: EndpointPatch): Promise<EndpointRow> {
  const sets = [
    patch.url !== undefined ? sql`url = ${patch.url}` : null,
    patch.events !== undefined ? sql`events = ${patch.events as string[]}::text[]` : null,
    patch.description !== undefined ? sql`description = ${patch.description}` : null,
    patch.enabled !== undefined ? sql`enabled = ${patch.enabled}, disabled_reason = null` : null,
  ].filter((s) => s !== null);
  const [row] = await sql<EndpointRow[]>`
    update notification_endpoints set
      ${sets.reduce((all, s) => sql`${all} ${s},`, sql``)}
      updated_at = now()
    where id = ${id}
    returning *`;
  if (!row) throw notFound(id);
  return row;
}

/** Deletes the endpoint with its deliveries (and their attempts). */
export async function deleteEndpoint(sql: Tx, id: string): Promise<void> {
  const deleted = await sql`delete from notification_endpoints where id = ${id}`;
  if (deleted.count === 0) throw notFound(id);
}

/** The endpoint's current signing secret. */
export async function endpointSecret(sql: Tx, id: string): Promise<string> {
  return (await requireEndpoint(sql, id)).secret;
}

/** A new secret; the old one keeps signing for PREVIOUS_SECRET_HOURS. Returns the new one. */
export async function rotateSecret(sql: Tx, id: string): Promise<string> {
  const [row] = await sql<Pick<EndpointRow, "secret">[]>`
    update notification_endpoints set
      previous_secret = secret,
      previous_secret_until = now() + make_interval(hours => ${PREVIOUS_SECRET_HOURS}),
      secret = ${newSecret()},
      updated_at = now()
    where id = ${id}
    returning secret`;
  if (!row) throw notFound(id);
  return row.secret;
}

/** The secrets a message sent at `now` is signed with: the current one, and the previous one while it lasts. */
export function signingSecrets(row: Pick<EndpointRow, "secret" | "previous_secret" | "previous_secret_until">, now: Date): string[] {
  const previous = row.previous_secret !== null && row.previous_secret_until !== null && row.previous_secret_until.getTime() > now.getTime();
  return previous ? [row.secret, row.previous_secret!] : [row.secret];
}

/**
 * Turned off by tracklane (e.g. its receiver answered 410), with the reason shown on the
 * endpoint. With `url`, only while the endpoint still sends there: a 410 from the address
 * it had before a PATCH says nothing about the new one. True when it was turned off.
 */
export async function disableEndpoint(sql: Tx, id: string, reason: string, url?: string): Promise<boolean> {
  const rows = await sql`
    update notification_endpoints set enabled = false, disabled_reason = ${reason}, updated_at = now()
    where id = ${id} ${url === undefined ? sql`` : sql`and url = ${url}`}`;
  return rows.count > 0;
}

/** How many endpoints are enabled and disabled, for /metrics. */
export async function endpointCounts(sql: Tx): Promise<{ enabled: number; disabled: number }> {
  const [row] = await sql<{ enabled: number; disabled: number }[]>`
    select count(*) filter (where enabled)::int as enabled, count(*) filter (where not enabled)::int as disabled from notification_endpoints`;
  return { enabled: row?.enabled ?? 0, disabled: row?.disabled ?? 0 };
}

/** Every enabled endpoint's id and types: what the outbox needs to know who listens. */
export async function enabledEndpoints(tx: Tx): Promise<Pick<EndpointRow, "id" | "events">[]> {
  return await tx<Pick<EndpointRow, "id" | "events">[]>`select id, events from notification_endpoints where enabled order by id`;
}

function notFound(id: string): DomainError {
  return new DomainError("notification_endpoint_not_found", `no notification endpoint ${headOf(id, 64)}`);
}
