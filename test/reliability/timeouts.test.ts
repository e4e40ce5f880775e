/**
 * Slow clients (issue #6): a body trickled after the headers, and headers trickled, over a
 * real socket. The server cuts each off within its configured timeout (HTTP_REQUEST_TIMEOUT_MS,
 * HTTP_HEADERS_TIMEOUT_MS) and keeps serving everyone else meanwhile.
 */
import assert from "node:assert/strict";
import { connect } from "node:net";
import type { Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const REQUEST_TIMEOUT_MS = 1200;
const HEADERS_TIMEOUT_MS = 600;
/** Node checks for expired requests periodically; listen() bounds that period by a fraction of the timeouts. */
const SLACK_MS = 1500;

let t: TestApp;
let server: { url: string; close(): Promise<void> };
before(async () => {
  t = await createTestApp({ HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS), HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS) });
  server = await t.listen();
});
after(async () => {
  await server.close();
  await t.close();
});

interface Trickle {
  /** What the server sent before it closed the connection ("" if nothing). */
  answer: string;
  /** From the first byte sent to the close. */
  elapsedMs: number;
  /** Bytes trickled before the cut. */
  sent: number;
}

/** Sends `head` at once, then `drip` one byte every `everyMs` until the server closes the socket. */
async function trickle(head: string, drip: string, everyMs: number, giveUpMs = 10_000): Promise<Trickle> {
  const { hostname, port } = new URL(server.url);
  const started = Date.now();
  return await new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const socket: Socket = connect(Number(port), hostname, () => {
      socket.write(head);
      timer = setInterval(() => {
        if (socket.destroyed || !socket.writable) return;
        socket.write(drip[sent % drip.length]!);
        sent++;
      }, everyMs);
    });
    const done = () => {
      clearInterval(timer);
      clearTimeout(giveUp);
      resolve({ answer: Buffer.concat(chunks).toString("latin1"), elapsedMs: Date.now() - started, sent });
    };
    const giveUp = setTimeout(() => {
      clearInterval(timer);
      socket.destroy();
      reject(new Error(`the server never cut the slow client off (${sent} bytes trickled over ${Date.now() - started} ms)`));
    }, giveUpMs);
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("close", done);
    socket.on("error", () => {}); // a reset is a cut too; "close" follows
  });
}

/** Meanwhile, other clients are served normally. */
async function servedMeanwhile(during: Promise<unknown>): Promise<number> {
  let served = 0;
  let finished = false;
  void during.finally(() => (finished = true)).catch(() => {});
  while (!finished) {
    const res = await fetch(`${server.url}/v1/orders?limit=1`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    served++;
    await new Promise((r) => setTimeout(r, 100));
  }
  return served;
}

describe("slow clients over a real socket", () => {
  it("a callback body trickled after its headers is cut off within HTTP_REQUEST_TIMEOUT_MS; others are served meanwhile", async () => {
    const body = JSON.stringify({ client_order_id: "SLOW-1", order_status: "ALLOTTED" });
    const head = `POST /callbacks/${CALLBACK_SECRET} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 10_000}\r\n\r\n`;
    const cut = trickle(head, body, 50);
    const served = await servedMeanwhile(cut);
    const result = await cut;
    assert.ok(result.elapsedMs >= REQUEST_TIMEOUT_MS - 100, `cut after ${result.elapsedMs} ms: too early`);
    assert.ok(result.elapsedMs <= REQUEST_TIMEOUT_MS + SLACK_MS, `cut after ${result.elapsedMs} ms`);
    assert.match(result.answer, /^(HTTP\/1\.1 408|$)/, result.answer.slice(0, 60));
    assert.ok(served >= 3, `served ${served} requests meanwhile`);
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = 'SLOW-1'`;
    assert.equal(row!.n, 0, "nothing half-received is stored");
  });

  it("an API body trickled the same way is cut off too", async () => {
    const head = `POST /v1/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${API_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n`;
    const result = await trickle(head, '{"store_code":"S",', 50);
    assert.ok(result.elapsedMs <= REQUEST_TIMEOUT_MS + SLACK_MS, `cut after ${result.elapsedMs} ms`);
    assert.match(result.answer, /^(HTTP\/1\.1 408|$)/, result.answer.slice(0, 60));
  });

  it("headers trickled one byte at a time are cut off within HTTP_HEADERS_TIMEOUT_MS", async () => {
    const cut = trickle("GET /healthz HTTP/1.1\r\nHost: x\r\n", "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 30);
    const served = await servedMeanwhile(cut);
    const result = await cut;
    assert.ok(result.elapsedMs <= HEADERS_TIMEOUT_MS + SLACK_MS, `cut after ${result.elapsedMs} ms`);
    assert.match(result.answer, /^(HTTP\/1\.1 408|$)/, result.answer.slice(0, 60));
    assert.ok(served >= 1);
  });

  it("after all that, the server still answers, and logged no server error for a client's slowness", async () => {
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    const res = await fetch(`${server.url}/callbacks/${CALLBACK_SECRET}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ client_order_id: "SLOW-2", order_status: "ALLOTTED" }) });
    assert.equal(res.status, 200);
    t.log.flush();
    const errors = t.logLines.filter((l) => (JSON.parse(l) as { level: number }).level >= 50);
    assert.deepEqual(errors, []);
  });
});

describe("HTTP timeout configuration", () => {
  const base = { DATA_DIR: "/tmp/tracklane-timeouts-test", API_TOKEN, CALLBACK_SECRET };

  it("defaults to 30 s for a request and 10 s for its headers", () => {
    assert.deepEqual(loadConfig(base).http, { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000 });
    assert.deepEqual(loadConfig({ ...base, HTTP_REQUEST_TIMEOUT_MS: "5000", HTTP_HEADERS_TIMEOUT_MS: "2000" }).http, { requestTimeoutMs: 5000, headersTimeoutMs: 2000 });
  });

  it("refuses values that are not whole milliseconds in range, and headers slower than the request", () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig({ ...base, ...env });
        return [];
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.problems;
      }
    };
    for (const bad of ["abc", "0", "-5", "1.5", "99", "3600001"]) {
      const found = problems({ HTTP_REQUEST_TIMEOUT_MS: bad });
      assert.equal(found.length, 1, `HTTP_REQUEST_TIMEOUT_MS=${bad}: ${found.join("; ")}`);
      assert.match(found[0]!, /^HTTP_REQUEST_TIMEOUT_MS: /);
    }
    assert.match(problems({ HTTP_HEADERS_TIMEOUT_MS: "x" })[0] ?? "", /^HTTP_HEADERS_TIMEOUT_MS: /);
    assert.deepEqual(problems({ HTTP_REQUEST_TIMEOUT_MS: "1000", HTTP_HEADERS_TIMEOUT_MS: "2000" }), [
      "HTTP_HEADERS_TIMEOUT_MS: must not be greater than HTTP_REQUEST_TIMEOUT_MS",
    ]);
  });
});
