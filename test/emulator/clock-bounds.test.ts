import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, describe, it } from "node:test";
import { createEmulator } from "../../src/emulator/app.ts";
import { createCallbackDispatcher } from "../../src/emulator/callbacks.ts";
import { createClock } from "../../src/emulator/clock.ts";
import type { Clock } from "../../src/emulator/clock.ts";
import { createFaults } from "../../src/emulator/faults.ts";
import { emulatorStateFile } from "../../src/emulator/persist.ts";
import { createState } from "../../src/emulator/state.ts";
import { createLogger } from "../../src/logger.ts";
import { placeOrderBody, startCallbackReceiver, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";

/**
 * Times the emulator cannot write (beyond JavaScript's Date range) must never get in: not
 * through the clock, a re-attempt or a saved file; and nothing thrown while a callback is
 * delivered may end the process.
 */

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const YEAR_S = 365.25 * 86_400;

function errorsOf(body: Record<string, unknown>): Record<string, unknown> {
  return body["errors"] as Record<string, unknown>;
}

describe("the emulator's times stay writable", () => {
  it("refuses a clock step past 100 years ahead, naming the field; the emulator keeps answering", async () => {
    const pair = await startEmulatorPair();
    try {
      const ms = await pair.control.send("POST", "/clock/advance", { ms: 1e16 });
      assert.equal(ms.status, 400);
      assert.ok(errorsOf(ms.body)["ms"], JSON.stringify(ms.body));
      const seconds = await pair.control.send("POST", "/clock/advance", { seconds: 8.64e12 });
      assert.equal(seconds.status, 400);
      assert.ok(errorsOf(seconds.body)["seconds"], JSON.stringify(seconds.body));

      // Each step within the bound, the sum past it.
      assert.equal((await pair.control.send("POST", "/clock/advance", { seconds: 60 * YEAR_S })).status, 200);
      const second = await pair.control.send("POST", "/clock/advance", { seconds: 60 * YEAR_S });
      assert.equal(second.status, 400);
      assert.ok(errorsOf(second.body)["seconds"], JSON.stringify(second.body));
      assert.equal((await pair.control.get("/clock")).body["offset_ms"], 60 * YEAR_S * 1000);

      assert.equal((await pair.control.get("")).status, 200);
      const placed = await pair.client.placeOrder(placeOrderBody());
      assert.equal((await pair.control.order(placed.data.svc_order_id))["status"], "CREATED");
    } finally {
      await pair.close();
    }
  });

  it("refuses a re-attempt more than 100 years ahead, naming in_seconds; the order stays readable", async () => {
    const pair = await startEmulatorPair();
    try {
      const { data } = await pair.client.placeOrder(placeOrderBody());
      const res = await pair.control.send("POST", `/orders/${data.svc_order_id}/reattempt`, { in_seconds: 1e13 });
      assert.equal(res.status, 400);
      assert.ok(errorsOf(res.body)["in_seconds"], JSON.stringify(res.body));
      const order = await pair.control.order(data.svc_order_id);
      assert.equal(order["reattempt"], null);
      const ok = await pair.control.send("POST", `/orders/${data.svc_order_id}/reattempt`, { in_seconds: 99 * YEAR_S });
      assert.equal(ok.status, 200);
    } finally {
      await pair.close();
    }
  });

  it("sets aside a saved state whose clock offset or times are out of range", async () => {
    const damage: [string, (snapshot: Record<string, unknown>) => void][] = [
      ["clock offset", (s) => (s["clockOffsetMs"] = 1e16)],
      ["re-attempt time", (s) => ((s["orders"] as Record<string, unknown>[])[0]!["reattempt"] = { scheduledAt: 1e17, enabled: true })],
    ];
    for (const [what, damageIt] of damage) {
      const dataDir = mkdtempSync(join(tmpdir(), "tracklane-emu-bounds-"));
      dirs.push(dataDir);
      const first = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
      const placed = await first.app.request("/api/v2/stores/orders/", {
        method: "POST",
        headers: { authorization: `Token ${TEST_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(placeOrderBody()),
      });
      assert.equal(placed.status, 200);
      first.close();
      const file = emulatorStateFile(dataDir);
      const snapshot = JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
      damageIt(snapshot);
      writeFileSync(file, JSON.stringify(snapshot));

      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on("warning", onWarning);
      const second = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      process.off("warning", onWarning);
      try {
        assert.equal(second.state.orders.size, 0, what);
        assert.equal(second.clock.offsetMs(), 0, what);
        assert.ok(
          readdirSync(join(dataDir, "emulator")).some((f) => f.startsWith("state.json.bad-")),
          `${what}: set aside`,
        );
        assert.ok(warnings.some((w) => /set aside/.test(w)), warnings.join("\n"));
        assert.equal((await second.app.request("/__emulator/clock")).status, 200);
      } finally {
        second.close();
      }
    }
  });

  it("a callback delivery that throws inside the emulator is logged and given up; the queue goes on", async () => {
    const receiver = await startCallbackReceiver();
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    const logger = createLogger({ level: "warn", format: "json", destination: sink });
    const real = createClock();
    let broken = true;
    // As a clock beyond Date's range was before the bound: every time written throws.
    const clock: Clock = {
      ...real,
      iso: (at) => {
        if (broken) throw new RangeError("Invalid time value");
        return real.iso(at);
      },
    };
    const dispatcher = createCallbackDispatcher(
      createState([receiver.url]),
      clock,
      createFaults(1),
      { timeoutMs: 2000, retryDelaysMs: [], reorderHoldMs: 100 },
      logger,
      () => true,
    );
    try {
      dispatcher.enqueue("status", { order_status: "ALLOTTED" }, "ALLOTTED");
      const settled = await Promise.race([
        dispatcher.idle().then(() => "idle"),
        new Promise((r) => setTimeout(() => r("stuck"), 3000)),
      ]);
      assert.equal(settled, "idle");
      assert.ok(lines.some((l) => /given up/.test(l) && /Invalid time value/.test(l)), lines.join("\n"));

      broken = false;
      dispatcher.enqueue("status", { order_status: "ARRIVED" }, "ARRIVED");
      await dispatcher.idle();
      assert.deepEqual(
        dispatcher.deliveries().map((d) => [d.payload["order_status"], d.status]),
        [["ARRIVED", 200]],
      );
    } finally {
      dispatcher.close();
      await receiver.close();
    }
  });
});
