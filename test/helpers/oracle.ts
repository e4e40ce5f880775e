/**
 * The projection's oracle: the whole event log, grouped into orders by the identifiers
 * events share (union-find), folded in full by the pure domain code. Order rows must
 * equal it, column by column and in their stored fold state, however the rows were built
 * (merged event by event, derived in full, rebuilt, under crashes and concurrency).
 */
import assert from "node:assert/strict";
import type { Sql } from "postgres";
import { isJsonObject } from "../../src/domain/normalise.ts";
import { fold, foldState } from "../../src/domain/projection.ts";
import type { Projection, StoredEvent } from "../../src/domain/projection.ts";
import { toStored } from "../../src/projection/project.ts";
import { decodeState } from "../../src/projection/state.ts";

/** The order-row columns a projection sets (identifiers aside). */
export function projectedColumns(p: Projection) {
  return {
    status: p.status,
    provider_status: p.providerStatus,
    status_at: p.statusAt,
    track_url: p.trackUrl,
    rider_id: p.rider?.id ?? null,
    rider_name: p.rider?.name ?? null,
    rider_contact: p.rider?.contact ?? null,
    rider_latitude: p.rider?.latitude ?? null,
    rider_longitude: p.rider?.longitude ?? null,
    rider_location_at: p.rider?.locationAt ?? null,
    event_count: p.eventCount,
    last_event_at: p.lastEventAt,
  };
}

/** Every event in the log, grouped by order (events sharing an identifier, transitively). */
export async function ordersOfLog(sql: Sql): Promise<StoredEvent[][]> {
  const rows = await sql<{ id: number; dedupe_key: string; kind: string; svc_order_id: string | null; client_order_id: string | null; provider_status: string | null; occurred_at: Date; received_at: Date; payload: unknown }[]>`
    select id, dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, received_at, payload
    from order_events order by id`;
  const parent = new Map<string, string>();
  const find = (k: string): string => {
    let root = k;
    while ((parent.get(root) ?? root) !== root) root = parent.get(root)!;
    parent.set(k, root);
    return root;
  };
  const keysOf = (svc: string | null, coid: string | null) => [svc === null ? null : `s:${svc}`, coid === null ? null : `c:${coid}`].filter((k): k is string => k !== null);
  for (const r of rows) {
    const [a, b] = keysOf(r.svc_order_id, r.client_order_id);
    if (b !== undefined && find(a!) !== find(b)) parent.set(find(a!), find(b));
  }
  const orders = new Map<string, StoredEvent[]>();
  for (const r of rows) {
    const root = find(keysOf(r.svc_order_id, r.client_order_id)[0]!);
    const list = orders.get(root) ?? [];
    list.push(toStored(r, isJsonObject(r.payload) ? r.payload : {}));
    orders.set(root, list);
  }
  return [...orders.values()];
}

/**
 * Every order row equals the fold of its order's events in the log: its projected columns
 * and its stored state (exactly foldState of those events). One row per order of the log;
 * rows without events (placed through tracklane, not yet heard of) are not checked.
 * Answers the number of orders checked.
 */
export async function assertOrdersEqualLog(sql: Sql): Promise<number> {
  const orders = await ordersOfLog(sql);
  const rows = await sql<{ id: string; svc_order_id: string | null; svc_order_ids: string[]; client_order_id: string | null; status: string | null; provider_status: string | null; status_at: Date | null; track_url: string | null; rider_id: string | null; rider_name: string | null; rider_contact: string | null; rider_latitude: number | null; rider_longitude: number | null; rider_location_at: Date | null; event_count: number; last_event_at: Date | null; projection_state: string | null }[]>`
    select id::text, svc_order_id, svc_order_ids, client_order_id, status, provider_status, status_at, track_url, rider_id, rider_name,
           rider_contact, rider_latitude, rider_longitude, rider_location_at, event_count, last_event_at, projection_state
    from orders`;
  const problems: string[] = [];
  for (const events of orders) {
    const mine = rows.filter((r) => events.some((e) => (e.svcOrderId !== null && e.svcOrderId === r.svc_order_id) || (e.clientOrderId !== null && e.clientOrderId === r.client_order_id)));
    const label = JSON.stringify([events[0]!.svcOrderId, events[0]!.clientOrderId]);
    if (mine.length !== 1) {
      problems.push(`order ${label}: ${mine.length} rows`);
      continue;
    }
    const row = mine[0]!;
    const p = fold(events);
    const expected = {
      ...projectedColumns(p),
      svc_order_id: p.svcOrderId ?? row.svc_order_id,
      svc_order_ids: p.svcOrderIds,
      client_order_id: p.clientOrderId ?? row.client_order_id,
    };
    const { id: _id, projection_state: stored, ...columns } = row;
    try {
      assert.deepStrictEqual({ ...columns }, expected);
      assert.deepStrictEqual(decodeState(stored), foldState(events));
    } catch (err) {
      problems.push(`order ${label}: ${(err as Error).message.split("\n").slice(0, 30).join("\n")}`);
    }
  }
  assert.deepEqual(problems.slice(0, 5), [], `${problems.length} of ${orders.length} orders differ from the log`);
  return orders.length;
}
