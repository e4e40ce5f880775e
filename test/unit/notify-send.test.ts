/** sendWebhook against real receivers on 127.0.0.1 (allowPrivate: true): outcomes, deadline, caps, redirects, guard. */
import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import http from "node:http";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { Webhook } from "standardwebhooks";
import { sendWebhook } from "../../src/notify/send.ts";
import { ANSWERED_TIMEOUT_MS, HANG_MS, HANG_TIMEOUT_MS } from "../helpers/emulator.ts";
import { newMessageId, newSecret, webhookHeaders } from "../../src/notify/sign.ts";

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface Receiver {
  url: string;
  port: number;
  received: Received[];
  connections: number;
  close: () => void;
}

const open: Receiver[] = [];
after(() => open.forEach((r) => r.close()));

/** A receiver whose handler sees the request body already read. */
async function receiver(handler: (req: Received, res: http.ServerResponse) => void): Promise<Receiver> {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const r = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks).toString("utf8") };
      received.push(r);
      handler(r, res);
    });
  });
  const r: Receiver = {
    url: "",
    port: 0,
    received,
    connections: 0,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
  server.on("connection", () => r.connections++);
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  r.port = (server.address() as AddressInfo).port;
  r.url = `http://127.0.0.1:${r.port}`;
  open.push(r);
  return r;
}

/**
 * An answered send may take long on a loaded machine: ANSWERED_TIMEOUT_MS. The deadline
 * cases give up after HANG_TIMEOUT_MS on a receiver that would finish its answer only after
 * HANG_MS, so a deadline that did not fire ends in a success (test/helpers/emulator.ts).
 */
const base = { headers: { "content-type": "application/json" }, body: '{"hello":"world"}', timeoutMs: ANSWERED_TIMEOUT_MS, allowPrivate: true };

