/** The notifications' figures for /metrics, read at scrape time so every process reports the same. */
import type { Tx } from "../db/client.ts";
import { deliveryFigures } from "./deliveries.ts";
import { endpointCounts } from "./endpoints.ts";

export async function notificationFigures(sql: Tx): Promise<{ enabled: number; disabled: number; pending: number }> {
  const [endpoints, deliveries] = await Promise.all([endpointCounts(sql), deliveryFigures(sql)]);
  return { ...endpoints, pending: deliveries.pending };
}
