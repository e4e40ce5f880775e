/**
 * Ctrl-C in a terminal signals the whole foreground process group: tracklane and, before,
 * the embedded PostgreSQL it had started, which then shut down under the running service.
 * Here `npm start` (src/main.ts) leads a process group of its own and the group gets
 * SIGINT during a burst of callbacks: tracklane must stop in order, exit 0 without a stack
 * trace, and every acknowledged event must be in the database afterwards.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { createLogger } from "../../src/logger.ts";
import { resolveDatabase } from "../../src/runtime/database.ts";
import { portOf, startProcess } from "../helpers/process.ts";

const SECRET = "clean-stop-secret-0123456789";
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe("Ctrl-C during a callback burst", () => {
  it("stops in order (requests, ingest, jobs, emulator, PostgreSQL last), exits 0 without a stack trace, and loses no acknowledged event", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-stop-"));
    chmodSync(dataDir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    // PORT=0: any free port, bound by the process itself and read back from its "service:"
    // line; one picked here and released could be taken by another test file's process first.
    const proc = startProcess(
      "src/main.ts",
      { DATA_DIR: dataDir, PORT: "0", EMULATOR_PORT: "0", HOST: "127.0.0.1", CALLBACK_SECRET: SECRET, API_TOKEN: "clean-stop-token-0123456789", LOG_FORMAT: "json" },
      { group: true },
    );
    cleanups.push(async () => void (await proc.kill("SIGKILL")));
    await proc.waitFor(/callback URL:/, 90_000);
    const port = portOf(/service:\s+(http:\/\/\S+)/.exec(proc.output())![1]!);

    const acked = new Map<string, string>();
    let stop = false;
    let n = 0;
    const senders = Array.from({ length: 16 }, async (_, s) => {
      while (!stop) {
        const id = `STOP-${s}-${n++}`;
        try {
          const res = await fetch(`http://127.0.0.1:${port}/callbacks/${SECRET}`, {
            method: "POST",
            body: JSON.stringify({ client_order_id: id, order_status: "ALLOTTED" }),
          });
          if (res.status === 200) acked.set(((await res.json()) as { event_id: string }).event_id, id);
          else if (res.status !== 503) assert.fail(`${res.status}: ${await res.text()}`);
        } catch {
          return; // refused or closed: the server has stopped listening
        }
      }
    });
    const deadline = Date.now() + 20_000;
    while (acked.size < 200 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    // Under `npm start` one Ctrl-C arrives twice: from the terminal and forwarded by npm.
    process.kill(-proc.child.pid!, "SIGINT");
    await new Promise((r) => setTimeout(r, 30));
    const code = await proc.kill("SIGINT");
    stop = true;
    await Promise.all(senders);

    const out = proc.output();
    assert.equal(code, 0, out.slice(-3000));
    assert.doesNotMatch(out, /\n\s+at \S+ \(|"level":(50|60)/, "no stack trace and no error line");
    // Each step's log line, by the time it was logged (pino stamps a line when it is
    // logged; the asynchronous destination may write the last two in either order).
    const lines = out.split("\n").flatMap((l) => {
      try {
        return [JSON.parse(l) as { msg?: string; time?: string }];
      } catch {
        return [];
      }
    });
    const steps = ["shutting down", "stopped accepting requests", "ingest buffer flushed", "worker stopped", "emulator stopped", "embedded PostgreSQL stopped", "stopped"];
    const at = steps.map((step) => lines.find((l) => l.msg === step || (step === "shutting down" && l.msg?.startsWith(step)))?.time);
    assert.ok(at.every((t) => t !== undefined), `missing steps: ${steps.filter((_, i) => at[i] === undefined).join(", ")}\n${out.slice(-3000)}`);
    const times = at.map((t) => Date.parse(t!));
    assert.deepEqual([...times].sort((a, b) => a - b), times, `steps in order: ${JSON.stringify(steps.map((st, i) => [st, at[i]]))}`);
    assert.ok(acked.size >= 100, `only ${acked.size} acknowledged`);

    // Every acknowledged event is stored: start the embedded server again on that data.
    const log = createLogger({ level: "silent" });
    const db = await resolveDatabase({ databaseUrl: undefined, dataDir, log });
    try {
      const sql = driverSql(db.url, { max: 1 });
      const rows = await sql<{ id: string; client_order_id: string }[]>`
        select id::text, client_order_id from order_events where id = any(${[...acked.keys()]}::bigint[])`;
      await sql.end();
      const stored = new Map(rows.map((r) => [r.id, r.client_order_id]));
      const missing = [...acked].filter(([id, coid]) => stored.get(id) !== coid);
      assert.deepEqual(missing, [], `${missing.length} of ${acked.size} acknowledged events lost`);
      console.log(`Ctrl-C mid-burst: ${acked.size} acknowledged, all stored`);
    } finally {
      await db.release();
    }
  });
});
