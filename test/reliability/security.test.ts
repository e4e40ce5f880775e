/**
 * Security (issue #6, PRODUCT.md §4, §6, §8): the bearer token on every /v1 route, the
 * callback secret in both its forms, constant-time comparison semantics, secrets kept out
 * of the logs through whole flows (callbacks, API, order commands against the emulator
 * with token and OAuth2 auth), and body size limits.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import { Writable } from "node:stream";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { after, before, describe, it } from "node:test";
import { API_BODY_MAX_BYTES } from "../../src/http/app.ts";
import { safeEqual } from "../../src/domain/secrets.ts";
import { CALLBACK_MAX_BYTES } from "../../src/http/routes/callbacks.ts";
import { createLogger } from "../../src/logger.ts";
import { createProviderClient } from "../../src/provider/client.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair, PairOptions } from "../helpers/emulator.ts";

type Err = { error: { code: string; message: string; request_id: string } };
const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

let t: TestApp;
before(async () => {
  t = await createTestApp();
  assert.equal((await t.callback({ sfx_order_id: 880, client_order_id: "SEC-1", order_status: "ALLOTTED" })).status, 200);
  await t.runJobs();
});
after(async () => {
  await t.close();
});

function v1Routes() {
  const seen = new Map<string, { method: string; path: string }>();
  for (const r of t.app.routes) if (r.path.startsWith("/v1/") && r.method !== "ALL") seen.set(`${r.method} ${r.path}`, r);
  return [...seen.values()].map((r) => ({ method: r.method, path: r.path.replace(/:[A-Za-z_]+/g, (p) => (p === ":action" ? "allot" : "SEC-1")) }));
}

/** One HTTP/1.1 exchange over a raw socket: whatever bytes we like, whatever comes back. */
async function rawExchange(url: string, request: string | Buffer, timeoutMs = 3000): Promise<string> {
  const { hostname, port } = new URL(url);
  return await new Promise((resolve, reject) => {
    // Written, not ended: a half-closed client gets no answer. `Connection: close` ends it.
    const socket = connect(Number(port), hostname, () => socket.write(request));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    // A server that answers and resets while we still write (431) is an answer, not a
    // failure; the reset may even beat the answer to us.
    socket.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? resolve(Buffer.concat(chunks).toString("latin1")) : reject(err)));
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error("no answer")));
  });
}

