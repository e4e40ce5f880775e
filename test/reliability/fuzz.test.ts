/**
 * Property-based fuzzing of every HTTP entry point (issue #6, PRODUCT.md §4, §6, §8): the
 * callback receiver, and every /v1 route, enumerated from the app so that a new route is
 * fuzzed without touching this file. Hostile input must get a designed 4xx in the one
 * error shape, never a 500 or a crash; a callback is acknowledged only when it is a JSON
 * object naming an order, and then the event really is in the log.
 *
 * FUZZ_RUNS multiplies the number of cases; FUZZ_SEED replays a failing run (fast-check
 * prints the seed and path of any counterexample).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { statusOf } from "../../src/http/errors.ts";
import type { ErrorCode } from "../../src/http/errors.ts";
import { CALLBACK_MAX_BYTES } from "../../src/http/routes/callbacks.ts";
import { decodeBody } from "../../src/http/charset.ts";
import { REJECTED_BODY_MAX } from "../../src/ingest/rejected.ts";
import { headOf } from "../../src/domain/text.ts";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";

const SCALE = Number(process.env.FUZZ_RUNS ?? "1") || 1;
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);
const runs = (n: number) => ({ numRuns: Math.round(n * SCALE), ...(SEED === undefined ? {} : { seed: SEED }) });

let t: TestApp;
const counts = { callback: 0, api: 0 };

before(async () => {
  // No batching wait: each fuzzed callback is alone anyway.
  t = await createTestApp({ INGEST_BATCH_WAIT_MS: "0" });
  // Orders that fuzzed path parameters can hit, so the routes get past "not found".
  const seeded = await t.callback({ sfx_order_id: 555, client_order_id: "FZ-1", order_status: "ALLOTTED" });
  assert.equal(seeded.status, 200);
  const placed = await t.request("/v1/orders", { method: "POST", json: placeOrderBody({ clientOrderId: "FZ-2" }) });
  assert.equal(placed.status, 202);
  await t.runJobs();
});

after(async () => {
  console.log(`fuzz: ${counts.callback} callback cases, ${counts.api} api cases`);
  await t.close();
});

// ------------------------------------------------------------------ building blocks

const enc = new TextEncoder();
const bytes = (s: string) => enc.encode(s);

const SVC_ID_FIELDS = ["svc_order_id", "sfx_order_id"];
const CLIENT_ID_FIELDS = ["client_order_id", "coid"];
/** The seeded orders' client ids: an `order_id` alone equal to one of them is that order's client id. */
const KNOWN_CLIENT_IDS = new Set(["FZ-1", "FZ-2"]);
const KNOWN_KEYS = [
  ...SVC_ID_FIELDS,
  ...CLIENT_ID_FIELDS,
  "order_status",
  "status",
  "event_time",
  "timestamp",
  "allot_time",
  "delivery_time",
  "rider_id",
  "rider_name",
  "rider_latitude",
  "rider_longitude",
  "latitude",
  "longitude",
  "track_url",
];

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
const weirdString = fc.oneof(
  fc.constantFrom(
    "", " ", "\t\n", "\u0000", "a\u0000b", "\ud800", "x\udfff", "\ud83d\ude00", "\u202e\u0645\u0631", "null", "1e400", "-0",
    "9007199254740993", "x".repeat(128), "y".repeat(129), "  FZ-7  ", "\u00a0", "\ufeff", "../..", "%00", "DELIVERED", "2026-11-22T10:00:00Z",
  ),
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.string({ unit: "grapheme", maxLength: 12 }),
  fc.array(fc.oneof(fc.string({ unit: "binary", maxLength: 3 }), loneSurrogate, fc.constant("\u0000")), { maxLength: 4 }).map((p) => p.join("")),
);
const weirdNumber = fc.oneof(
  fc.constantFrom(1e308, -1e308, -0, 2 ** 53 + 1, 2 ** 53 - 1, -1, 0.5, 5e-324, 1_795_000_000, 1_795_000_000_000),
  fc.double(),
  fc.integer(),
);
const scalar = fc.oneof(weirdString, weirdNumber, fc.boolean(), fc.constant(null));
const weirdKey = fc.oneof(
  fc.constantFrom(...KNOWN_KEYS, "", "\u0000", "\ud800", "a.b", "constructor", "toString"),
  fc.string({ maxLength: 8 }),
  fc.string({ unit: "binary", maxLength: 6 }),
);
const { value: jsonish } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    scalar,
    fc.array(tie("value"), { maxLength: 3 }),
    fc.dictionary(weirdKey, tie("value"), { maxKeys: 3 }),
  ),
}));
const plausibleId = fc.oneof(
  fc.stringMatching(/^FZ-[0-9]{1,4}$/),
  fc.nat({ max: 99_999 }),
  fc.constantFrom("555", 555, " FZ-1 ", "FZ-2"),
);
/** Callback-like objects: known field names (so ids, statuses and times are exercised) and noise. */
const callbackObject = fc.oneof(
  fc.record({ field: fc.constantFrom(...SVC_ID_FIELDS, ...CLIENT_ID_FIELDS), id: plausibleId, extra: fc.dictionary(fc.oneof(fc.constantFrom(...KNOWN_KEYS), weirdKey), fc.oneof(scalar, jsonish), { maxKeys: 6 }) })
    .map(({ field, id, extra }) => ({ ...extra, [field]: id })),
  fc.dictionary(fc.oneof(fc.constantFrom(...KNOWN_KEYS), weirdKey), fc.oneof(plausibleId, scalar, jsonish), { maxKeys: 8 }),
);
const numberLiteral = fc.constantFrom("1e400", "-1e400", "-0", "9007199254740993", "1e308", "1E-400", "123456789012345678901234567890", "0.0", "-0.0e0");

