/**
 * An order's notification `sequence` continues after retention purged every message of the
 * order (NOTIFY_MESSAGE_RETENTION_DAYS): a receiver that keeps the highest sequence it saw
 * would drop a message numbered from 1 again. Messages are made old by moving their ids and
 * times back in SQL (the test's own connection); the worker's retention__purge job purges.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { firstMessageIdAt } from "../../src/notify/sign.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver, verify as verified } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

describe("notification sequence after retention", () => {
  let t: TestApp;
  let receiver: Receiver;
  let secret: string;

  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0,0,0" });
    receiver = await startReceiver();
    const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: receiver.url, events: ["order.status_changed"] } });
    assert.equal(res.status, 201);
    secret = ((await res.json()) as { secret: string }).secret;
  });
  after(async () => {
    await receiver.close();
    await t.close();
  });

  const sequencesOf = (coid: string) =>
    receiver.received
      .map((r) => verified(secret, r))
      .filter((m) => m.data.order?.client_order_id === coid)
      .map((m) => m.data.sequence);

  async function status(body: Record<string, unknown>): Promise<void> {
    assert.equal((await t.callback(body)).status, 200);
    await t.runJobs();
  }

  /** Moves every message 100 days back (ids are time-ordered), with their deliveries. */
  async function age(): Promise<void> {
    const old = new Date(Date.now() - 100 * 86_400_000);
    const prefix = firstMessageIdAt(old).slice(0, -6);
    await t.database.sql.begin(async (tx) => {
      const rows = await tx<{ id: string }[]>`select id from notification_messages order by id`;
      for (const [i, { id }] of rows.entries()) {
        const aged = `${prefix}${String(i).padStart(6, "0")}`;
        await tx`update notification_messages set id = ${aged}, created_at = ${old} where id = ${id}`;
        await tx`update notification_deliveries set message_id = ${aged} where message_id = ${id}`;
      }
    });
  }

  async function purge(): Promise<void> {
    await t.database.sql`select graphile_worker.add_job('retention__purge', '{}'::json)`;
    await t.runJobs();
  }

  const messages = async () => (await t.database.sql<{ n: number }[]>`select count(*)::int as n from notification_messages`)[0]!.n;

  it("an order whose messages were all purged numbers its next one above the last it sent", async () => {
    await status({ client_order_id: "SEQ-1", svc_order_id: "95001", order_status: "ALLOTTED", timestamp: "2026-11-23T10:00:00Z" });
    await status({ client_order_id: "SEQ-1", svc_order_id: "95001", order_status: "ARRIVED", timestamp: "2026-11-23T10:05:00Z" });
    assert.deepEqual(sequencesOf("SEQ-1"), [1, 2]);

    await age();
    await purge();
    assert.equal(await messages(), 0, "retention purged them all");

    await status({ client_order_id: "SEQ-1", svc_order_id: "95001", order_status: "DISPATCHED", timestamp: "2026-11-23T10:10:00Z" });
    assert.deepEqual(sequencesOf("SEQ-1"), [1, 2, 3]);
  });

  it("rows that merge after their messages were purged continue above the higher of their last sequences", async () => {
    // Two rows of one order: the older known by the client's id (1 message), the newer by the provider's (3).
    await status({ client_order_id: "SEQ-2", order_status: "ALLOTTED", timestamp: "2026-11-23T10:00:00Z" });
    await status({ svc_order_id: "95002", order_status: "ALLOTTED", timestamp: "2026-11-23T10:00:00Z" });
    await status({ svc_order_id: "95002", order_status: "ARRIVED", timestamp: "2026-11-23T10:05:00Z" });
    await status({ svc_order_id: "95002", order_status: "DISPATCHED", timestamp: "2026-11-23T10:10:00Z" });
    const last = async (column: "client_order_id" | "svc_order_id", id: string) =>
      (await t.database.sql<{ n: number }[]>`select max(sequence)::int as n from notification_messages where ${t.database.sql(column)} = ${id}`)[0]!.n;
    assert.deepEqual([await last("client_order_id", "SEQ-2"), await last("svc_order_id", "95002")], [1, 3]);

    await age();
    await purge();
    assert.equal(await messages(), 0);

    // A callback names both ids: the newer row merges into the older, whose next message continues above 3.
    await status({ client_order_id: "SEQ-2", svc_order_id: "95002", order_status: "DELIVERED", timestamp: "2026-11-23T10:20:00Z" });
    assert.deepEqual(sequencesOf("SEQ-2"), [1, 4]);
  });
});
