/**
 * Memory at the edge: a real web process under a small heap (--max-old-space-size=96)
 * takes bursts of maximum-size callbacks (256 KiB) at once. The ingest buffer's bound
 * (src/runtime/services.ts pendingBytesFor; bodies held before they are read and charged
 * by what they cost parsed, src/http/routes/callbacks.ts) must answer 503 `overloaded`
 * with Retry-After before the heap runs out: the process stays up, and every callback
 * acknowledged is stored.
 */
import assert from "node:assert/strict";
import { request, Agent } from "node:http";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { waitReady } from "../helpers/load.ts";
import { cleanupsAfterAll, listeningUrl, portOf, startService } from "../helpers/process.ts";

const SECRET = "memory-test-secret-0123456789";
const MAX = 256 * 1024;
const cleanups = cleanupsAfterAll();

/** A callback of exactly 256 KiB: one long string, or 87,000 empty objects (a far bigger parsed value). */
function body(id: string, shape: "string" | "objects"): string {
  const head = `{"client_order_id":"${id}","order_status":"ALLOTTED","junk":`;
  if (shape === "string") return `${head}"${"a".repeat(MAX - head.length - 3)}"}`;
  const n = Math.floor((MAX - head.length - 3) / 3);
  return `${head}[${"{},".repeat(n).slice(0, -1)}]}`;
}

interface Answer {
  id: string;
  status: number;
  retryAfter: string | undefined;
  code: string | undefined;
}

function send(port: number, agent: Agent, id: string, text: string): Promise<Answer | Error> {
  return new Promise((resolve) => {
    const req = request(
      { host: "127.0.0.1", port, method: "POST", path: `/callbacks/${SECRET}`, agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } },
      (res) => {
        let data = "";
        res.on("data", (c: Buffer) => (data += c.toString()));
        res.on("end", () => {
          const code = /"code":"([a-z_]+)"/.exec(data)?.[1];
          resolve({ id, status: res.statusCode ?? 0, retryAfter: res.headers["retry-after"] as string | undefined, code });
        });
      },
    );
    req.on("error", resolve);
    req.end(text);
  });
}

describe("a web process under a small heap", () => {
  it("answers a burst of 256 KiB callbacks 200 or 503 overloaded, never runs out of memory, and stores every 200", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-memory-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    // PORT=0: the process binds a free port itself and names it in its "web listening" line
    // (at info for that line); a port picked here and released could be taken by another
    // test file's process before this one listens.
    const web = startService(cleanups, "web", {
      DATABASE_URL: db.url,
      PORT: "0",
      HOST: "127.0.0.1",
      API_TOKEN: "memory-test-token-0123456789",
      CALLBACK_SECRET: SECRET,
      LOG_LEVEL: "info",
      DATA_DIR: dataDir,
      DB_POOL_MAX: "4",
      NODE_OPTIONS: "--max-old-space-size=96",
    });
    const base = await listeningUrl(web, "web listening");
    const port = portOf(base);
    await waitReady(base);
    const agent = new Agent({ keepAlive: true, maxSockets: 400 });
    cleanups.push(async () => agent.destroy());
    const answers: (Answer | Error)[] = [];
    for (const [shape, count] of [["objects", 40], ["string", 300]] as const) {
      const texts = Array.from({ length: count }, (_, i) => [`MEM-${shape}-${i}`, body(`MEM-${shape}-${i}`, shape)] as const);
      answers.push(...(await Promise.all(texts.map(([id, text]) => send(port, agent, id, text)))));
    }
    assert.equal(web.child.exitCode, null, `the web process exited:\n${web.output().slice(-1500)}`);
    const failed = answers.filter((a): a is Error => a instanceof Error);
    assert.deepEqual(failed.map((e) => String(e)), [], "every callback was answered");
    const ok = answers.filter((a): a is Answer => !(a instanceof Error));
    for (const a of ok) {
      if (a.status === 200) continue;
      assert.deepEqual([a.status, a.code, a.retryAfter], [503, "overloaded", "1"], a.id);
    }
    const acked = ok.filter((a) => a.status === 200).map((a) => a.id);
    assert.ok(acked.length > 0, "some callbacks were taken");
    assert.ok(acked.length < ok.length, "the buffer refused some: the burst went beyond its bound");
    const sql = driverSql(db.url, { max: 1 });
    try {
      const rows = await sql<{ id: string }[]>`select distinct client_order_id as id from order_events where client_order_id like 'MEM-%'`;
      assert.deepEqual(rows.map((r) => r.id).sort(), [...acked].sort());
    } finally {
      await sql.end();
    }
    // Once the burst is over, a small callback is taken at once.
    const after = await send(port, agent, "MEM-after", JSON.stringify({ client_order_id: "MEM-after", order_status: "ALLOTTED" }));
    assert.ok(!(after instanceof Error) && after.status === 200, String(after instanceof Error ? after : after.status));
  });
});