/** The bytes of a callback body, and what they are, for the failure message. */
interface RawBody {
  kind: string;
  raw: Uint8Array;
}

function injectFirst(json: string, entry: string): string {
  return json === "{}" ? `{${entry}}` : `{${entry},${json.slice(1)}`;
}

const rawBody: fc.Arbitrary<RawBody> = fc.oneof(
  { weight: 6, arbitrary: callbackObject.map((o) => ({ kind: "object", raw: bytes(JSON.stringify(o)) })) },
  {
    weight: 1,
    arbitrary: fc.tuple(callbackObject, fc.constantFrom(...KNOWN_KEYS), fc.oneof(plausibleId, scalar)).map(([o, k, v]) => ({
      kind: "duplicate key",
      raw: bytes(injectFirst(JSON.stringify(o), `${JSON.stringify(k)}:${JSON.stringify(v) ?? "null"}`)),
    })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(callbackObject, fc.constantFrom(...KNOWN_KEYS, "x", "__proto__"), numberLiteral).map(([o, k, n]) => ({
      kind: "number literal",
      raw: bytes(injectFirst(JSON.stringify(o), `${JSON.stringify(k)}:${n}`)),
    })),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(callbackObject, fc.constantFrom(...KNOWN_KEYS, "x"), fc.array(fc.oneof(loneSurrogate, fc.constant("\u0000"), fc.constant("ok")), { minLength: 1, maxLength: 3 })).map(
      ([o, k, parts]) => ({
        kind: "escaped surrogate/NUL",
        raw: bytes(injectFirst(JSON.stringify(o), `${JSON.stringify(k)}:"${parts.map((p) => (p === "ok" ? p : `\\u${p.charCodeAt(0).toString(16).padStart(4, "0")}`)).join("")}"`)),
      }),
    ),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 1, max: 80 }), fc.constantFrom("object", "array", "inside"), plausibleId).map(([n, how, id]) => {
      const leaf = JSON.stringify({ client_order_id: id, order_status: "ALLOTTED" });
      const text =
        how === "object" ? `${'{"x":'.repeat(n)}${leaf}${"}".repeat(n)}`
        : how === "array" ? `${"[".repeat(n)}${leaf}${"]".repeat(n)}`
        : injectFirst(leaf, `"deep":${"[".repeat(n)}1${"]".repeat(n)}`);
      return { kind: `nested ${how} ${n}`, raw: bytes(text) };
    }),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(callbackObject, fc.array(fc.tuple(fc.nat(), fc.constantFrom(0x80, 0xbf, 0xc0, 0xc3, 0xed, 0xf5, 0xff, 0xfe)), { minLength: 1, maxLength: 3 })).map(
      ([o, junk]) => {
        const good = [...bytes(JSON.stringify(o))];
        for (const [at, b] of junk) good.splice(at % (good.length + 1), 0, b);
        return { kind: "invalid UTF-8", raw: Uint8Array.from(good) };
      },
    ),
  },
  { weight: 1, arbitrary: fc.tuple(callbackObject, fc.nat()).map(([o, n]) => { const s = JSON.stringify(o); return { kind: "truncated", raw: bytes(s.slice(0, n % s.length)) }; }) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((v) => ({ kind: "any JSON", raw: bytes(JSON.stringify(v) ?? "null") })) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map((s) => ({ kind: "text", raw: bytes(s) })) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((raw) => ({ kind: "bytes", raw })) },
  { weight: 1, arbitrary: fc.constantFrom("", " ", "\ufeff", "null", "[]", "{}", "a=1&client_order_id=2").map((s) => ({ kind: "tiny", raw: bytes(s) })) },
  { weight: 1, arbitrary: plausibleId.map((id) => ({ kind: "BOM", raw: bytes(`\ufeff${JSON.stringify({ coid: id, status: "COLLECTED" })}`) })) },
  {
    weight: 1,
    arbitrary: fc.tuple(plausibleId, fc.integer({ min: REJECTED_BODY_MAX - 64, max: CALLBACK_MAX_BYTES + 64 }), fc.boolean()).map(([id, n, valid]) => ({
      kind: `large ${n}`,
      raw: bytes(valid ? JSON.stringify({ client_order_id: id, pad: "p".repeat(n) }) : `{"pad":"${"p".repeat(n)}`),
    })),
  },
);

