/**
 * Every way a provider call can fail, classified as not sent, refused before acting, or
 * ambiguous (PRODUCT.md §10), one case each, over real sockets on loopback: a tiny raw
 * HTTP server answers each case exactly (or closes the connection at the chosen moment).
 * And the tolerant reading of answers: order ids under any of their names, the provider's
 * words from any of its keys, HTML and empty bodies excerpted.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { connect, createServer } from "node:net";
import type { AddressInfo, Server, Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { deliveryOf, ProviderError, providerMessageOf } from "../../src/provider/errors.ts";
import { RESPONSE_MAX_BYTES } from "../../src/provider/http.ts";
import type { Delivery } from "../../src/provider/errors.ts";
import { placeOrderBody } from "../helpers/emulator.ts";

/** What the raw server does with the next request. */
type Behaviour = { answer: string } | { close: "before_reading" | "after_reading" } | { hang: true };

/**
 * Timeouts, in proportion: a client that waits long for an answered call (a loaded CI
 * machine can take hundreds of milliseconds to schedule a loopback round trip; none of
 * these calls waits that long unless the machine is), and, for the hang, a timeout that
 * ends the wait long before the hanging server would answer, and long after any scheduling
 * delay. The hang ends in a success, so a timeout that did not fire fails the test.
 */
const ANSWERED_TIMEOUT_MS = 10_000;
const HANG_TIMEOUT_MS = 1_000;
const HANG_MS = 15_000;

function http(status: number, body: string, contentType = "application/json", extra = ""): { answer: string } {
  const reason = status === 200 ? "OK" : "X";
  return {
    answer: `HTTP/1.1 ${status} ${reason}\r\ncontent-type: ${contentType}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n${extra}\r\n${body}`,
  };
}

