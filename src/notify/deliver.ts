/**
 * Delivering one endpoint's due messages: a few at a time (one run per endpoint, its own
 * graphile-worker queue, so a slow receiver holds one worker slot, not all), each signed
 * as Standard Webhooks, its outcome recorded; then a run is scheduled for the next retry.
 */
import type { Sql } from "postgres";
import type { Logger } from "../logger.ts";
import type { Metrics } from "../metrics.ts";
import { claimDue, enqueueDelivery, failPending, nextDue, recordAttempt } from "./deliveries.ts";
import type { Claimed } from "./deliveries.ts";
import { disableEndpoint, getEndpoint, signingSecrets } from "./endpoints.ts";
import type { EndpointRow } from "./endpoints.ts";
import { sendWebhook } from "./send.ts";
import { webhookHeaders } from "./sign.ts";

/** Deliveries in flight at once per endpoint. */
export const PER_ENDPOINT = 4;

export interface DeliverDeps {
  sql: Sql;
  log: Logger;
  metrics: Metrics;
  settings: { timeoutMs: number; retryScheduleS: readonly number[]; allowPrivateUrls: boolean };
}

/** Sends everything due for the endpoint, until nothing is; schedules the next retry's run. */
export async function deliverDue(deps: DeliverDeps, endpointId: string): Promise<void> {
  const leaseMs = deps.settings.timeoutMs + 30_000;
  for (;;) {
    const endpoint = await getEndpoint(deps.sql, endpointId);
    if (!endpoint) return; // deleted: its deliveries went with it
    if (!endpoint.enabled) {
      await failPending(deps.sql, endpointId, `endpoint disabled${endpoint.disabled_reason ? `: ${endpoint.disabled_reason}` : ""}`);
      return;
    }
    const batch = await claimDue(deps.sql, endpointId, PER_ENDPOINT, leaseMs);
    if (batch.length === 0) break;
    const outcomes = await Promise.all(batch.map((d) => attempt(deps, endpoint, d)));
    if (outcomes.includes("gone")) return;
  }
  const next = await nextDue(deps.sql, endpointId);
  if (next !== null) await enqueueDelivery(deps.sql, endpointId, next);
}

async function attempt(deps: DeliverDeps, endpoint: EndpointRow, d: Claimed): Promise<"delivered" | "gone" | "failed"> {
  const timestampS = Math.floor(Date.now() / 1000);
  const result = await sendWebhook({
    url: endpoint.url,
    headers: webhookHeaders(signingSecrets(endpoint, new Date()), d.message_id, timestampS, d.body),
    body: d.body,
    timeoutMs: deps.settings.timeoutMs,
    allowPrivate: deps.settings.allowPrivateUrls,
  });
  const record = { statusCode: result.statusCode, durationMs: result.durationMs, responseExcerpt: result.responseExcerpt, error: result.error };
  const log = deps.log.child({ endpointId: endpoint.id, messageId: d.message_id, type: d.type });
  deps.metrics.notifyAttempts.inc({ outcome: result.outcome });
  if (result.outcome === "delivered") {
    await recordAttempt(deps.sql, d.id, record, { state: "delivered" });
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "delivered" });
    deps.metrics.notifyLag.observe(Math.max(0, Date.now() - d.created_at.getTime()) / 1000);
    return "delivered";
  }
  if (result.outcome === "gone") {
    await recordAttempt(deps.sql, d.id, record, { state: "failed" });
    await disableEndpoint(deps.sql, endpoint.id, `410 Gone at ${new Date().toISOString()}`);
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "gone" });
    // The URL is not logged: receivers often carry a token in it.
    log.warn("notification endpoint answered 410 Gone: disabled");
    return "gone";
  }
  const attempts = d.attempts + 1;
  const delay = deps.settings.retryScheduleS[attempts];
  if (delay === undefined) {
    await recordAttempt(deps.sql, d.id, record, { state: "failed" });
    deps.metrics.notifyMessages.inc({ type: d.type, outcome: "failed" });
    log.warn({ attempts, error: result.error, status: result.statusCode }, "notification failed for good");
  } else {
    await recordAttempt(deps.sql, d.id, record, { state: "pending", retryInS: delay });
    log.info({ attempts, retryInS: delay, error: result.error, status: result.statusCode }, "notification attempt failed; will retry");
  }
  return "failed";
}