// ------------------------------------------------------------------ the callback oracle

type Expected =
  | { status: 200; svc: string | null; client: string | null }
  | { status: 400; code: "invalid_json" }
  | { status: 422; code: "missing_order_id" }
  | { status: 413; code: "payload_too_large" }
  | { status: 401; code: "unauthorized" };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function containerDepth(v: unknown): number {
  if (typeof v !== "object" || v === null) return 0;
  return 1 + Math.max(0, ...Object.values(v).map(containerDepth));
}

function storable(v: unknown): boolean {
  const ok = (s: string) => !s.includes("\u0000") && s.isWellFormed();
  if (typeof v === "string") return ok(v);
  if (typeof v !== "object" || v === null) return true;
  return Object.entries(v).every(([k, child]) => ok(k) && storable(child));
}

const usableId = (v: unknown) =>
  typeof v === "string" ? v.trim() || null : typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? String(v) : null;
const unusable = (v: unknown) => v !== undefined && v !== null && typeof v !== "string";

/** PRODUCT.md §4: the first alias holding a non-blank string or a non-negative integer; "bad" if only unusable ones. */
function firstId(body: Record<string, unknown>, fields: string[]): string | null | "bad" {
  for (const f of fields) {
    const id = usableId(body[f]);
    if (id !== null) return id;
  }
  return fields.some((f) => unusable(body[f])) ? "bad" : null;
}

/**
 * PRODUCT.md §4 and §10: which ids a body names. `order_id` is the provider's id beside a
 * client id, the client's beside a provider id, ignored beside both, and alone the client
 * id of a known order or else a provider id. A role filled only by unusable values, or by
 * an id longer than 128 characters, is empty; "bad" when both roles are.
 */
function identity(body: Record<string, unknown>): { svc: string | null; client: string | null } | "bad" {
  let svc = firstId(body, SVC_ID_FIELDS);
  let client = firstId(body, CLIENT_ID_FIELDS);
  const o = usableId(body["order_id"]);
  const svcFree = svc === null || svc === "bad";
  const clientFree = client === null || client === "bad";
  if (o !== null) {
    if (svcFree && clientFree) {
      if (KNOWN_CLIENT_IDS.has(o) && client === null) client = o;
      else svc = o;
    } else if (svcFree) {
      if (o !== client) svc = o;
    } else if (clientFree) {
      if (o !== svc) client = o;
    }
  } else if (svc === null && unusable(body["order_id"])) {
    svc = "bad";
  }
  // An unusable id (a bad value, or longer than 128 characters) is passed over beside a
  // usable one of the other role; with none usable the body names no order.
  const usable = (id: string | null) => (id !== null && id !== "bad" && id.length <= 128 ? id : null);
  const [svcId, clientId] = [usable(svc), usable(client)];
  if (svcId === null && clientId === null) return "bad";
  return { svc: svcId, client: clientId };
}