describe("provider call outcomes: not sent, refused, ambiguous", () => {
  let server: Server;
  let url: string;
  let next: Behaviour = http(200, "{}");
  let requests = 0;
  let client: ProviderClient;
  const sockets = new Set<Socket>();

  before(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      const behaviour = next;
      if ("close" in behaviour && behaviour.close === "before_reading") {
        socket.destroy();
        return;
      }
      let received = "";
      socket.on("data", (chunk: Buffer) => {
        received += chunk.toString("utf8");
        const headerEnd = received.indexOf("\r\n\r\n");
        if (headerEnd < 0) return;
        const length = Number(/content-length: (\d+)/i.exec(received.slice(0, headerEnd))?.[1] ?? 0);
        if (received.length - headerEnd - 4 < length) return;
        requests++;
        if ("answer" in behaviour) socket.end(behaviour.answer);
        else if ("close" in behaviour) socket.destroy();
        // hang: an answer (a success) only after HANG_MS, far past the client's timeout.
        else setTimeout(() => socket.end(http(200, '{"message":"Success","data":{"svc_order_id":"LATE"}}').answer), HANG_MS).unref();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    client = createProviderClient({ baseUrl: url, auth: { method: "token", token: "t" }, timeoutMs: ANSWERED_TIMEOUT_MS });
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  async function failure(behaviour: Behaviour, c: ProviderClient = client): Promise<ProviderError> {
    next = behaviour;
    try {
      await c.placeOrder(placeOrderBody());
    } catch (err) {
      assert.ok(err instanceof ProviderError, String(err));
      return err;
    }
    assert.fail("the place succeeded");
  }

  const expect = (err: ProviderError, kind: string, delivery: Delivery, retryable: boolean) =>
    assert.deepEqual([err.kind, err.delivery, err.retryable], [kind, delivery, retryable], err.message);

  it("not sent: connection refused (nothing listens on the port)", async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dead = createProviderClient({ baseUrl: `http://127.0.0.1:${port}`, auth: { method: "token", token: "t" }, timeoutMs: ANSWERED_TIMEOUT_MS });
    expect(await failure(http(200, "{}"), dead), "network", "not_sent", true);
  });

  it("not sent: a connection that is never made (the provider's address takes no connection) is retried, with the default timeout", async () => {
    // A listener whose accept queue is full: the kernel drops further SYNs, so a connect
    // hangs, as towards an address that swallows packets. Its process blocks its own
    // event loop, so it never accepts.
    const child = spawn(
      process.execPath,
      ["-e", `const s = require("node:net").createServer().listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () =>
        process.stdout.write(s.address().port + "\\n", () => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 30000)));`],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const fill: Socket[] = [];
    try {
      const port = await new Promise<number>((resolve) => child.stdout.once("data", (d: Buffer) => resolve(Number(String(d).trim()))));
      for (let i = 0; i < 6; i++) fill.push(connect(port, "127.0.0.1").on("error", () => {}));
      await new Promise((r) => setTimeout(r, 200));
      const hanging = createProviderClient({ baseUrl: `http://127.0.0.1:${port}`, auth: { method: "token", token: "t" } });
      expect(await failure(http(200, "{}"), hanging), "network", "not_sent", true);
    } finally {
      child.kill();
      for (const socket of fill) socket.destroy();
    }
  });

  it("not sent: a body our own schema refuses never leaves", async () => {
    next = http(200, "{}");
    const before = requests;
    const bad = { ...placeOrderBody(), store_code: "" };
    const err = await client.placeOrder(bad).then(
      () => assert.fail("sent"),
      (e: unknown) => e as ProviderError,
    );
    expect(err, "invalid_request", "not_sent", false);
    assert.equal(requests, before);
  });

  it("not sent: an id of . or .. in the path, which URL parsing would read as a step to another endpoint", async () => {
    next = http(200, "{}");
    const before = requests;
    for (const call of [() => client.dispatchReady("..", { shipment_ready_timestamp: 0 }), () => client.orderStatus("."), () => client.cancelOrder("..", { reason: "x", user: "Seller" })]) {
      const err = await call().then(
        () => assert.fail("sent"),
        (e: unknown) => e as ProviderError,
      );
      expect(err, "invalid_request", "not_sent", false);
      assert.match(err.providerMessage, /cannot go in the provider's URL path/);
    }
    assert.equal(requests, before, "nothing reached the server");
  });

  it("not sent: a request fetch cannot build (a header value with a line break, a URL with a password) never leaves, and its error does not repeat the secret", async () => {
    const before = requests;
    const badToken = createProviderClient({ baseUrl: url, auth: { method: "token", token: "tok\nSECRET-IN-HEADER" }, timeoutMs: ANSWERED_TIMEOUT_MS });
    const header = await failure(http(200, "{}"), badToken);
    expect(header, "invalid_request", "not_sent", false);
    const withPassword = createProviderClient({ baseUrl: url.replace("http://", "http://user:SECRET-IN-URL@"), auth: { method: "token", token: "t" }, timeoutMs: ANSWERED_TIMEOUT_MS });
    const creds = await failure(http(200, "{}"), withPassword);
    expect(creds, "invalid_request", "not_sent", false);
    assert.equal(requests, before, "nothing reached the server");
    for (const err of [header, creds]) {
      assert.doesNotMatch(`${err.message} ${err.providerMessage} ${String(err.cause)}`, /SECRET-IN/);
      assert.match(err.providerMessage, /could not be built/);
    }
  });

  it("refused: 429, 503, 400, 401/403, 408", async () => {
    expect(await failure(http(429, '{"detail":"slow down"}', "application/json", "retry-after: 2\r\n")), "rate_limited", "refused", true);
    expect(await failure(http(503, "")), "server", "refused", true);
    expect(await failure(http(400, '{"message":"Failure","errors":{"city":["required"]}}')), "client", "refused", false);
    const auth = await failure(http(401, '{"detail":"Invalid token."}'));
    expect(auth, "auth", "refused", false);
    assert.match(auth.providerMessage, /Invalid token/);
    expect(await failure(http(403, '{"detail":"Forbidden"}')), "auth", "refused", false);
    expect(await failure(http(408, "")), "timeout", "refused", true);
  });

  it("refused: a redirect is not followed (a POST answered 301 would come back a GET without its body) and says where to point tracklane", async () => {
    for (const status of [301, 302, 307, 308]) {
      const before = requests;
      // Followed, the redirect would reach this same loopback server a second time.
      const err = await failure(http(status, "", "text/html", `location: ${url}/moved/api/v2/stores/orders/\r\n`));
      expect(err, "client", "refused", false);
      assert.equal(err.status, status);
      assert.equal(requests, before + 1, `${status}: one request, the redirect not followed`);
      assert.ok(err.providerMessage.includes(`redirected (${status}) to ${url}/moved/api/v2/stores/orders/`), err.providerMessage);
      assert.match(err.providerMessage, /PROVIDER_BASE_URL/);
    }
  });

  it("refused: a 2xx that names no order, with the provider's words; or that says Failure", async () => {
    const err = await failure(http(200, '{"message":"Order in non-serviceable area"}'));
    expect(err, "failure", "refused", false);
    assert.equal(err.providerMessage, "Order in non-serviceable area");
    const reason = await failure(http(200, '{"status":false,"reason":"Store is closed"}'));
    expect(reason, "failure", "refused", false);
    assert.equal(reason.providerMessage, "Store is closed");
    expect(await failure(http(200, '{"message":"Failure","errors":"duplicate"}')), "failure", "refused", false);
  });

  it("ambiguous: 500, 502 (HTML), 504", async () => {
    expect(await failure(http(500, '{"detail":"boom"}')), "server", "ambiguous", true);
    const html = await failure(http(502, "<html><body><h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>", "text/html"));
    expect(html, "server", "ambiguous", true);
    assert.equal(html.status, 502);
    assert.equal(html.providerMessage, "502 Bad Gateway nginx");
    expect(await failure(http(504, "")), "server", "ambiguous", true);
  });

  it("ambiguous: no answer within the timeout", async () => {
    const impatient = createProviderClient({ baseUrl: url, auth: { method: "token", token: "t" }, timeoutMs: HANG_TIMEOUT_MS });
    const started = performance.now();
    const err = await failure({ hang: true }, impatient);
    const waited = performance.now() - started;
    expect(err, "timeout", "ambiguous", true);
    assert.match(err.providerMessage, new RegExp(`no answer within ${HANG_TIMEOUT_MS} ms`));
    assert.ok(waited >= HANG_TIMEOUT_MS - 50 && waited < HANG_MS, `gave up after ${Math.round(waited)} ms`);
  });

  it("ambiguous: the connection closed after the request was written", async () => {
    expect(await failure({ close: "after_reading" }), "network", "ambiguous", true);
  });

  it("ambiguous: an unreadable 2xx, an empty 2xx, and a 2xx that says it succeeded but names no order", async () => {
    const garbled = await failure(http(200, '{"message": "Success", "data": {"svc_order_id": <html>Bad'));
    expect(garbled, "invalid_response", "ambiguous", true);
    assert.match(garbled.providerMessage, /not JSON/);
    expect(await failure(http(200, "")), "invalid_response", "ambiguous", true);
    expect(await failure(http(201, '{"message":"Order placed successfully","data":{}}')), "invalid_response", "ambiguous", true);
    // Other ways of saying the order was taken: not refusals either.
    for (const said of ["Order received", "Booking confirmed", "Request submitted", "Order booked", "Delivery scheduled", "Order queued", "Order registered"]) {
      expect(await failure(http(200, JSON.stringify({ message: said }))), "invalid_response", "ambiguous", true);
    }
  });

  it("reads the order id from svc_order_id, sfx_order_id or id, as a number or a string; track_url optional", async () => {
    const cases: [string, string, string | null][] = [
      ['{"message":"Success","data":{"sfx_order_id":31000000}}', "31000000", null],
      ['{"message":"Success","data":{"svc_order_id":"S-9","track_url":"https://t/9"}}', "S-9", "https://t/9"],
      ['{"data":{"id":77,"track_url":""}}', "77", null],
    ];
    for (const [body, id, track] of cases) {
      next = http(200, body);
      const res = await client.placeOrder(placeOrderBody());
      assert.deepEqual([res.data.svc_order_id, res.data.track_url], [id, track], body);
    }
  });

  it("deliveryOf: 501 and 505 are refusals, other 5xx ambiguous; DNS and TLS failures were never sent", () => {
    assert.equal(deliveryOf("server", 501, undefined), "refused");
    assert.equal(deliveryOf("server", 520, undefined), "ambiguous");
    const dns = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("getaddrinfo ENOTFOUND x"), { code: "ENOTFOUND" }) });
    assert.equal(deliveryOf("network", undefined, dns), "not_sent");
    const tls = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("cert"), { code: "CERT_HAS_EXPIRED" }) });
    assert.equal(deliveryOf("network", undefined, tls), "not_sent");
    const reset = Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error("reset"), { code: "ECONNRESET" }) });
    assert.equal(deliveryOf("network", undefined, reset), "ambiguous");
  });

  it("deliveryOf: every failure to connect is 'not_sent' (re-sent), anything that can come after the request was written is 'ambiguous'", () => {
    const failing = (code: string) => Object.assign(new TypeError("fetch failed"), { cause: Object.assign(new Error(code), { code }) });
    const neverConnected = {
      refused: ["ECONNREFUSED"],
      "no such host": ["ENOTFOUND", "EAI_AGAIN", "EAI_NONAME"],
      unreachable: ["EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"],
      "connect timeout": ["UND_ERR_CONNECT_TIMEOUT"],
      "TLS handshake": [
        "CERT_HAS_EXPIRED",
        "DEPTH_ZERO_SELF_SIGNED_CERT",
        "SELF_SIGNED_CERT_IN_CHAIN",
        "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
        "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
        "ERR_TLS_CERT_ALTNAME_INVALID",
        "ERR_SSL_WRONG_VERSION_NUMBER",
      ],
    };
    for (const [why, codes] of Object.entries(neverConnected)) {
      for (const code of codes) assert.equal(deliveryOf("network", undefined, failing(code)), "not_sent", `${why}: ${code}`);
    }
    for (const code of ["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "ETIMEDOUT", "UND_ERR_HEADERS_TIMEOUT"]) {
      assert.equal(deliveryOf("network", undefined, failing(code)), "ambiguous", code);
    }
    assert.equal(deliveryOf("network", undefined, new TypeError("fetch failed")), "ambiguous", "no code: it may have been sent");
  });
});

