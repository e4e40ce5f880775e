/**
 * The group-commit path (src/ingest/batcher.ts) keeps PRODUCT.md §4's dedupe: identical
 * callbacks arriving together, inside one batch, in batches committing at the same time,
 * or in later batches, are stored once, and every copy is answered with the first copy's
 * event_id, exactly one of them with duplicate: false. Batching off (INGEST_BATCH_MAX=1)
 * keeps the same answers.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

interface Answer {
  status: number;
  body: { ok: boolean; event_id: string; duplicate: boolean };
}

const body = (n: number, extra: Record<string, unknown> = {}) => ({
  sfx_order_id: 61_000 + n,
  client_order_id: `IB-${n}`,
  rider_latitude: 12.9 + n / 1000,
  rider_longitude: 77.6,
  timestamp: "2026-11-22T10:00:00Z",
  ...extra,
});

async function send(t: TestApp, bodies: unknown[]): Promise<Answer[]> {
  return await Promise.all(
    bodies.map(async (b) => {
      const res = await t.callback(b);
      return { status: res.status, body: (await res.json()) as Answer["body"] };
    }),
  );
}

async function stored(t: TestApp, coid: string): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = ${coid}`;
  return row!.n;
}

/** Flushes so far and events in them, from the web's own batch-size histogram. */
async function flushes(t: TestApp): Promise<{ count: number; events: number }> {
  const metric = await t.metrics.ingestBatchSize.get();
  const value = (name: string) => metric.values.find((v) => v.metricName === name)?.value ?? 0;
  return { count: value("tracklane_ingest_batch_size_count"), events: value("tracklane_ingest_batch_size_sum") };
}

function assertOneEvent(answers: Answer[], copies: number): string {
  assert.equal(answers.length, copies);
  assert.ok(answers.every((a) => a.status === 200 && a.body.ok));
  const ids = new Set(answers.map((a) => a.body.event_id));
  assert.equal(ids.size, 1, `one event id for every copy, got ${[...ids].join(", ")}`);
  assert.equal(answers.filter((a) => !a.body.duplicate).length, 1, "exactly one copy is not a duplicate");
  return [...ids][0]!;
}

describe("ingest batching: duplicates inside one batch", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(async () => t.close());

  it("20 identical callbacks at once: one flush, one event stored, one id, one duplicate:false", async () => {
    const before = await flushes(t);
    const answers = await send(t, Array.from({ length: 20 }, () => body(1)));
    const after = await flushes(t);
    assertOneEvent(answers, 20);
    assert.equal(await stored(t, "IB-1"), 1);
    // They really shared a batch: one flush carried all 20.
    assert.deepEqual({ count: after.count - before.count, events: after.events - before.events }, { count: 1, events: 20 });
  });

  it("copies mixed with other events in one batch: each body stored once, the others untouched", async () => {
    const bodies = [body(2), body(3), body(2), body(4), body(2), body(3)];
    const answers = await send(t, bodies);
    for (const n of [2, 3, 4]) {
      const mine = answers.filter((_, i) => (bodies[i] as { client_order_id: string }).client_order_id === `IB-${n}`);
      assertOneEvent(mine, n === 2 ? 3 : n === 3 ? 2 : 1);
      assert.equal(await stored(t, `IB-${n}`), 1);
    }
  });

  it("the same event again in a later batch: duplicate:true with the first id, nothing stored", async () => {
    const [first] = await send(t, [body(5)]);
    const again = await send(t, Array.from({ length: 5 }, () => body(5)));
    assert.equal(first!.body.duplicate, false);
    for (const a of again) assert.deepEqual(a, { status: 200, body: { ok: true, event_id: first!.body.event_id, duplicate: true } });
    assert.equal(await stored(t, "IB-5"), 1);
  });

  it("keys in another order are the same event inside one batch too", async () => {
    const b = body(6, { rider_id: 7 });
    const reversed = Object.fromEntries(Object.entries(b).reverse());
    assertOneEvent(await send(t, [b, reversed, b, reversed]), 4);
    assert.equal(await stored(t, "IB-6"), 1);
  });
});

describe("ingest batching: duplicates across batches committing at the same time", () => {
  let t: TestApp;
  before(async () => {
    // Batches of 4, up to 4 flushes in flight: 16 copies arrive as 4 concurrent batches.
    t = await createTestApp({ INGEST_BATCH_MAX: "4", INGEST_BATCH_WAIT_MS: "5" });
  });
  after(async () => t.close());

  it("16 identical callbacks over concurrent flushes: one stored, one id, one duplicate:false", async () => {
    const before = await flushes(t);
    const answers = await send(t, Array.from({ length: 16 }, () => body(10)));
    const after = await flushes(t);
    assertOneEvent(answers, 16);
    assert.equal(await stored(t, "IB-10"), 1);
    assert.ok(after.count - before.count >= 4, `spread over ${after.count - before.count} flushes`);
  });

  it("many bodies, each sent several times, interleaved: each stored once", async () => {
    const bodies = Array.from({ length: 60 }, (_, i) => body(20 + (i % 12)));
    const answers = await send(t, bodies);
    for (let n = 20; n < 32; n++) {
      assertOneEvent(
        answers.filter((_, i) => 20 + (i % 12) === n),
        5,
      );
      assert.equal(await stored(t, `IB-${n}`), 1);
    }
  });
});

describe("ingest batching off (INGEST_BATCH_MAX=1): the same answers", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp({ INGEST_BATCH_MAX: "1" });
  });
  after(async () => t.close());

  it("concurrent identical callbacks, one transaction each: one stored, one id, one duplicate:false", async () => {
    const before = await flushes(t);
    assertOneEvent(await send(t, Array.from({ length: 12 }, () => body(40))), 12);
    const after = await flushes(t);
    assert.equal(await stored(t, "IB-40"), 1);
    assert.deepEqual({ count: after.count - before.count, events: after.events - before.events }, { count: 12, events: 12 });
  });
});