function expectedFor(raw: Uint8Array): Expected {
  const invalid = { status: 400, code: "invalid_json" } as const;
  if (raw.byteLength > CALLBACK_MAX_BYTES) return { status: 413, code: "payload_too_large" };
  let body: unknown;
  try {
    body = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(raw));
  } catch {
    return invalid;
  }
  if (!isObject(body) || containerDepth(body) > 32 || !storable(body)) return invalid;
  const ids = identity(body);
  if (ids === "bad") return { status: 422, code: "missing_order_id" };
  return { status: 200, ...ids };
}

// ------------------------------------------------------------------ response checks

const DESIGNED_503 = new Set(["provider_unavailable", "awb_pool_empty"]);
type ErrorJson = { error: { code: string; message: string; request_id: string; issues?: { path: string; message: string }[] } };

/** What a message must say, per code, so that it names the problem rather than the status. */
const MESSAGE_NAMES: Partial<Record<ErrorCode, RegExp>> = {
  invalid_json: /JSON|UTF-8|UTF-16|charset|object|nested|NUL|surrogate|Content-Encoding/,
  invalid_parameter: /invalid|cursor/,
  validation_failed: /invalid body|nothing to edit/,
  missing_order_id: /order|svc_order_id|client_order_id|coid/,
  unauthorized: /token|secret|Authorization/,
  not_found: /no route for/,
  order_not_found: /no order with/,
  payload_too_large: /larger than|too large/,
  unsupported_media_type: /[Cc]ontent-([Tt]ype|[Ee]ncoding)/,
  provider_unavailable: /provider/,
};

/** Every non-2xx: a designed status, the one error shape, a code of the closed set, a useful message. */
async function checkResponse(res: Response, label: string): Promise<ErrorJson | unknown> {
  const text = await res.text();
  const where = `${label} -> ${res.status} ${text.slice(0, 300)}`;
  assert.ok(res.status < 500 || (res.status === 503 && DESIGNED_503.has((JSON.parse(text) as ErrorJson).error.code)), `server error: ${where}`);
  if (res.status < 400) {
    if (text === "") return null;
    const type = res.headers.get("content-type") ?? "";
    // The export streams NDJSON (a JSON object a line) or CSV: each must be well formed.
    if (type.startsWith("application/x-ndjson")) return text.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as unknown);
    if (type.startsWith("text/csv")) {
      assert.match(text, /^client_order_id,/, where);
      return text;
    }
    return JSON.parse(text) as unknown;
  }
  assert.match(res.headers.get("content-type") ?? "", /^application\/json/, where);
  const body = JSON.parse(text) as ErrorJson;
  assert.deepEqual(Object.keys(body), ["error"], where);
  const { code, message, request_id: requestId, issues } = body.error;
  assert.equal(statusOf(code as ErrorCode), res.status, `code outside the closed set or with another status: ${where}`);
  assert.equal(typeof message, "string", where);
  assert.ok(message.length >= 10, `message too short to name the problem: ${where}`);
  assert.doesNotMatch(message, /^(bad request|unsupported media type|payload too large|internal error|not found)$/i, where);
  const names = MESSAGE_NAMES[code as ErrorCode];
  if (names) assert.match(message, names, where);
  assert.ok(typeof requestId === "string" && requestId.length > 0, where);
  assert.equal(requestId, res.headers.get("x-request-id"), where);
  if (issues) {
    assert.ok(issues.length > 0, where);
    for (const i of issues) assert.ok(message.includes(i.path), `message does not name ${i.path}: ${where}`);
  }
  return body;
}

/** The newest rejected_callbacks id seen: cases run one at a time, so each sees only its own rows. */
let lastRejectedId = 0;

// ------------------------------------------------------------------ callbacks

type Route = "path" | "path-location" | "header" | "header-location" | "wrong-secret" | "no-secret";
const envelope = fc.record({
  method: fc.constantFrom("POST", "PUT"),
  route: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom<Route>("path", "path-location", "header", "header-location") },
    { weight: 1, arbitrary: fc.constantFrom<Route>("wrong-secret", "no-secret") },
  ),
  contentType: fc.constantFrom(
    undefined,
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/octet-stream",
  ),
});

