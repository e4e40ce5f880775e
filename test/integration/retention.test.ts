/**
 * Housekeeping retention (docs/operations.md, "What is kept"): rejected callbacks, finished
 * commands and notification attempts older than their setting go, in batches; what is
 * younger, still pending, or a place command stays; 0 keeps everything. Rows are made old by
 * moving their times back in SQL (the test's own connection).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { firstMessageIdAt } from "../../src/notify/sign.ts";
import { purgeExpired } from "../../src/retention/purge.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const NOW = new Date("2026-11-23T12:00:00Z");
const daysAgo = (d: number) => new Date(NOW.getTime() - d * 86_400_000);

async function count(table: "rejected_callbacks" | "commands" | "notification_attempts" | "notification_messages" | "notification_deliveries"): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from ${t.database.sql(table)}`;
  return row!.n;
}

describe("retention", () => {
  it("removes what is past each retention, in batches, and keeps the young, the pending and every place command", async () => {
    const sql = t.database.sql;
    // 7 rejected callbacks: 5 of 40 days ago, 2 of 10 days ago.
    for (let i = 0; i < 7; i++) {
      await sql`insert into rejected_callbacks (received_at, reason, body, body_bytes) values (${daysAgo(i < 5 ? 40 : 10)}, 'invalid_json', '{', 1)`;
    }
    // An order with commands: old finished ones (cancel, dispatch_ready), an old finished place, an old pending one, a young finished one.
    const [order] = await sql<{ id: number }[]>`insert into orders (client_order_id) values ('RET-1') returning id`;
    const command = async (kind: string, state: string, completed: Date | null) =>
      await sql`
        insert into commands (order_id, kind, state, request, request_hash, completed_at, created_at)
        values (${order!.id}, ${kind}, ${state}, '{}', md5(random()::text), ${completed}, ${completed ?? daysAgo(100)})`;
    for (let i = 0; i < 3; i++) await command("cancel", "succeeded", daysAgo(100));
    await command("dispatch_ready", "failed", daysAgo(95));
    await command("place", "succeeded", daysAgo(200));
    await command("stop_reattempt", "pending", null);
    await command("cancel", "succeeded", daysAgo(5));
    // Attempts of one (young) message's delivery: 4 of 100 days ago, 1 of 1 day ago.
    const [endpoint] = await sql<{ id: string }[]>`
      insert into notification_endpoints (id, url, secret) values ('ep_RET', 'https://hooks.example.com/x', 'whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3') returning id`;
    const message = async (at: Date, suffix: string, status: string) => {
      const id = `${firstMessageIdAt(at).slice(0, -4)}${suffix}`;
      await sql`insert into notification_messages (id, type, body, created_at) values (${id}, 'test.ping', '{}', ${at})`;
      const [d] = await sql<{ id: number }[]>`
        insert into notification_deliveries (message_id, endpoint_id, status) values (${id}, ${endpoint!.id}, ${status}) returning id`;
      return d!.id;
    };
    const delivery = { id: await message(daysAgo(1), "YNG1", "delivered") };
    // Messages of 100 days ago: two delivered (one with an attempt), one failed, one still pending.
    const oldDelivery = await message(daysAgo(100), "OLD1", "delivered");
    await sql`insert into notification_attempts (delivery_id, at, duration_ms) values (${oldDelivery}, ${daysAgo(100)}, 9)`;
    await message(daysAgo(100), "OLD2", "delivered");
    await message(daysAgo(100), "OLD3", "failed");
    await message(daysAgo(100), "OLD4", "pending");
    for (let i = 0; i < 5; i++) {
      await sql`insert into notification_attempts (delivery_id, at, duration_ms) values (${delivery.id}, ${daysAgo(i < 4 ? 100 : 1)}, 12)`;
    }

    // Nothing goes with every retention at 0 (forever).
    const forever = { rejectedDays: 0, commandDays: 0, attemptDays: 0, messageDays: 0 };
    assert.deepEqual(await purgeExpired(sql, forever, NOW), { rejected: 0, commands: 0, attempts: 0, messages: 0 });
    assert.deepEqual([await count("rejected_callbacks"), await count("commands"), await count("notification_attempts"), await count("notification_messages")], [7, 7, 6, 5]);

    // Batches of 2: several rounds each.
    const days = { rejectedDays: 30, commandDays: 90, attemptDays: 90, messageDays: 90 };
    const purged = await purgeExpired(sql, days, NOW, 2);
    assert.deepEqual(purged, { rejected: 5, commands: 4, attempts: 5, messages: 3 });
    const left = await sql<{ kind: string; state: string }[]>`select kind, state from commands order by id`;
    assert.deepEqual(
      left.map((c) => `${c.kind}/${c.state}`),
      ["place/succeeded", "stop_reattempt/pending", "cancel/succeeded"],
      "the place, the pending and the young command stay",
    );
    assert.equal(await count("rejected_callbacks"), 2);
    assert.equal(await count("notification_attempts"), 1, "the young attempt stays");
    const messages = await sql<{ id: string }[]>`select id from notification_messages order by id`;
    assert.deepEqual(
      messages.map((m) => m.id.slice(-4)),
      ["OLD4", "YNG1"],
      "the pending old message and the young one stay",
    );
    assert.equal(await count("notification_deliveries"), 2);
    // Done: a second run finds nothing.
    assert.deepEqual(await purgeExpired(sql, days, NOW, 2), { rejected: 0, commands: 0, attempts: 0, messages: 0 });
  });

  it("the worker's retention__purge task runs it with the configured days", async () => {
    await t.database.sql`insert into rejected_callbacks (received_at, reason, body, body_bytes) values (now() - interval '31 days', 'invalid_json', '{', 1)`;
    const before = await count("rejected_callbacks");
    await t.database.sql`select graphile_worker.add_job('retention__purge', '{}'::json)`;
    await t.runJobs();
    assert.equal(await count("rejected_callbacks"), before - 1);
    assert.ok(t.logLines.some((l) => l.includes("retention: expired rows removed")));
  });
});