describe("providerMessageOf: the provider's words, from any of its shapes, as one sentence", () => {
  it("message, error, detail, reason, and errors as a string, an array or fields", () => {
    assert.equal(providerMessageOf({ message: "Failure", errors: { client_order_id: ["already exists"] } }), "Failure: client_order_id: already exists");
    assert.equal(providerMessageOf({ errors: ["city is required", "name is required"] }), "city is required; name is required");
    assert.equal(providerMessageOf({ errors: "bad store" }), "bad store");
    assert.equal(providerMessageOf({ error: { code: 12, text: "x" } }), "code: 12; text: x");
    assert.equal(providerMessageOf({ reason: "Store is closed" }), "Store is closed");
    assert.equal(providerMessageOf({ detail: "Not found.", message: "Not found." }), "Not found.");
    assert.equal(providerMessageOf({ unrelated: 1 }), "");
  });
  it("HTML and plain text bodies: the readable start, cut short", () => {
    assert.equal(providerMessageOf("<html><style>p{}</style><h1>Service  Unavailable</h1></html>"), "Service Unavailable");
    assert.ok(providerMessageOf("x".repeat(1000)).length <= 200);
  });
});

describe("an answer larger than the provider ever sends", () => {
  /** A fetch that answers `status` with a body of `total` bytes, made as it is read; counts what was read. */
  function hugeAnswer(status: number, total: number) {
    const chunk = new Uint8Array(1024 * 1024).fill(0x61);
    const seen = { read: 0 };
    const fetchHuge: typeof fetch = () => {
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (sent >= total) return controller.close();
          sent += chunk.byteLength;
          seen.read = sent;
          controller.enqueue(chunk);
        },
      });
      return Promise.resolve(new Response(body, { status, headers: { "content-type": "application/json" } }));
    };
    const client = createProviderClient({ baseUrl: "http://127.0.0.1:9", auth: { method: "token", token: "t" }, fetch: fetchHuge, timeoutMs: 60_000 });
    return { client, seen };
  }

  it("is read no further than RESPONSE_MAX_BYTES: a 2xx is an invalid response (it may hide an order), anything else what its status says", async () => {
    const total = 3 * RESPONSE_MAX_BYTES;
    const ok = hugeAnswer(200, total);
    const err = await ok.client.placeOrder(placeOrderBody()).then(
      () => assert.fail("expected an error"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ProviderError);
    assert.deepEqual([err.kind, err.status, err.delivery], ["invalid_response", 200, "ambiguous"]);
    assert.match(err.providerMessage, /larger than \d+ bytes: not read/);
    assert.ok(ok.seen.read <= RESPONSE_MAX_BYTES + 2 * 1024 * 1024, `read ${ok.seen.read} bytes of ${total}`);

    const down = hugeAnswer(502, total);
    const refused = await down.client.placeOrder(placeOrderBody()).then(
      () => assert.fail("expected an error"),
      (e: unknown) => e,
    );
    assert.ok(refused instanceof ProviderError);
    assert.deepEqual([refused.kind, refused.status, refused.delivery], ["server", 502, "ambiguous"]);
    assert.ok(down.seen.read <= RESPONSE_MAX_BYTES + 2 * 1024 * 1024, `read ${down.seen.read} bytes of ${total}`);
  });
});