describe("sendWebhook", () => {
  it("delivers the exact body and signed headers; 200 → delivered with duration and excerpt", async () => {
    const secret = newSecret();
    const body = JSON.stringify({ type: "order.delivered", data: { order: "A-1", note: "é ✓ 😀" } });
    const headers = webhookHeaders([secret], newMessageId(), Math.floor(Date.now() / 1000), body);
    const r = await receiver((req, res) => {
      // The receiving side checks the signature with the reference implementation.
      const h = req.headers;
      try {
        new Webhook(secret).verify(req.body, { "webhook-id": String(h["webhook-id"]), "webhook-timestamp": String(h["webhook-timestamp"]), "webhook-signature": String(h["webhook-signature"]) });
        res.writeHead(200, { "content-type": "text/plain" }).end("thanks!");
      } catch (err) {
        res.writeHead(401).end(String(err));
      }
    });
    const result = await sendWebhook({ ...base, url: `${r.url}/hooks/tracklane?k=1`, headers, body });
    assert.deepEqual({ ...result, durationMs: 0 }, { outcome: "delivered", statusCode: 200, durationMs: 0, responseExcerpt: "thanks!", error: null });
    assert.ok(result.durationMs >= 0 && result.durationMs < 3000);
    assert.equal(r.received.length, 1);
    const got = r.received[0]!;
    assert.equal(got.method, "POST");
    assert.equal(got.url, "/hooks/tracklane?k=1");
    assert.equal(got.body, body);
    assert.equal(got.headers["content-length"], String(Buffer.byteLength(body)));
    assert.equal(got.headers["user-agent"], "tracklane-webhooks/1");
    for (const [name, value] of Object.entries(headers)) assert.equal(got.headers[name], value, name);
  });

  it("204 → delivered without excerpt; the keep-alive connection is reused", async () => {
    const r = await receiver((_req, res) => res.writeHead(204).end());
    const first = await sendWebhook({ ...base, url: r.url });
    const second = await sendWebhook({ ...base, url: r.url });
    for (const result of [first, second]) {
      assert.equal(result.outcome, "delivered");
      assert.equal(result.statusCode, 204);
      assert.equal(result.responseExcerpt, null);
      assert.equal(result.error, null);
    }
    assert.equal(r.received.length, 2);
    assert.equal(r.connections, 1);
  });

  it("sends to one host do not queue behind each other: endpoints often share one (a hook service), 24 at once all reach it", async () => {
    const held: http.ServerResponse[] = [];
    // Answers only once all 24 are in: a send held back on our side would time out, and its endpoint with it.
    const r = await receiver((_req, res) => {
      held.push(res);
      if (held.length === 24) for (const h of held) h.writeHead(204).end();
    });
    const results = await Promise.all(Array.from({ length: 24 }, (_, i) => sendWebhook({ ...base, url: `${r.url}/hooks/${i}`, timeoutMs: HANG_TIMEOUT_MS })));
    assert.deepEqual(
      results.map((x) => x.error ?? x.outcome),
      results.map(() => "delivered"),
    );
    assert.equal(r.received.length, 24);
  });

  it("410 → gone", async () => {
    const r = await receiver((_req, res) => res.writeHead(410).end("endpoint removed"));
    const result = await sendWebhook({ ...base, url: r.url });
    assert.equal(result.outcome, "gone");
    assert.equal(result.statusCode, 410);
    assert.equal(result.responseExcerpt, "endpoint removed");
  });

  it("500 → failed with status and excerpt; other non-2xx too", async () => {
    const r = await receiver((req, res) => res.writeHead(req.url === "/404" ? 404 : 500).end('{"error":"boom"}'));
    const result = await sendWebhook({ ...base, url: r.url });
    assert.deepEqual({ ...result, durationMs: 0 }, { outcome: "failed", statusCode: 500, durationMs: 0, responseExcerpt: '{"error":"boom"}', error: "HTTP 500" });
    const notFound = await sendWebhook({ ...base, url: `${r.url}/404` });
    assert.equal(notFound.outcome, "failed");
    assert.equal(notFound.error, "HTTP 404");
  });

  it("a 302 is a failure and is not followed", async () => {
    const r = await receiver((req, res) => {
      if (req.url === "/moved") res.writeHead(302, { location: "/target" }).end();
      else res.writeHead(200).end("followed");
    });
    const result = await sendWebhook({ ...base, url: `${r.url}/moved` });
    assert.equal(result.outcome, "failed");
    assert.equal(result.statusCode, 302);
    assert.equal(result.error, "HTTP 302 (redirects are not followed)");
    assert.deepEqual(
      r.received.map((x) => x.url),
      ["/moved"],
    );
  });

  it("a 101 (switching protocols) is a failure with its status at once, not a timeout", async () => {
    const server = net.createServer((socket) => {
      socket.on("error", () => {});
      socket.once("data", () => socket.write("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"));
    });
    await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
    after(() => server.close());
    const result = await sendWebhook({ ...base, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, timeoutMs: HANG_TIMEOUT_MS });
    assert.deepEqual([result.outcome, result.statusCode, result.error], ["failed", 101, "HTTP 101 (switching protocols is not accepted)"]);
    assert.ok(result.durationMs < HANG_TIMEOUT_MS / 2, `${result.durationMs} ms`);
  });

  it("a receiver that never answers → failed with a timeout at about timeoutMs", async () => {
    const r = await receiver((_req, res) => void setTimeout(() => res.writeHead(200).end("late"), HANG_MS).unref());
    const result = await sendWebhook({ ...base, url: r.url, timeoutMs: HANG_TIMEOUT_MS });
    assert.equal(result.outcome, "failed");
    assert.equal(result.statusCode, null);
    assert.equal(result.error, `timeout after ${HANG_TIMEOUT_MS} ms`);
    assert.ok(result.durationMs >= HANG_TIMEOUT_MS - 10 && result.durationMs < HANG_MS, `${result.durationMs} ms`);
  });

  it("the deadline covers the body read too", async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200);
      res.write("partial");
      setTimeout(() => res.end(" and the rest"), HANG_MS).unref();
    });
    const result = await sendWebhook({ ...base, url: r.url, timeoutMs: HANG_TIMEOUT_MS });
    assert.equal(result.outcome, "failed");
    assert.equal(result.statusCode, 200);
    assert.equal(result.error, `timeout after ${HANG_TIMEOUT_MS} ms`);
    assert.equal(result.responseExcerpt, "partial");
    assert.ok(result.durationMs >= HANG_TIMEOUT_MS - 10 && result.durationMs < HANG_MS, `${result.durationMs} ms`);
  });

  it("an endless body is read up to the cap, then the connection is dropped", async () => {
    let serverSawClose: () => void = () => {};
    const closed = new Promise<void>((done) => (serverSawClose = done));
    const r = await receiver((_req, res) => {
      const chunk = Buffer.alloc(16 * 1024, "é");
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
      };
      res.on("drain", pump);
      res.on("close", serverSawClose);
      res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
      pump();
    });
    const result = await sendWebhook({ ...base, url: r.url, timeoutMs: 10_000 });
    assert.equal(result.outcome, "delivered");
    assert.equal(result.statusCode, 200);
    assert.equal(result.responseExcerpt, "é".repeat(1000));
    assert.ok(result.durationMs < 5000, `${result.durationMs} ms`);
    await closed;

    const small = await sendWebhook({ ...base, url: r.url, timeoutMs: 10_000, maxResponseBytes: 5 });
    assert.equal(small.outcome, "delivered");
    // 5 bytes: two "é" and half of a third, decoded leniently.
    assert.equal(small.responseExcerpt, "éé\uFFFD");
  });

  it("decodes invalid UTF-8 leniently", async () => {
    const r = await receiver((_req, res) => res.writeHead(500).end(Buffer.from([0x6f, 0x6b, 0xff, 0xfe, 0x21])));
    const result = await sendWebhook({ ...base, url: r.url });
    assert.equal(result.responseExcerpt, "ok\uFFFD\uFFFD!");
  });

  it("connection refused → failed", async () => {
    const r = await receiver(() => {});
    r.close();
    await new Promise((done) => setTimeout(done, 20));
    const result = await sendWebhook({ ...base, url: r.url });
    assert.deepEqual({ ...result, durationMs: 0 }, { outcome: "failed", statusCode: null, durationMs: 0, responseExcerpt: null, error: "connection refused" });
  });

  it("with allowPrivate false, loopback is refused before any connection", async () => {
    const r = await receiver((_req, res) => res.end("should not happen"));
    const literal = await sendWebhook({ ...base, allowPrivate: false, url: r.url });
    assert.equal(literal.outcome, "failed");
    assert.equal(literal.error, `endpoint_url_forbidden: http://127.0.0.1:${r.port}/ is 127.0.0.1, a loopback address`);

    const lookup = async (): Promise<LookupAddress[]> => [{ address: "127.0.0.1", family: 4 }];
    const named = await sendWebhook({ ...base, allowPrivate: false, url: `http://receiver.test:${r.port}/`, lookup });
    assert.equal(named.outcome, "failed");
    assert.equal(named.error, "endpoint_url_forbidden: receiver.test resolves to 127.0.0.1, a loopback address");

    const mapped = await sendWebhook({ ...base, allowPrivate: false, url: `http://[::ffff:127.0.0.1]:${r.port}/` });
    assert.match(mapped.error ?? "", /^endpoint_url_forbidden: .*\(127\.0\.0\.1\), a loopback address$/);

    await new Promise((done) => setTimeout(done, 20));
    assert.equal(r.connections, 0);
    assert.equal(r.received.length, 0);
  });

  it("a bad URL is a failed attempt, not an exception", async () => {
    const result = await sendWebhook({ ...base, url: "ftp://127.0.0.1/" });
    assert.equal(result.outcome, "failed");
    assert.equal(result.error, "endpoint_url_forbidden: scheme ftp: is not allowed (http: or https: only)");
  });
});
