/**
 * The `rejected_callbacks` table's one owner: callbacks that passed the secret check but
 * could not be stored as events, kept (cut to REJECTED_BODY_MAX) for diagnosis.
 */
import type { Tx } from "../db/client.ts";
import { pageOf } from "../db/page.ts";
import type { rejectedCallbacks } from "../db/schema/index.ts";

export type RejectedRow = typeof rejectedCallbacks.$inferSelect;

/** Rejected bodies are kept for diagnosis, cut to this many characters. */
export const REJECTED_BODY_MAX = 16 * 1024;

export async function recordRejected(
  sql: Tx,
  r: { reason: string; contentType: string | null; text: string; bytes: number },
): Promise<void> {
  await sql`
    insert into rejected_callbacks (reason, content_type, body, body_bytes, truncated)
    values (${r.reason}, ${r.contentType?.slice(0, 200) ?? null}, ${r.text.slice(0, REJECTED_BODY_MAX)}, ${r.bytes},
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
