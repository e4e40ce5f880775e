import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import { ProviderError } from "../../src/provider/errors.ts";
import { AWB_NUMBER_PATTERN } from "../../src/provider/schemas.ts";
import { startEmulatorPair, TEST_CLIENT, TEST_TOKEN } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

async function withPair(fn: (pair: EmulatorPair) => Promise<void>, options: Parameters<typeof startEmulatorPair>[0] = {}): Promise<void> {
  const pair = await startEmulatorPair(options);
  try {
    await fn(pair);
  } finally {
    await pair.close();
  }
}

async function rawPost(pair: EmulatorPair, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${pair.url}${path}`, {
    method: "POST",
    headers: { authorization: `Token ${TEST_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("AWB pool replenishment", () => {
  it("returns issued-but-unused numbers first and mints only the remainder", () =>
    withPair(async (pair) => {
      const first = (await pair.client.generatePoolAwbs(5)).awb_numbers;
      assert.equal(new Set(first).size, 5);
      for (const n of first) assert.match(n, AWB_NUMBER_PATTERN);
      assert.ok(first.every((n) => n.endsWith("TST")));

      const again = (await pair.client.generatePoolAwbs(5)).awb_numbers;
      assert.deepEqual(again, first, "the same unused numbers come back");

      const more = (await pair.client.generatePoolAwbs(8)).awb_numbers;
      assert.deepEqual(more.slice(0, 5), first);
      const minted = more.slice(5);
      assert.equal(minted.filter((n) => first.includes(n)).length, 0);

      const marked = await pair.control.send<{ marked: number; unknown: string[] }>("POST", "/awb/used", {
        awb_numbers: [first[0], first[1], "SF0000000000XXX"],
      });
      assert.deepEqual(marked.body, { marked: 2, unknown: ["SF0000000000XXX"] });

      const after = (await pair.client.generatePoolAwbs(4)).awb_numbers;
      assert.deepEqual(after, [first[2], first[3], first[4], minted[0]], "used numbers never return");
    }));

  it("keeps one pool per client", () =>
    withPair(
      async (pair) => {
        const byToken = (await pair.client.generatePoolAwbs(3)).awb_numbers;
        const oauth = createProviderClient({ baseUrl: pair.url, auth: { method: "oauth", ...TEST_CLIENT, product: "exchange" } });
        const byClient = (await oauth.generatePoolAwbs(3)).awb_numbers;
        assert.equal(byClient.filter((n) => byToken.includes(n)).length, 0);
      },
      { product: "exchange", auth: "token" },
    ));

  it("enforces 1..100000 with a 400 naming count", () =>
    withPair(async (pair) => {
      for (const count of [100_001, 0, 1.5]) {
        const res = await rawPost(pair, "/v3/clients/generate_marketplace_awb/", { count });
        assert.equal(res.status, 400, `count ${count}`);
        assert.ok((res.body["errors"] as Record<string, unknown>)["count"]);
      }
      const empty = await rawPost(pair, "/v3/clients/generate_marketplace_awb/", {});
      assert.equal((empty.body["awb_numbers"] as string[]).length, 10, "default count 10");
      await assert.rejects(pair.client.generatePoolAwbs(100_001), (e) => e instanceof ProviderError && e.kind === "invalid_request");
    }));
});

describe("fresh AWBs (async)", () => {
  it("PENDING with retry_flag until ready on the emulator clock, then SUCCESS with new numbers", () =>
    withPair(async (pair) => {
      const pooled = (await pair.client.generatePoolAwbs(5)).awb_numbers;
      const accepted = await pair.client.requestFreshAwbs({ awb_count: 50, request_type: "forward" });
      assert.equal(accepted.status, "PENDING");
      assert.equal(Number.isInteger(accepted.delay_time), true);

      const pending = await pair.client.pollFreshAwbs(accepted.request_id);
      assert.deepEqual({ status: pending.status, retry_flag: pending.retry_flag, awb_numbers: pending.awb_numbers }, {
        status: "PENDING",
        retry_flag: true,
        awb_numbers: [],
      });

      await pair.control.advanceClock(accepted.delay_time - 1);
      assert.equal((await pair.client.pollFreshAwbs(accepted.request_id)).retry_flag, true, "not a second early");
      await pair.control.advanceClock(1);
      const ready = await pair.client.pollFreshAwbs(accepted.request_id);
      assert.equal(ready.status, "SUCCESS");
      assert.equal(ready.retry_flag, false);
      assert.equal(ready.awb_numbers.length, 50);
      assert.equal(new Set(ready.awb_numbers).size, 50);
      for (const n of ready.awb_numbers) assert.match(n, AWB_NUMBER_PATTERN);
      assert.equal(ready.awb_numbers.filter((n) => pooled.includes(n)).length, 0, "fresh means fresh, whatever the pool holds");
      assert.deepEqual((await pair.client.pollFreshAwbs(accepted.request_id)).awb_numbers, ready.awb_numbers, "stable on re-poll");
    }));

  it("delay_time grows with request size and with queue depth", () =>
    withPair(async (pair) => {
      // Knobs from the helper: base 2 s, 1 s per started thousand, 2 s per pending request.
      const a = await pair.client.requestFreshAwbs({ awb_count: 1 });
      const b = await pair.client.requestFreshAwbs({ awb_count: 1 });
      assert.equal(a.delay_time, 3);
      assert.equal(b.delay_time, 5, "same size, one request ahead in the queue");
      await pair.control.advanceClock(10); // queue drained
      const big = await pair.client.requestFreshAwbs({ awb_count: 10_000 });
      assert.equal(big.delay_time, 12, "empty queue, ten thousand numbers");
      const queued = await pair.client.requestFreshAwbs({ awb_count: 10_000 });
      assert.ok(queued.delay_time > big.delay_time);
    }));

  it("defaults to 1000 numbers of request_type forward; limits enforced", () =>
    withPair(async (pair) => {
      const accepted = await pair.client.requestFreshAwbs();
      const requests = (await pair.control.get<{ requests: { count: number; request_type: string }[] }>("/awb")).body.requests;
      assert.deepEqual(
        requests.map((r) => [r.count, r.request_type]),
        [[1000, "forward"]],
      );
      await pair.control.advanceClock(accepted.delay_time);
      assert.equal((await pair.client.pollFreshAwbs(accepted.request_id)).awb_numbers.length, 1000);
      const tooMany = await rawPost(pair, "/v1/clients/awb/", { awb_count: 100_001 });
      assert.equal(tooMany.status, 400);
      assert.ok((tooMany.body["errors"] as Record<string, unknown>)["awb_count"]);
      const max = await rawPost(pair, "/v1/clients/awb/", { awb_count: 100_000 });
      assert.equal(max.status, 200);
      // request_type's values are not in the spec: any short text is taken, none is refused for its value.
      assert.equal((await pair.client.requestFreshAwbs({ awb_count: 1, request_type: "exchange" })).status, "PENDING");
      const empty = await rawPost(pair, "/v1/clients/awb/", { awb_count: 1, request_type: " " });
      assert.equal(empty.status, 400);
      assert.ok((empty.body["errors"] as Record<string, unknown>)["request_type"]);
    }));

  it("an unknown or someone else's request_id is 404", () =>
    withPair(
      async (pair) => {
        const accepted = await pair.client.requestFreshAwbs({ awb_count: 1 });
        await assert.rejects(pair.client.pollFreshAwbs("no-such-request"), (e) => e instanceof ProviderError && e.status === 404);
        const other = createProviderClient({ baseUrl: pair.url, auth: { method: "oauth", ...TEST_CLIENT, product: "exchange" } });
        await assert.rejects(other.pollFreshAwbs(accepted.request_id), (e) => e instanceof ProviderError && e.status === 404);
      },
      { product: "exchange" },
    ));

  it("numbers are never issued twice, also across a reset", () =>
    withPair(async (pair) => {
      const seen = new Set<string>();
      const add = (ns: string[]) => {
        for (const n of ns) {
          assert.ok(!seen.has(n), `${n} issued twice`);
          seen.add(n);
        }
      };
      add((await pair.client.generatePoolAwbs(20)).awb_numbers);
      pair.emulator.reset();
      add((await pair.client.generatePoolAwbs(20)).awb_numbers);
      const fresh = await pair.client.requestFreshAwbs({ awb_count: 20 });
      await pair.control.advanceClock(fresh.delay_time);
      add((await pair.client.pollFreshAwbs(fresh.request_id)).awb_numbers);
      assert.equal(seen.size, 60);
    }));
});