describe("bearer token on every /v1 route", () => {
  const wrong = [
    "",
    `Basic ${API_TOKEN}`,
    `Token ${API_TOKEN}`,
    `Basic ${Buffer.from(`user:${API_TOKEN}`).toString("base64")}`,
    API_TOKEN,
    "Bearer",
    `Bearer${API_TOKEN}`,
    `Bearer ${API_TOKEN}x`,
    `Bearer x${API_TOKEN}`,
    `Bearer ${API_TOKEN.slice(0, -1)}`,
    `Bearer ${API_TOKEN.toUpperCase()}`,
    `Bearer ${API_TOKEN} ${API_TOKEN}`,
    `Bearer ${API_TOKEN},${API_TOKEN}`,
    // Whitespace HTTP does not strip is part of the credential: refused, not trimmed away.
    `Bearer ${API_TOKEN}\u00a0`,
    `Bearer\u00a0${API_TOKEN}`,
    `Bearer ${API_TOKEN}\f`,
    `Bearer ${"a".repeat(100_000)}`,
    `Bearer ${API_TOKEN}${"a".repeat(100_000)}`,
    `Bearer ${Buffer.from(API_TOKEN).toString("base64")}`,
  ];

  it("answers 401 unauthorized in the error shape for every wrong credential, on every route", async () => {
    const routes = v1Routes();
    assert.ok(routes.length >= 15, `found ${routes.length} routes`);
    for (const route of routes) {
      for (const authorization of wrong) {
        const res = await t.request(route.path, { method: route.method, token: null, headers: authorization ? { authorization } : {}, json: route.method === "GET" ? undefined : {} });
        const label = `${route.method} ${route.path} with ${JSON.stringify(authorization.slice(0, 60))}`;
        assert.equal(res.status, 401, label);
        assert.equal((await json<Err>(res)).error.code, "unauthorized", label);
        assert.match(res.headers.get("www-authenticate") ?? "", /^Bearer/, label);
      }
    }
  });

  it("does not take the token from the query string, a cookie or another header", async () => {
    for (const route of v1Routes()) {
      for (const [query, headers] of [
        [`access_token=${API_TOKEN}`, {}],
        [`token=${API_TOKEN}`, {}],
        [`api_token=${API_TOKEN}`, {}],
        [`authorization=Bearer%20${API_TOKEN}`, {}],
        ["", { cookie: `token=${API_TOKEN}; access_token=${API_TOKEN}` }],
        ["", { "x-api-token": API_TOKEN, "x-api-key": API_TOKEN, "proxy-authorization": `Bearer ${API_TOKEN}` }],
      ] as const) {
        const path = `${route.path}${query ? `?${query}` : ""}`;
        const res = await t.request(path, { method: route.method, token: null, headers, json: route.method === "GET" ? undefined : {} });
        assert.equal(res.status, 401, `${route.method} ${path} ${JSON.stringify(headers)}`);
      }
    }
  });

  it("accepts the exact token, the scheme in any case, and trailing whitespace HTTP itself strips", async () => {
    // RFC 9110 §5.5: leading and trailing SP/HTAB are not part of a field value (and fetch
    // strips CR/LF too), so these reach the server as the exact token.
    for (const authorization of [`Bearer ${API_TOKEN}`, `bearer ${API_TOKEN}`, `BEARER ${API_TOKEN}`, `Bearer ${API_TOKEN} `, `Bearer ${API_TOKEN}\t`, `Bearer ${API_TOKEN}\n`, `Bearer ${API_TOKEN}\r\n`]) {
      const res = await t.request("/v1/orders/SEC-1", { token: null, headers: { authorization } });
      assert.equal(res.status, 200, JSON.stringify(authorization));
    }
  });

  it("over a real socket: obs-text bytes after the token are refused; an oversized header is refused by Node and the server keeps serving", async () => {
    const server = await t.listen();
    try {
      const request = (auth: Buffer) =>
        Buffer.concat([Buffer.from("GET /v1/orders/SEC-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: "), auth, Buffer.from("\r\n\r\n")]);
      const exact = await rawExchange(server.url, request(Buffer.from(`Bearer ${API_TOKEN}`)));
      assert.match(exact, /^HTTP\/1\.1 200/);
      // Node's parser itself refuses control bytes (400); obs-text reaches us and is a wrong token.
      for (const [suffix, status] of [[[0xa0], /401/], [[0x85], /401/], [[0xff], /401/], [[0xc2, 0xa0], /401/], [[0x0c], /40[01]/]] as const) {
        const answer = await rawExchange(server.url, request(Buffer.concat([Buffer.from(`Bearer ${API_TOKEN}`), Buffer.from(suffix)])));
        assert.match(answer.slice(0, 12), status, `suffix ${suffix.map((b) => b.toString(16)).join(" ")}: ${answer.slice(0, 40)}`);
      }
      const huge = await rawExchange(server.url, request(Buffer.from(`Bearer ${"a".repeat(64 * 1024)}`)));
      assert.ok(huge === "" || huge.startsWith("HTTP/1.1 431"), huge.slice(0, 40));
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe("callback secret", () => {
  async function eventCount(): Promise<number> {
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events`;
    return row!.n;
  }

  it("refuses every wrong or misplaced secret with 401 and stores nothing", async () => {
    const body = { sfx_order_id: 881, client_order_id: "SEC-2", order_status: "DELIVERED" };
    const before = await eventCount();
    const cases: [string, Record<string, string>][] = [
      [`/callbacks/${CALLBACK_SECRET}x`, {}],
      [`/callbacks/${CALLBACK_SECRET.slice(0, -1)}`, {}],
      [`/callbacks/${CALLBACK_SECRET.toUpperCase()}`, {}],
      [`/callbacks/${CALLBACK_SECRET}%00`, {}],
      [`/callbacks/%20${CALLBACK_SECRET}`, {}],
      [`/callbacks/${CALLBACK_SECRET}%C2%A0`, {}],
      [`/callbacks/${"s".repeat(10_000)}`, {}],
      [`/callbacks/${CALLBACK_SECRET}x/location`, {}],
      [`/callbacks?secret=${CALLBACK_SECRET}`, {}],
      [`/callbacks/location?secret=${CALLBACK_SECRET}`, {}],
      ["/callbacks", { "x-callback-secret": `${CALLBACK_SECRET}x` }],
      ["/callbacks", { "x-callback-secret": `${CALLBACK_SECRET}\u00a0` }],
      ["/callbacks", { "x-callback-secret": "" }],
      ["/callbacks", { authorization: `Bearer ${CALLBACK_SECRET}` }],
      ["/callbacks/location", { "x-callback-secret": CALLBACK_SECRET.slice(1) }],
      // A wrong secret in the path is not rescued by a right one in the header.
      ["/callbacks/wrong-wrong-wrong-wrong", { "x-callback-secret": CALLBACK_SECRET }],
    ];
    for (const [path, headers] of cases) {
      for (const method of ["POST", "PUT"]) {
        const res = await t.callback(body, { path, method, headers });
        assert.equal(res.status, 401, `${method} ${path.slice(0, 80)} ${JSON.stringify(headers)}`);
        const err = await json<Err>(res);
        assert.equal(err.error.code, "unauthorized");
        assert.ok(!JSON.stringify(err).includes(CALLBACK_SECRET.slice(0, 10)), "the answer does not echo the secret");
      }
    }
    assert.equal(await eventCount(), before);
  });
});

describe("safeEqual (both secrets go through it)", () => {
  it("is true exactly when the strings are equal", () => {
    const cases: [string, string, boolean][] = [
      ["", "", true],
      ["secret-value-0123", "secret-value-0123", true],
      ["secret-value-0123", "secret-value-0124", false],
      ["secret-value-0123", "secret-value-012", false],
      ["secret-value-012", "secret-value-0123", false],
      ["", "secret-value-0123", false],
      ["secret-value-0123", "", false],
      ["secret-value-0123\u0000", "secret-value-0123", false],
      ["Secret-value-0123", "secret-value-0123", false],
      ["é", "e\u0301", false],
      ["\ud83d\ude00", "\ud83d\ude00", true],
      // Lone surrogates must not collapse into one replacement character before comparing.
      ["\ud800", "\udbff", false],
      ["a\udc00", "a\ufffd", false],
      ["x".repeat(100_000), "x".repeat(100_000), true],
      ["x".repeat(100_000), `${"x".repeat(99_999)}y`, false],
    ];
    for (const [a, b, equal] of cases) {
      assert.equal(safeEqual(a, b), equal, `${JSON.stringify(a.slice(0, 20))} vs ${JSON.stringify(b.slice(0, 20))}`);
      assert.equal(safeEqual(b, a), equal, "symmetric");
    }
  });
});

describe("body size limits", () => {
  /** A JSON object of exactly `size` bytes. */
  const sized = (size: number, base: Record<string, unknown>) => {
    const empty = JSON.stringify({ ...base, pad: "" });
    return JSON.stringify({ ...base, pad: "p".repeat(size - Buffer.byteLength(empty)) });
  };

  it("callbacks: exactly 256 KiB is taken, one byte more is 413 with nothing stored", async () => {
    const ok = sized(CALLBACK_MAX_BYTES, { client_order_id: "SEC-SIZE-1", order_status: "ALLOTTED" });
    assert.equal(Buffer.byteLength(ok), CALLBACK_MAX_BYTES);
    assert.equal((await t.callback(ok)).status, 200);
    const over = sized(CALLBACK_MAX_BYTES + 1, { client_order_id: "SEC-SIZE-2", order_status: "ALLOTTED" });
    const res = await t.callback(over);
    assert.equal(res.status, 413);
    const err = await json<Err>(res);
    assert.equal(err.error.code, "payload_too_large");
    assert.match(err.error.message, /262144 bytes/);
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = 'SEC-SIZE-2'`;
    assert.equal(row!.n, 0);
  });

  it("/v1: exactly 1 MiB is read, one byte more is 413 payload_too_large; without the token, 401 before any reading", async () => {
    const ok = sized(API_BODY_MAX_BYTES, placeOrderBody() as unknown as Record<string, unknown>);
    const fits = await t.request("/v1/orders", { method: "POST", headers: { "content-type": "application/json" }, body: ok });
    assert.equal(fits.status, 202, "an unknown key is dropped; the body was read whole");
    const over = sized(API_BODY_MAX_BYTES + 1, placeOrderBody() as unknown as Record<string, unknown>);
    for (const headers of [{ "content-type": "application/json" }, { "content-type": "application/json", "content-length": String(API_BODY_MAX_BYTES + 1) }]) {
      const res = await t.request("/v1/orders", { method: "POST", headers, body: over });
      assert.equal(res.status, 413);
      const err = await json<Err>(res);
      assert.equal(err.error.code, "payload_too_large");
      assert.match(err.error.message, /1048576 bytes/);
    }
    const anonymous = await t.request("/v1/orders", { method: "POST", token: null, headers: { "content-type": "application/json" }, body: over });
    assert.equal(anonymous.status, 401);
  });

  it("over a real socket, 10 MB (declared or chunked) is refused early and the server keeps serving", async () => {
    const server = await t.listen();
    try {
      const chunk = new TextEncoder().encode("y".repeat(256 * 1024));
      for (const [path, headers] of [
        [`/callbacks/${CALLBACK_SECRET}`, {}],
        ["/v1/orders", { authorization: `Bearer ${API_TOKEN}` }],
      ] as const) {
        const declared = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "x".repeat(10 * 1024 * 1024) });
        assert.equal(declared.status, 413, `${path} declared`);
        assert.equal((await json<Err>(declared)).error.code, "payload_too_large");
        const stream = new ReadableStream<Uint8Array>({
          start(c) {
            for (let i = 0; i < 40; i++) c.enqueue(chunk);
            c.close();
          },
        });
        const chunked = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: stream, duplex: "half" } as RequestInit);
        assert.equal(chunked.status, 413, `${path} chunked`);
        assert.equal((await json<Err>(chunked)).error.code, "payload_too_large");
      }
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe("compressed /v1 bodies (Content-Encoding), over a real socket", () => {
  const compress: Record<string, (b: Buffer) => Buffer> = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync };
  let server: { url: string; close(): Promise<void> };
  before(async () => {
    server = await t.listen();
  });
  after(async () => {
    await server.close();
  });
  const post = (path: string, body: Uint8Array | string, encoding?: string) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${API_TOKEN}`, "content-type": "application/json", ...(encoding ? { "content-encoding": encoding } : {}) },
      body,
    });

  it("a gzip, deflate or br body is read as the same body sent plain", async () => {
    const body = JSON.stringify(placeOrderBody({ clientOrderId: "SEC-ZIP-1" }));
    const placed = await post("/v1/orders", new Uint8Array(gzipSync(Buffer.from(body))), "gzip");
    assert.equal(placed.status, 202, await placed.clone().text());
    assert.equal((await json<{ client_order_id: string }>(placed)).client_order_id, "SEC-ZIP-1");
    // The same body again is 200 with the order (another body would be 409): each coding
    // carried exactly the bytes sent plain.
    for (const [encoding, zip] of [...Object.entries(compress), ["x-gzip", gzipSync], ["identity", (b: Buffer) => b]] as const) {
      const again = await post("/v1/orders", new Uint8Array(zip(Buffer.from(body))), encoding);
      assert.equal(again.status, 200, `${encoding}: ${await again.clone().text()}`);
    }
    assert.equal((await post("/v1/orders", body)).status, 200);
    // A compressed body the schema refuses is named field by field, as a plain one.
    const bad = await post("/v1/orders/SEC-ZIP-1/cancel", new Uint8Array(gzipSync(Buffer.from(JSON.stringify({ reason: 5 })))), "gzip");
    assert.equal(bad.status, 422);
    assert.equal((await json<Err>(bad)).error.code, "validation_failed");
  });

  it("1 MiB holds once decompressed: a small body inflating past it is 413", async () => {
    const sized = (size: number) => {
      const base = placeOrderBody({ clientOrderId: "SEC-ZIP-FITS" }) as unknown as Record<string, unknown>;
      const empty = JSON.stringify({ ...base, pad: "" });
      return Buffer.from(JSON.stringify({ ...base, pad: "p".repeat(size - Buffer.byteLength(empty)) }));
    };
    assert.equal((await post("/v1/orders", new Uint8Array(gzipSync(sized(API_BODY_MAX_BYTES))), "gzip")).status, 202);
    for (const [encoding, zip] of Object.entries(compress)) {
      const res = await post("/v1/orders", new Uint8Array(zip(sized(API_BODY_MAX_BYTES + 1))), encoding);
      assert.equal(res.status, 413, encoding);
      const err = await json<Err>(res);
      assert.equal(err.error.code, "payload_too_large");
      assert.match(err.error.message, /1048576 bytes once decompressed/);
    }
    const bomb = await post("/v1/orders", new Uint8Array(gzipSync(Buffer.alloc(64 * 1024 * 1024))), "gzip");
    assert.equal(bomb.status, 413);
  });

  it("a corrupt stream is 400 naming its coding; another coding is 415 naming it", async () => {
    const whole = gzipSync(Buffer.from(JSON.stringify(placeOrderBody())));
    const cut = await post("/v1/orders", new Uint8Array(whole.subarray(0, whole.length - 10)), "gzip");
    assert.equal(cut.status, 400);
    const cutErr = await json<Err>(cut);
    assert.equal(cutErr.error.code, "invalid_json");
    assert.match(cutErr.error.message, /not valid gzip as its Content-Encoding says/);
    for (const encoding of ["zstd", "gzip, br"]) {
      const other = await post("/v1/orders", JSON.stringify(placeOrderBody()), encoding);
      assert.equal(other.status, 415, encoding);
      const err = await json<Err>(other);
      assert.equal(err.error.code, "unsupported_media_type");
      assert.match(err.error.message, new RegExp(`Content-Encoding "${encoding}".*gzip, deflate, br`));
    }
  });
});

// ------------------------------------------------------------------ secrets in logs

function captureLogger() {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
      done();
    },
  });
  return { log: createLogger({ level: "trace", destination: sink }), lines };
}

/** Runs jobs and waits for the emulator's callbacks until nothing is left to do. */
async function settle(app: TestApp, pair: EmulatorPair, maxMs = 10_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    await pair.emulator.callbacks.idle();
    await app.runJobs();
    await pair.emulator.callbacks.idle();
    const [row] = await app.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where attempts < max_attempts`;
    if (row!.n === 0 && pair.emulator.callbacks.pending() === 0) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error("jobs did not settle");
}

interface Flow {
  app: TestApp;
  pair: EmulatorPair;
  /** tracklane over a real socket; the emulator posts its callbacks here. */
  url: string;
  close(): Promise<void>;
}

async function startFlow(pairOptions: PairOptions): Promise<Flow> {
  const pair = await startEmulatorPair(pairOptions);
  const app = await createTestApp({ LOG_LEVEL: "trace", COMMAND_RETRY_BASE_MS: "5", COMMAND_MAX_ATTEMPTS: "6" }, { provider: pair.client });
  const server = await app.listen();
  pair.emulator.state.callbackUrls = [`${server.url}/callbacks/${CALLBACK_SECRET}`];
  return {
    app,
    pair,
    url: server.url,
    async close() {
      await server.close();
      await pair.close();
      await app.close();
    },
  };
}

/** Everything a merchant does, with right and wrong credentials, through the real socket where it matters. */
async function wholeFlow(flow: Flow): Promise<void> {
  const { app, pair, url } = flow;
  {
    const a = placeOrderBody();
    const b = placeOrderBody();
    for (const body of [a, b]) assert.equal((await app.request("/v1/orders", { method: "POST", json: body })).status, 202);
    // One transient provider failure on the way, so the retry path logs too.
    await pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 503, body: { detail: "busy" } });
    await settle(app, pair);
    const coid = a.order_details.client_order_id;
    for (const [action, body] of [["allot", { rider_id: 7 }], ["collect", { status: "COLLECTED", pickup_lat: 12.9, pickup_lng: 77.6 }], ["deliver", { status: "DELIVERED", delivery_latitude: 12.97, delivery_longitude: 77.59, is_partial_delivery: false }]] as const) {
      const res = await app.request(`/v1/sandbox/orders/${coid}/${action}`, { method: "POST", json: body });
      assert.equal(res.status, 200, `${action}: ${await res.clone().text()}`);
    }
    const other = b.order_details.client_order_id;
    assert.equal((await app.request(`/v1/orders/${other}`, { method: "PATCH", json: { order_details: { order_value: 300 } } })).status, 202);
    assert.equal((await app.request(`/v1/orders/${other}/dispatch-ready`, { method: "POST" })).status, 202);
    assert.equal((await app.request(`/v1/orders/${other}/cancel`, { method: "POST", json: { reason: "changed mind", user: "Customer" } })).status, 202);
    await settle(app, pair);
    assert.equal((await json<{ status: string }>(await app.request(`/v1/orders/${coid}`))).status, "DELIVERED");
    assert.equal((await json<{ status: string }>(await app.request(`/v1/orders/${other}`))).status, "CANCELLED");

    // AWBs come from the gateway with the same credentials.
    await app.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: coid } });
    await app.runJobs();
    await app.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: coid } });

    // Callbacks in every secret form, right and wrong, over the socket.
    const cb = (path: string, headers: Record<string, string> = {}) =>
      fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ client_order_id: coid, order_status: "DELIVERED", rider_latitude: 1, rider_longitude: 2 }) });
    assert.equal((await cb("/callbacks", { "x-callback-secret": CALLBACK_SECRET })).status, 200);
    assert.equal((await cb("/callbacks/location", { "x-callback-secret": CALLBACK_SECRET })).status, 200);
    assert.equal((await cb(`/callbacks/${CALLBACK_SECRET}/location`)).status, 200);
    assert.equal((await cb(`/callbacks/${CALLBACK_SECRET}x`)).status, 401);
    assert.equal((await cb("/callbacks", { "x-callback-secret": `${CALLBACK_SECRET}x` })).status, 401);
    assert.equal((await cb(`/callbacks/${CALLBACK_SECRET}/nope`)).status, 404);
    await fetch(`${url}/callbacks/${CALLBACK_SECRET}`, { method: "POST", body: "{not json" });

    // The API with right and wrong tokens, and the token where it does not belong.
    for (const [path, headers] of [
      ["/v1/orders", { authorization: `Bearer ${API_TOKEN}` }],
      ["/v1/orders", { authorization: `Bearer ${API_TOKEN}x` }],
      ["/v1/orders", { authorization: `Basic ${Buffer.from(`u:${API_TOKEN}`).toString("base64")}` }],
      [`/v1/orders?access_token=${API_TOKEN}`, {}],
      [`/v1/orders/${coid}/events`, { authorization: `Bearer ${API_TOKEN}` }],
      ["/v1/nope", { authorization: `Bearer ${API_TOKEN}` }],
    ] as const) {
      await fetch(`${url}${path}`, { headers });
    }
    await settle(app, pair);
  }
}

