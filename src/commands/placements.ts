/**
 * The one statement that settles a placement's place commands once the provider is known
 * to have the order (an event named it, or a person confirmed it): every failed `place`
 * of those orders did reach it after all, so each ends `succeeded` with `message` and the
 * order's ids. Runs in the caller's transaction, after the order row holds the id.
 */
import type { Sql, TransactionSql } from "postgres";

export async function succeedFailedPlaces(tx: Sql | TransactionSql, orderIds: readonly number[], message: string): Promise<void> {
  if (orderIds.length === 0) return;
  await tx`
    update commands c set state = 'succeeded', last_error = null, completed_at = now(), updated_at = now(),
      response = jsonb_build_object('message', ${message}::text,
        'data', jsonb_build_object('svc_order_id', o.svc_order_id, 'track_url', o.track_url))
    from orders o
    where o.id = c.order_id and c.order_id = any(${orderIds}::bigint[])
      and c.kind = 'place' and c.state = 'failed'`;
}
