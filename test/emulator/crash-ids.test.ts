import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createEmulator } from "../../src/emulator/app.ts";
import { emulatorIdsFile, emulatorStateFile } from "../../src/emulator/persist.ts";
import { placeOrderBody, TEST_TOKEN } from "../helpers/emulator.ts";
import { cleanupsAfterAll, startProcess } from "../helpers/process.ts";
import type { Proc } from "../helpers/process.ts";

/**
 * The snapshot follows a change by up to SAVE_DELAY_MS, an answer goes out at once: a
 * `kill -9` in between must not make the next run issue an answered id again.
 */

const cleanups = cleanupsAfterAll();
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-emu-crash-"));
  dirs.push(dir);
  return dir;
}

interface Running {
  proc: Proc;
  url: string;
}

/**
 * `npm run emulator` on DATA_DIR, as an operator runs it, on any free port: bound by the
 * emulator itself and read back from its "listening on" line (a port picked here and
 * released could be taken by another test file's process before the emulator listens).
 */
async function start(dataDir: string): Promise<Running> {
  const proc = startProcess("src/emulator/main.ts", { EMULATOR_PORT: "0", DATA_DIR: dataDir, LOG_LEVEL: "warn" });
  cleanups.push(async () => void (await proc.kill("SIGKILL")));
  const [, url] = await proc.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+) /, 30_000);
  return { proc, url: url! };
}

async function post(run: Running, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${run.url}${path}`, {
    method: "POST",
    headers: { authorization: "Token emulator-token", "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

async function placeId(run: Running): Promise<string> {
  const answer = await post(run, "/api/v2/stores/orders/", placeOrderBody());
  return String((answer["data"] as Record<string, unknown>)["svc_order_id"]);
}

async function poolAwbs(run: Running, count: number): Promise<string[]> {
  return (await post(run, "/v3/clients/generate_marketplace_awb/", { count }))["awb_numbers"] as string[];
}

describe("ids after a crash", () => {
  it("an order id and AWB numbers answered just before kill -9 are never issued again", async () => {
    const dataDir = tempDataDir();
    // A saved state to come back to: a clean stop writes it.
    const first = await start(dataDir);
    const a = await placeId(first);
    const [x] = await poolAwbs(first, 1);
    assert.equal(await first.proc.kill("SIGTERM"), 0);

    // Answered, then killed before the snapshot (SAVE_DELAY_MS later) could follow.
    const second = await start(dataDir);
    const b = await placeId(second);
    const [x2, y] = await poolAwbs(second, 2);
    await second.proc.kill("SIGKILL");
    assert.equal(x2, x, "the unused pool number comes first");
    assert.ok(y !== undefined);

    const third = await start(dataDir);
    const c = await placeId(third);
    const [, z] = await poolAwbs(third, 2);
    await third.proc.kill("SIGTERM");
    assert.notEqual(a, b);
    assert.notEqual(c, b, "an order id answered before the crash was issued again");
    assert.notEqual(c, a);
    assert.ok(z !== undefined);
    assert.notEqual(z, y, "an AWB number answered before the crash was issued again");
    assert.notEqual(z, x);
  });

  it("a clean restart goes on where the last run ended: the reservation shrinks on close", async () => {
    const dataDir = tempDataDir();
    const first = await start(dataDir);
    const a = await placeId(first);
    assert.equal(await first.proc.kill("SIGTERM"), 0);
    const second = await start(dataDir);
    assert.equal(await placeId(second), String(Number(a) + 1));
    assert.equal(await second.proc.kill("SIGTERM"), 0);
  });

  it("an unreadable ids.json is set aside and the counters come from the saved state", async () => {
    const dataDir = tempDataDir();
    mkdirSync(join(dataDir, "emulator"));
    writeFileSync(emulatorIdsFile(emulatorStateFile(dataDir)), "{ not json");
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on("warning", onWarning);
    const emulator = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
    await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
    process.off("warning", onWarning);
    try {
      assert.ok(warnings.some((w) => /set aside/.test(w)), warnings.join("\n"));
      assert.ok(readdirSync(join(dataDir, "emulator")).some((f) => f.startsWith("ids.json.bad-")));
      const placed = await emulator.app.request("/api/v2/stores/orders/", {
        method: "POST",
        headers: { authorization: `Token ${TEST_TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify(placeOrderBody()),
      });
      assert.equal(placed.status, 200);
      assert.ok(readdirSync(join(dataDir, "emulator")).includes("ids.json"), "a new reservation was written");
    } finally {
      emulator.close();
    }
  });
});
