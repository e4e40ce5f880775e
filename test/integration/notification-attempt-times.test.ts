/**
 * The attempt history shows when each attempt was made. A run sends a round of deliveries
 * PER_ENDPOINT at a time and records them together after the last one: each attempt keeps
 * its own time, and a delivery its delivered_at, instead of all taking the time of that
 * write. Real PostgreSQL, a receiver on loopback that answers each request after a delay.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { deliverDue, PER_ENDPOINT } from "../../src/notify/deliver.ts";
import type { DeliverDeps } from "../../src/notify/deliver.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

const ENDPOINTS = "/v1/notifications/endpoints";
/** How long the receiver takes to answer: each wave of PER_ENDPOINT sends takes this long. */
const ANSWER_MS = 500;
/** How far an attempt's recorded time may be from when the receiver got it (a loaded machine). */
const SLACK_MS = 200;

interface Detail {
  deliveries: { status: string; delivered_at: string | null }[];
  attempts: { at: string; duration_ms: number; status_code: number | null }[];
}

describe("notification attempt times", () => {
  let t: TestApp;
  let r: Receiver;

  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0" });
    r = await startReceiver({ otherwise: () => ({ status: 200, delayMs: ANSWER_MS }) });
  });
  after(async () => {
    await r.close();
    await t.close();
  });

  it("each attempt of a round is recorded at its own time, and each delivery delivered when its answer came", async () => {
    const res = await t.request(ENDPOINTS, { method: "POST", json: { url: r.url } });
    assert.equal(res.status, 201);
    const endpointId = ((await res.json()) as { id: string }).id;
    // Two waves in one round: the second is sent only once the first has been answered.
    const ids: string[] = [];
    for (let i = 0; i < 2 * PER_ENDPOINT; i++) {
      const ping = await t.request(`${ENDPOINTS}/${endpointId}/test`, { method: "POST" });
      assert.equal(ping.status, 202);
      ids.push(((await ping.json()) as { message_id: string }).message_id);
    }
    const deps: DeliverDeps = {
      sql: t.database.sql,
      log: t.log,
      metrics: t.metrics,
      settings: { timeoutMs: 5000, retryScheduleS: [0], allowPrivateUrls: true, burstEventsS: 0, burstMaxWaitS: 60 },
      load: { note: () => undefined, perSecond: () => 0 },
    };
    assert.equal(await deliverDue(deps, endpointId), 2 * PER_ENDPOINT);
    assert.equal(r.received.length, 2 * PER_ENDPOINT);

    const receivedAt = new Map(r.received.map((q) => [String(q.headers["webhook-id"]), q.at]));
    const times: number[] = [];
    for (const id of ids) {
      const detail = (await (await t.request(`/v1/notifications/messages/${id}`)).json()) as Detail;
      assert.equal(detail.attempts.length, 1);
      const attempt = detail.attempts[0]!;
      const at = Date.parse(attempt.at);
      const got = receivedAt.get(id)!;
      assert.ok(Math.abs(at - got) <= SLACK_MS, `${id}: attempt recorded at ${attempt.at}, received at ${new Date(got).toISOString()}`);
      const delivered = Date.parse(detail.deliveries[0]!.delivered_at!);
      assert.ok(Math.abs(delivered - (at + attempt.duration_ms)) <= 5, `${id}: delivered at ${detail.deliveries[0]!.delivered_at}, attempt ${attempt.at} + ${attempt.duration_ms} ms`);
      times.push(at);
    }
    // The two waves are half a second apart, not recorded as one instant.
    const sorted = [...times].sort((a, b) => a - b);
    assert.ok(sorted.at(-1)! - sorted[0]! >= ANSWER_MS - SLACK_MS, `attempt times ${sorted.map((x) => new Date(x).toISOString()).join(", ")}`);
  });
});
