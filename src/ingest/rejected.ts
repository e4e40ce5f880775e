/**
 * The `rejected_callbacks` table's one owner: callbacks that passed the secret check but
 * could not be stored as events, kept (cut to REJECTED_BODY_MAX) for diagnosis.
 */
import type { Tx } from "../db/client.ts";
import { pageOf } from "../db/page.ts";
import type { rejectedCallbacks } from "../db/schema/index.ts";
import { headOf } from "../domain/text.ts";

export type RejectedRow = typeof rejectedCallbacks.$inferSelect;

/** Rejected bodies are kept for diagnosis, cut to this many characters. */
export const REJECTED_BODY_MAX = 16 * 1024;

export async function recordRejected(
  sql: Tx,
  r: { reason: string; contentType: string | null; text: string; bytes: number },
): Promise<void> {
  await sql`
    insert into rejected_callbacks (reason, content_type, body, body_bytes, truncated)
    values (${r.reason}, ${r.contentType === null ? null : headOf(r.contentType, 200)}, ${headOf(r.text, REJECTED_BODY_MAX)}, ${r.bytes},
            ${r.text.length > REJECTED_BODY_MAX})`;
}

/** Newest first, keyset pages by id. */
export async function listRejected(sql: Tx, page: { limit: number; beforeId?: number | undefined }): Promise<{ rows: RejectedRow[]; nextId: number | null }> {
  const rows = await sql<RejectedRow[]>`
    select * from rejected_callbacks
    ${page.beforeId !== undefined ? sql`where id < ${page.beforeId}` : sql``}
    order by id desc
    limit ${page.limit + 1}`;
  return pageOf(rows, page.limit);
}

/** A rejected callback as a list shows it: its body cut to an excerpt. */
export type RejectedSummary = Pick<RejectedRow, "id" | "received_at" | "reason" | "content_type" | "body_bytes"> & {
  excerpt: string;
  /** The body goes on after the excerpt. */
  cut: boolean;
};

/**
 * Rejected callbacks after `afterId` (the console's "seen" mark): how many, counting no
 * further than `cap`, and the newest `limit` with the first `excerptChars` characters of
 * their bodies. Both are range scans of the primary key from the mark.
 */
export async function rejectedSince(
  sql: Tx,
  afterId: number,
  o: { limit: number; cap: number; excerptChars: number },
): Promise<{ count: number; rows: RejectedSummary[] }> {
  const [counted, rows] = await Promise.all([
    sql<{ n: number }[]>`select count(*)::int as n from (select 1 from rejected_callbacks where id > ${afterId} limit ${o.cap}) s`,
    sql<RejectedSummary[]>`
      select id, received_at, reason, content_type, body_bytes, left(body, ${o.excerptChars}) as excerpt,
             length(body) > ${o.excerptChars} or truncated as cut
      from rejected_callbacks where id > ${afterId}
      order by id desc
      limit ${o.limit}`,
  ]);
  return { count: counted[0]?.n ?? 0, rows };
}

/** The newest rejected callback's id; 0 when there is none. */
export async function lastRejectedId(sql: Tx): Promise<number> {
  const [row] = await sql<{ id: number | null }[]>`select max(id) as id from rejected_callbacks`;
  return row?.id ?? 0;
}

/** Retention: up to `batch` rejected callbacks received before `before`, oldest first (received_at's index); how many went. */
export async function purgeRejected(sql: Tx, before: Date, batch: number): Promise<number> {
  const rows = await sql`
    delete from rejected_callbacks where id in (
      select id from rejected_callbacks where received_at < ${before} order by received_at limit ${batch})`;
  return rows.count;
}