function callbackRequest(route: Route, contentType: string | undefined): { path: string; headers: Record<string, string> } {
  const headers: Record<string, string> = contentType === undefined ? {} : { "content-type": contentType };
  switch (route) {
    case "path":
      return { path: `/callbacks/${CALLBACK_SECRET}`, headers };
    case "path-location":
      return { path: `/callbacks/${CALLBACK_SECRET}/location`, headers };
    case "header":
      return { path: "/callbacks", headers: { ...headers, "x-callback-secret": CALLBACK_SECRET } };
    case "header-location":
      return { path: "/callbacks/location", headers: { ...headers, "x-callback-secret": CALLBACK_SECRET } };
    case "wrong-secret":
      return { path: `/callbacks/${CALLBACK_SECRET}x`, headers };
    case "no-secret":
      return { path: "/callbacks", headers };
  }
}

describe("fuzz: callback receiver", () => {
  it("answers every body as §4 says: 200 only for an object naming an order (then stored), else a recorded, bounded 4xx", async () => {
    await fc.assert(
      fc.asyncProperty(envelope, rawBody, async ({ method, route, contentType }, body) => {
        counts.callback++;
        const { path, headers } = callbackRequest(route, contentType);
        const label = `${method} ${route} ct=${contentType} ${body.kind} ${JSON.stringify(new TextDecoder().decode(body.raw.slice(0, 200)))}`;
        const res = await t.app.request(path, { method, headers, body: body.raw });
        const answer = await checkResponse(res, label);
        const expected: Expected = route === "wrong-secret" || route === "no-secret" ? { status: 401, code: "unauthorized" } : expectedFor(body.raw);
        assert.equal(res.status, expected.status, `${label}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(answer)}`);

        if (expected.status === 200) {
          const ok = answer as { ok: boolean; event_id: string; duplicate: boolean };
          assert.equal(ok.ok, true);
          const parsed = JSON.parse(new TextDecoder().decode(body.raw)) as unknown;
          const [row] = await t.database.sql<{ kind: string; svc_order_id: string | null; client_order_id: string | null; same: boolean }[]>`
            select kind, svc_order_id, client_order_id, payload = ${JSON.stringify(parsed)}::text::jsonb as same
            from order_events where id = ${ok.event_id}`;
          assert.ok(row, `acknowledged event ${ok.event_id} is not in order_events: ${label}`);
          assert.deepEqual([row.svc_order_id, row.client_order_id], [expected.svc, expected.client], label);
          assert.ok(row.same, `stored payload differs from the body: ${label}`);
          if (route.endsWith("location")) assert.equal(row.kind, "location", label);
        }

        // Only a 400/422 records its body. Any record made by another answer would show up
        // here as an extra row, or in the final check below.
        if (expected.status === 400 || expected.status === 422) {
          const rejected = await t.database.sql<{ id: number; reason: string; body: string; body_bytes: number; truncated: boolean }[]>`
            select id::int, reason, body, body_bytes, truncated from rejected_callbacks where id > ${lastRejectedId} order by id`;
          lastRejectedId = rejected.at(-1)?.id ?? lastRejectedId;
          assert.equal(rejected.length, 1, `one rejected callback, ${rejected.length} records since the last: ${label}`);
          const latest = rejected[0]!;
          assert.equal(latest.reason, expected.code, label);
          assert.equal(latest.body_bytes, body.raw.byteLength, label);
          assert.ok(latest.body.length <= REJECTED_BODY_MAX, `stored rejected body is ${latest.body.length} characters: ${label}`);
          // Kept as it was read: in the charset its byte-order mark or label names when it
          // reads so (FF FE 7B 7D is UTF-16LE: "絻"), else as UTF-8 with U+FFFD for what is not.
          const read = decodeBody(body.raw, contentType);
          const kept = (read.ok ? read.text : new TextDecoder().decode(body.raw)).replaceAll("\u0000", "\uFFFD");
          assert.equal(latest.truncated, kept.length > REJECTED_BODY_MAX, label);
          assert.equal(latest.body, headOf(kept, REJECTED_BODY_MAX), label);
        }
      }),
      runs(1800),
    );
    const [stray] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from rejected_callbacks where id > ${lastRejectedId}`;
    assert.equal(stray!.n, 0, "no rejected-callback record without a 400/422");
  });

  it("refuses a 10 MB body with 413 and stores nothing", async () => {
    const [before] = await t.database.sql<{ events: number; rejected: number }[]>`
      select (select count(*)::int from order_events) as events, (select count(*)::int from rejected_callbacks) as rejected`;
    const huge = bytes(JSON.stringify({ client_order_id: "FZ-HUGE", pad: "x".repeat(10 * 1024 * 1024) }));
    for (const headers of [{ "content-type": "application/json" }, { "content-type": "application/json", "content-length": String(huge.byteLength) }]) {
      counts.callback++;
      const res = await t.app.request(`/callbacks/${CALLBACK_SECRET}`, { method: "POST", headers, body: huge });
      assert.equal(res.status, 413);
      assert.equal(((await checkResponse(res, "10 MB callback")) as ErrorJson).error.code, "payload_too_large");
    }
    const [afterwards] = await t.database.sql<{ events: number; rejected: number }[]>`
      select (select count(*)::int from order_events) as events, (select count(*)::int from rejected_callbacks) as rejected`;
    assert.deepEqual(afterwards, before);
  });
});

// ------------------------------------------------------------------ the /v1 API

interface V1Route {
  method: string;
  path: string;
}

function v1Routes(): V1Route[] {
  const seen = new Map<string, V1Route>();
  for (const r of t.app.routes) {
    if (!r.path.startsWith("/v1/") || r.method === "ALL") continue;
    seen.set(`${r.method} ${r.path}`, { method: r.method, path: r.path });
  }
  return [...seen.values()];
}

/** Percent-encodes what it can; a lone surrogate goes in raw (the URL parser then decides). */
const encode = (s: string) => {
  try {
    return encodeURIComponent(s);
  } catch {
    return s;
  }
};

const pathParam = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "FZ-1", "FZ-2", "555", "%00", "a%00b", "%2F", "a%2Fb", "..", ".", "%2E%2E", "%ZZ", "%", "%E0%A4", "%C0%AF", "%ED%A0%80",
      "x".repeat(128), "x".repeat(129), "x".repeat(5000), "%C3%BC", "ü", "😀", "%F0%9F%98%80", "a%20b", "%3F", "%23", "%0A", "%0D%0A", "%09",
      "by-svc-id", "allot", "-1", "1e400", "null", "undefined", "%5C", "%7B%7D", "%EF%BB%BF",
    ),
  },
  { weight: 1, arbitrary: weirdString.map(encode) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 10 }).map((s) => s.replace(/[/?#%\\]/g, "_")) },
);

const queryKey = fc.constantFrom("limit", "cursor", "status", "store_code", "updated_after", "count", "mode", "client_order_id", "token", "access_token", "x", "", "limit[]", "a.b");
const queryValue = fc.oneof(
  fc.constantFrom(
    "", "0", "-0", "-1", "1", "1.5", "500", "501", "1001", "1e400", "1e308", "9007199254740993", "NaN", "Infinity", "%00", "%ZZ", "%", "a%26b",
    "DELIVERED", "LOST", "2026-11-01T00:00:00Z", "2026-13-45T00:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "yesterday",
    "eyJpZCI6MX0", "eyJpZCI6IjEifQ", "eyJtIjoiMSIsImkiOjF9", "bm90LWEtY3Vyc29y", "%E0%A4", "😀", "x".repeat(300), "pool", "fresh",
  ),
  weirdString.map(encode),
);
const queryString = fc.oneof(
  { weight: 4, arbitrary: fc.array(fc.tuple(queryKey, queryValue), { maxLength: 4 }).map((kv) => (kv.length ? `?${kv.map(([k, v]) => `${k}=${v}`).join("&")}` : "")) },
  { weight: 1, arbitrary: fc.constantFrom("?", "?&&&", "?=", "?==1", "?limit", "?%", "?%00=%00", "?limit=1&limit=2", "?status[]=DELIVERED", "?a=1;b=2") },
);

/** A body shaped like what the route expects, with one field made strange. */
const shapedBody = fc.oneof(
  fc.tuple(
    fc.constantFrom(
      ["store_code"], ["order_details", "client_order_id"], ["order_details", "order_value"], ["order_details", "paid"], ["order_details", "payment_mode"],
      ["customer_details", "name"], ["customer_details", "latitude"], ["customer_details", "contact_number"], ["product_details"], ["product_details", "0", "quantity"],
      ["product_details", "0", "price"], ["pickup_contact_number"], ["misc"], ["misc", "pickup_otp"], ["extra"], ["order_details"],
    ),
    fc.oneof(scalar, jsonish),
  ).map(([path, value]) => {
    const body = placeOrderBody() as unknown as Record<string, unknown>;
    let at: Record<string, unknown> = body;
    for (const k of path.slice(0, -1)) at = (at[k] ??= {}) as Record<string, unknown>;
    at[path.at(-1)!] = value;
    return body;
  }),
  fc.record({ order_details: fc.record({ payment_mode: scalar, order_value: fc.oneof(weirdNumber, scalar) }, { requiredKeys: [] }), product_details: jsonish }, { requiredKeys: [] }),
  fc.record({ reason: fc.oneof(weirdString, scalar), user: fc.oneof(fc.constantFrom("Customer", "Seller", "Rider", "customer", "Robot"), scalar) }, { requiredKeys: [] }),
  fc.record({ shipment_ready_timestamp: fc.oneof(weirdNumber, weirdString, scalar) }),
  fc.record({ rider_id: scalar, latitude: weirdNumber, longitude: weirdNumber, status: weirdString, count: weirdNumber, mode: weirdString, client_order_id: fc.oneof(plausibleId, scalar) }, { requiredKeys: [] }),
);

interface ApiBody {
  kind: string;
  raw: Uint8Array | undefined;
}
const apiBody: fc.Arbitrary<ApiBody> = fc.oneof(
  { weight: 4, arbitrary: shapedBody.map((b) => ({ kind: "shaped", raw: bytes(JSON.stringify(b)) })) },
  { weight: 2, arbitrary: jsonish.map((v) => ({ kind: "any value", raw: bytes(JSON.stringify(v) ?? "null") })) },
  { weight: 1, arbitrary: rawBody.map((b) => ({ kind: `callback-like ${b.kind}`, raw: b.raw })) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: 1, max: 5000 }), fc.constantFrom("[", '{"misc":', '{"reason":', '{"x":')).map(([n, open]) => ({
      kind: `nested ${open} ${n}`,
      raw: bytes(`${open.repeat(n)}1${(open === "[" ? "]" : "}").repeat(n)}`),
    })),
  },
  { weight: 1, arbitrary: fc.constantFrom(undefined, "", " ", "null", "{", "}", "[]", "{}", '{"a":1,"a":2}', "\ufeff{}", "a=1&b=2").map((s) => ({ kind: "tiny", raw: s === undefined ? undefined : bytes(s) })) },
);
const apiContentType = fc.constantFrom(
  undefined,
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "APPLICATION/JSON",
  "application/vnd.api+json",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/jsonx",
  "*/*",
);

describe("fuzz: every /v1 route", () => {
  it("answers garbage paths, queries, bodies and content types with a designed 4xx in the error shape", async () => {
    const routes = v1Routes();
    assert.ok(routes.length >= 15, `found only ${routes.length} /v1 routes`);
    const hit = new Set<string>();
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.array(pathParam, { minLength: 4, maxLength: 4 }),
        queryString,
        apiBody,
        apiContentType,
        fc.oneof({ weight: 12, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom("DELETE", "PUT", "OPTIONS", "PATCH", "POST") }),
        async (route, params, query, body, contentType, otherMethod) => {
          counts.api++;
          hit.add(`${route.method} ${route.path}`);
          let i = 0;
          const path = route.path.replace(/:[A-Za-z_]+/g, () => params[i++]!) + query;
          const method = otherMethod ?? route.method;
          const headers: Record<string, string> = contentType === undefined ? {} : { "content-type": contentType };
          const withBody = method !== "GET" && body.raw !== undefined;
          const label = `${method} ${path.slice(0, 300)} ct=${contentType} ${body.kind} ${withBody ? JSON.stringify(new TextDecoder().decode(body.raw!.slice(0, 200))) : "(no body)"}`;
          const res = await t.request(path, { method, headers, body: withBody ? body.raw : undefined });
          await checkResponse(res, label);
        },
      ),
      runs(1500),
    );
    assert.equal(hit.size, routes.length, "every route was fuzzed");
  });

  it("refuses a 10 MB body on every /v1 route that takes one with 413 payload_too_large", async () => {
    const huge = bytes(JSON.stringify({ ...placeOrderBody(), pad: "x".repeat(10 * 1024 * 1024) }));
    for (const route of v1Routes().filter((r) => r.method !== "GET")) {
      counts.api++;
      const path = route.path.replace(/:[A-Za-z_]+/g, (p) => (p === ":action" ? "allot" : "FZ-1"));
      const res = await t.request(path, { method: route.method, headers: { "content-type": "application/json" }, body: huge });
      assert.equal(res.status, 413, `${route.method} ${path}`);
      assert.equal(((await checkResponse(res, `10 MB ${route.method} ${path}`)) as ErrorJson).error.code, "payload_too_large");
    }
  });

  it("names the bad field for text PostgreSQL cannot store, at every place input enters (path, query, body)", async () => {
    const cases: [string, RequestInit & { json?: unknown }, number, string, string][] = [
      ["/v1/orders/%00", {}, 400, "invalid_parameter", "order"],
      ["/v1/orders/by-svc-id/a%00/events", {}, 400, "invalid_parameter", "svc_order_id"],
      ["/v1/orders/%00/cancel", { method: "POST", json: { reason: "x", user: "Seller" } }, 400, "invalid_parameter", "order"],
      ["/v1/orders?store_code=%00", {}, 400, "invalid_parameter", "store_code"],
      ["/v1/orders", { method: "POST", json: { ...placeOrderBody(), store_code: "a\u0000b" } }, 422, "validation_failed", "store_code"],
      ["/v1/orders", { method: "POST", json: { ...placeOrderBody(), pickup_contact_number: "9\ud800" } }, 422, "validation_failed", "pickup_contact_number"],
      ["/v1/orders/FZ-2/cancel", { method: "POST", json: { reason: "a\udfff", user: "Seller" } }, 422, "validation_failed", "reason"],
      ["/v1/orders/FZ-2", { method: "PATCH", json: { order_details: { payment_mode: "\u0000" } } }, 422, "validation_failed", "order_details.payment_mode"],
      ["/v1/orders/FZ-2/dispatch-ready", { method: "POST", json: { shipment_ready_timestamp: "\u0000" } }, 422, "validation_failed", "shipment_ready_timestamp"],
    ];
    for (const [path, init, status, code, field] of cases) {
      counts.api++;
      const res = await t.request(path, init);
      assert.equal(res.status, status, `${path} ${JSON.stringify(init.json)}`);
      const body = (await checkResponse(res, path)) as ErrorJson;
      assert.equal(body.error.code, code);
      assert.deepEqual(body.error.issues?.map((i) => i.path), [field], JSON.stringify(body));
      assert.match(body.error.message, /NUL|surrogate/);
    }
  });

  it("refuses bodies nested deeper than 32 levels (422), instead of overflowing the stack", async () => {
    counts.api++;
    const deep = JSON.parse(`${'{"a":'.repeat(3000)}1${"}".repeat(3000)}`) as unknown;
    const res = await t.request("/v1/orders", { method: "POST", json: { ...placeOrderBody(), misc: deep } });
    assert.equal(res.status, 422);
    const body = (await checkResponse(res, "deep misc")) as ErrorJson;
    assert.deepEqual(body.error.issues?.map((i) => i.path), ["misc"]);
    assert.match(body.error.message, /nested deeper than 32/);
  });

  it("answers a body of the wrong media type with 415 unsupported_media_type", async () => {
    for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      counts.api++;
      const res = await t.request("/v1/orders", { method: "POST", headers: { "content-type": contentType }, body: bytes(JSON.stringify(placeOrderBody())) });
      assert.equal(res.status, 415, contentType);
      const body = (await checkResponse(res, contentType)) as ErrorJson;
      assert.equal(body.error.code, "unsupported_media_type");
      assert.match(body.error.message, /application\/json/);
    }
  });

  it("kept serving and logged no server error through all of it", async () => {
    const errors = t.logLines.filter((l) => {
      const line = JSON.parse(l) as { level: number; code?: string };
      return line.level >= 50 && !DESIGNED_503.has(line.code ?? "");
    });
    assert.deepEqual(errors.slice(0, 3), []);
    assert.equal((await t.request("/healthz", { token: null })).status, 200);
    assert.equal((await t.request("/v1/orders/FZ-1")).status, 200);
  });
});
