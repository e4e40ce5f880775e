import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createEmulator } from "../../src/emulator/app.ts";
import { emulatorStateFile, SAVE_DELAY_MS } from "../../src/emulator/persist.ts";
import { startEmulator } from "../../src/emulator/server.ts";
import { deserialiseState } from "../../src/emulator/state.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-emu-state-"));
  dirs.push(dir);
  return dir;
}

function portOf(url: string): number {
  return Number(new URL(url).port);
}

async function waitUntil(check: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("emulator state under DATA_DIR/emulator/", () => {
  it("comes back after a restart: orders, track_url, id counter, AWB pool, callback URLs, behaviour, clock", async (t) => {
    const dataDir = tempDataDir();
    const first: EmulatorPair = await startEmulatorPair({ emulator: { dataDir } });
    t.after(() => first.close());
    const body = placeOrderBody();
    const placed = await first.client.placeOrder(body);
    const svc = placed.data.svc_order_id;
    const trackUrl = placed.data.track_url;
    assert.ok(trackUrl !== null);
    const pool = await first.client.generatePoolAwbs(3);
    assert.equal((await first.control.send("PUT", "/callback-urls", { urls: ["http://127.0.0.1:9/callbacks/kept"] })).status, 200);
    const switched = await first.control.send("PUT", "/behaviour", { accept_duplicate_orders: true, callback_timezone: "Asia/Kolkata" });
    assert.equal(switched.status, 200);
    await first.control.advanceClock(3600);
    const port = portOf(first.url);
    await first.close();
    assert.ok(existsSync(emulatorStateFile(dataDir)), "state.json written on close");
    // Let fetch's pool see the old server's sockets close before it would reuse one on this port.
    await new Promise((r) => setTimeout(r, 100));

    // Same port on purpose: the saved track_url names it.
    const second = await startEmulatorPair({ emulator: { dataDir, port } });
    try {
      const track = await fetch(trackUrl);
      assert.equal(track.status, 200);
      const tracked = (await track.json()) as Record<string, unknown>;
      assert.equal(String(tracked["svc_order_id"]), String(svc));
      assert.equal(tracked["status"], "CREATED");

      const order = await second.control.order(String(svc));
      assert.equal(order["client_order_id"], body.order_details.client_order_id);
      assert.equal(order["track_url"], trackUrl);
      assert.deepEqual(order["body"], body);

      const next = await second.client.placeOrder(placeOrderBody());
      // The counter carried on (a fresh one starts at a random point and could meet the old ids).
      assert.equal(String(next.data.svc_order_id), String(Number(svc) + 1));

      // Pool replenishment hands out the same unused numbers again: the pool came back.
      assert.deepEqual((await second.client.generatePoolAwbs(3)).awb_numbers, pool.awb_numbers);
      assert.deepEqual((await second.control.get("/callback-urls")).body["urls"], ["http://127.0.0.1:9/callbacks/kept"]);
      const behaviour = (await second.control.get("/behaviour")).body;
      assert.equal(behaviour["accept_duplicate_orders"], true);
      assert.equal(behaviour["callback_timezone"], "Asia/Kolkata");
      assert.ok(((await second.control.get("/clock")).body["offset_ms"] as number) >= 3_600_000);
      // A reset goes back to the start values, not to the saved ones.
      await second.control.send("POST", "/reset", {});
      assert.equal((await second.control.get("/behaviour")).body["accept_duplicate_orders"], false);
    } finally {
      await second.close();
    }
    const third = await startEmulatorPair({ emulator: { dataDir } });
    try {
      assert.equal((await third.control.orders()).length, 0, "the reset was saved too");
    } finally {
      await third.close();
    }
  });

  it("saves shortly after a change, without waiting for close", async () => {
    const dataDir = tempDataDir();
    const pair = await startEmulatorPair({ emulator: { dataDir } });
    try {
      const file = emulatorStateFile(dataDir);
      const { data } = await pair.client.placeOrder(placeOrderBody());
      await waitUntil(() => existsSync(file), SAVE_DELAY_MS * 8);
      const saved = deserialiseState(JSON.parse(readFileSync(file, "utf8")));
      assert.ok(saved.ok);
      assert.ok(saved.state.orders.has(String(data.svc_order_id)));
      // Written by rename: no temp file is left behind. ids.json: the order id, reserved before the answer (persist.ts).
      assert.deepEqual(readdirSync(join(dataDir, "emulator")).sort(), ["ids.json", "state.json"]);
    } finally {
      await pair.close();
    }
  });

  it("a fresh AWB request minted on a poll (a GET) is saved", async () => {
    const dataDir = tempDataDir();
    const pair = await startEmulatorPair({ emulator: { dataDir } });
    try {
      const request = await pair.client.requestFreshAwbs({ awb_count: 2 });
      await pair.control.advanceClock(3600);
      // Let the writes' save go out first, so only the poll can cause the next one.
      await new Promise((r) => setTimeout(r, SAVE_DELAY_MS * 3));
      const minted = await pair.client.pollFreshAwbs(request.request_id);
      assert.equal(minted.awb_numbers.length, 2);
      // Not closed: whatever is on disk now is what a crash would leave.
      await new Promise((r) => setTimeout(r, SAVE_DELAY_MS * 4));
      const saved = deserialiseState(JSON.parse(readFileSync(emulatorStateFile(dataDir), "utf8")));
      assert.ok(saved.ok);
      assert.deepEqual(saved.state.awbRequests.get(request.request_id)?.numbers, minted.awb_numbers);
    } finally {
      await pair.close();
    }
  });

  it("resetSavedState (npm run emulator -- --reset) starts empty", async (t) => {
    const dataDir = tempDataDir();
    const first = await startEmulatorPair({ emulator: { dataDir } });
    t.after(() => first.close());
    await first.client.placeOrder(placeOrderBody());
    await first.close();
    assert.ok(existsSync(emulatorStateFile(dataDir)));

    const fresh = await startEmulatorPair({ emulator: { dataDir, resetSavedState: true } });
    try {
      assert.equal((await fresh.control.orders()).length, 0);
      assert.equal(existsSync(emulatorStateFile(dataDir)), false, "the saved state is deleted");
    } finally {
      await fresh.close();
    }
  });

  it("sets an unreadable file aside as state.json.bad-<time> and starts empty", async () => {
    for (const content of ["{ not json", JSON.stringify({ version: 99, orders: "many" })]) {
      const dataDir = tempDataDir();
      mkdirSync(join(dataDir, "emulator"));
      writeFileSync(emulatorStateFile(dataDir), content);
      const warnings: string[] = [];
      const onWarning = (w: Error) => warnings.push(w.message);
      process.on("warning", onWarning);
      const emulator = createEmulator({ dataDir, tokens: ["t"] });
      await new Promise((r) => setImmediate(r)); // warnings are emitted on the next tick
      process.off("warning", onWarning);
      try {
        assert.equal(emulator.state.orders.size, 0);
        const files = readdirSync(join(dataDir, "emulator"));
        assert.equal(files.length, 1, files.join(", "));
        assert.match(files[0]!, /^state\.json\.bad-\d{4}-\d\d-\d\dT[\d-]+Z$/);
        assert.equal(readFileSync(join(dataDir, "emulator", files[0]!), "utf8"), content, "kept as it was");
        assert.ok(warnings.some((w) => /set aside/.test(w)), warnings.join("\n"));
      } finally {
        emulator.close();
      }
    }
  });

  it("stays in memory without a data dir", async () => {
    const running = await startEmulator({ tokens: ["t"] });
    try {
      assert.equal(running.emulator.stateFile, undefined);
    } finally {
      await running.close();
    }
  });
});
