/**
 * A property of the outbox on real PostgreSQL (fast-check): whatever set of status events
 * one order gets (random statuses, provider aliases and unknown ones, times that tie,
 * duplicates), delivered in any order and in any batching (callbacks, then the jobs, in
 * random chunks), its order.status_changed messages form one chain: sequences 1..n in the
 * order they were written, each previous_status the status of the message before (null
 * for the first), each status different from its previous_status, and the last one's
 * status the order's final status.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { createTestApp, shuffle } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver, verify } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

/** Provider statuses: canonical ones, aliases of them, one unknown. */
const STATUSES = [
  "CREATED",
  "ACCEPTED",
  "ALLOTTED",
  "ALLOTED",
  "ARRIVED",
  "COLLECTED",
  "DISPATCHED",
  "CUSTOMER_DOOR_STEP",
  "DELIVERED",
  "CANCELLED",
  "Cancelled",
  "CANCELLED_BY_CUSTOMER",
  "RTS_INITIATED",
  "RETURNED_TO_SELLER",
  "PICKED",
];
/** Four instants a minute apart: generated events often share a time. */
const TIMES = [0, 1, 2, 3].map((m) => new Date(Date.UTC(2026, 10, 23, 9, m, 0)).toISOString());

interface Body {
  type: string;
  data: { sequence: number; previous_status: string | null; order: { client_order_id: string; status: string | null } };
}

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

describe("order.status_changed messages of one order (property)", () => {
  let t: TestApp;
  let receiver: Receiver;
  let secret: string;
  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0,0,0", NOTIFY_TIMEOUT_MS: "1000" });
    receiver = await startReceiver();
    const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: receiver.url, events: ["order.status_changed"] } });
    assert.equal(res.status, 201);
    secret = (await json<{ secret: string }>(res)).secret;
  });
  after(async () => {
    await receiver.close();
    await t.close();
  });

  it("any events, any order, any batching: one chain of sequences and statuses ending at the order's status", async () => {
    let run = 0;
    let messagesSeen = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ status: fc.constantFrom(...STATUSES), time: fc.integer({ min: 0, max: TIMES.length - 1 }) }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.nat(), { maxLength: 3 }),
        fc.integer({ min: 1, max: 2 ** 31 - 1 }),
        fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 6 }),
        async (events, duplicates, seed, chunkSizes) => {
          run++;
          const coid = `PROP-${run}`;
          const svc = String(990_000 + run);
          const bodies = events.map((e) => ({ client_order_id: coid, svc_order_id: svc, order_status: e.status, timestamp: TIMES[e.time]! }));
          for (const d of duplicates) bodies.push({ ...bodies[d % events.length]! });
          shuffle(bodies, seed);

          // Chunks of the given sizes (cycled): each chunk's callbacks at once, then the jobs.
          for (let i = 0, c = 0; i < bodies.length; c++) {
            const size = chunkSizes[c % chunkSizes.length]!;
            const chunk = bodies.slice(i, i + size);
            i += size;
            const answers = await Promise.all(chunk.map((b) => t.callback(b)));
            assert.deepEqual(answers.map((a) => a.status), chunk.map(() => 200));
            await t.runJobs();
          }

          const items = (await json<{ items: { id: string; type: string }[] }>(await t.request(`/v1/notifications/messages?order=${coid}&limit=500`))).items;
          assert.ok(items.every((i) => i.type === "order.status_changed"));
          // Message ids are time-ordered: sorted, they are in the order the messages were written.
          const ids = items.map((i) => i.id).sort();
          const written: Body[] = [];
          for (const id of ids) written.push((await json<{ body: Body }>(await t.request(`/v1/notifications/messages/${id}`))).body);

          const res = await t.request(`/v1/orders/${coid}`);
          const finalStatus = res.status === 404 ? null : (await json<{ status: string | null }>(res)).status;
          const chain = written.map((m) => [m.data.sequence, m.data.previous_status, m.data.order.status]);
          const why = `events ${JSON.stringify(bodies.map((b) => [b.order_status, b.timestamp.slice(11, 16)]))}; messages ${JSON.stringify(chain)}; final ${finalStatus}`;
          written.forEach((m, i) => {
            assert.equal(m.data.order.client_order_id, coid);
            assert.equal(m.data.sequence, i + 1, `sequences 1..n in the order written: ${why}`);
            assert.equal(m.data.previous_status, i === 0 ? null : written[i - 1]!.data.order.status, `previous_status is the status before: ${why}`);
            assert.notEqual(m.data.order.status, m.data.previous_status, `a status change changes the status: ${why}`);
          });
          assert.equal(written.at(-1)?.data.order.status ?? null, finalStatus, `the last message has the order's final status: ${why}`);

          // And the receiver got each of them, verified, exactly as written.
          const received = new Map(receiver.received.map((r) => [String(r.headers["webhook-id"]), r]));
          ids.forEach((id, i) => {
            const r = received.get(id);
            assert.ok(r, `${id} received`);
            assert.deepEqual(verify(secret, r), written[i]);
          });
          messagesSeen += written.length;
        },
      ),
      { numRuns: 25 },
    );
    assert.ok(messagesSeen > 25, `the runs wrote messages (${messagesSeen})`);
  });
});