function assertNoSecret(lines: string[], secrets: Record<string, string>, expect: RegExp[]): void {
  const text = lines.join("\n");
  assert.ok(lines.length > 50, `the flows were logged (${lines.length} lines)`);
  for (const pattern of expect) assert.match(text, pattern);
  for (const [name, secret] of Object.entries(secrets)) {
    assert.ok(secret.length >= 12, `${name} is distinctive enough to search for`);
    const at = text.indexOf(secret);
    assert.equal(at, -1, `${name} reached the log: ${text.slice(Math.max(0, at - 300), at + 100)}`);
  }
}

describe("secrets never reach the logs", () => {
  it("token auth: API token, callback secret and provider token, through callbacks, API calls and order commands", async () => {
    const capture = captureLogger();
    const providerToken = `prov-token-${randomBytes(12).toString("hex")}`;
    const flow = await startFlow(
      {
        emulator: { tokens: [providerToken], logger: capture.log },
        client: { auth: { method: "token", token: providerToken }, logger: capture.log, timeoutMs: 1000 },
      },
    );
    try {
      await wholeFlow(flow);
      // A client holding a wrong token: refused, and that token is a secret too.
      const wrongToken = `${providerToken}-wrong`;
      const impostor = createProviderClient({ baseUrl: flow.pair.url, auth: { method: "token", token: wrongToken }, logger: capture.log, timeoutMs: 1000 });
      await assert.rejects(impostor.placeOrder(placeOrderBody()));
      flow.app.log.flush();
      assertNoSecret([...flow.app.logLines, ...capture.lines], { API_TOKEN, CALLBACK_SECRET, providerToken, wrongToken }, [
        /callbacks\/\[redacted\]/,
        /"msg":"command succeeded"/,
        /"msg":"provider call"/,
        /"msg":"emulator request"/,
        /"msg":"provider refused call"/,
      ]);
    } finally {
      await flow.close();
    }
  });

  it("OAuth2: client secret, its Basic credential and every issued access token, through expiry, renewal and a failed exchange", async () => {
    const capture = captureLogger();
    const clientId = `client-${randomBytes(6).toString("hex")}`;
    const clientSecret = `oauth-secret-${randomBytes(12).toString("hex")}`;
    const flow = await startFlow(
      {
        product: "quick_commerce",
        auth: "oauth",
        emulator: { clients: [{ clientId, clientSecret }], logger: capture.log },
        client: { auth: { method: "oauth", clientId, clientSecret, product: "quick_commerce" }, logger: capture.log, timeoutMs: 1000 },
      },
    );
    try {
      await wholeFlow(flow);
      // The access token expires on the provider's clock; the first renewal attempt fails.
      await flow.pair.control.advanceClock(3700);
      await flow.pair.control.addFault({ path: "/oauth/token/", times: 1, action: "status", status: 503, body: { detail: "token service down" } });
      const again = placeOrderBody();
      assert.equal((await flow.app.request("/v1/orders", { method: "POST", json: again })).status, 202);
      await settle(flow.app, flow.pair);
      assert.equal((await json<{ placement: { state: string } }>(await flow.app.request(`/v1/orders/${again.order_details.client_order_id}`))).placement.state, "placed");

      const wrongSecret = `${clientSecret}-wrong`;
      const impostor = createProviderClient({ baseUrl: flow.pair.url, auth: { method: "oauth", clientId, clientSecret: wrongSecret, product: "quick_commerce" }, logger: capture.log, timeoutMs: 1000 });
      await assert.rejects(impostor.placeOrder(placeOrderBody()));

      const accessTokens = [...flow.pair.emulator.state.oauthTokens.keys()];
      assert.ok(accessTokens.length >= 2, `tokens issued: ${accessTokens.length}`);
      flow.app.log.flush();
      assertNoSecret(
        [...flow.app.logLines, ...capture.lines],
        {
          API_TOKEN,
          CALLBACK_SECRET,
          clientSecret,
          basic: Buffer.from(`${clientId}:${clientSecret}`).toString("base64"),
          wrongSecret,
          wrongBasic: Buffer.from(`${clientId}:${wrongSecret}`).toString("base64"),
          ...Object.fromEntries(accessTokens.map((token, i) => [`access token ${i + 1}`, token])),
        },
        [/"msg":"provider oauth token obtained"/, /"msg":"provider refused token; renewing"/, /"msg":"command succeeded"/, /oauth\/token/],
      );
    } finally {
      await flow.close();
    }
  });
});
