import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { brotliCompressSync, deflateSync, gzipSync } from "node:zlib";
import { CALLBACK_MAX_BYTES } from "../../src/http/routes/callbacks.ts";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const status = (n: number, extra: Record<string, unknown> = {}) => ({
  sfx_order_id: 9000 + n,
  client_order_id: `CB-${n}`,
  order_status: "ALLOTTED",
  rider_name: "Asha",
  allot_time: "2026-11-22T10:00:00Z",
  ...extra,
});

/** tracklane_callbacks_total{result} as /metrics shows it now (0 before the first). */
async function callbacksCounted(result: string): Promise<number> {
  const text = await (await t.request("/metrics", { token: null })).text();
  const m = text.match(new RegExp(`^tracklane_callbacks_total\\{result="${result}"\\} (\\d+)$`, "m"));
  return m ? Number(m[1]) : 0;
}

async function count(table: string): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from ${t.database.sql(table)}`;
  return row!.n;
}

describe("callbacks: happy path", () => {
  it("stores a new event and answers 200 with its id after commit", async () => {
    const res = await t.callback(status(1));
    assert.equal(res.status, 200);
    const body = (await res.json()) as { ok: boolean; event_id: string; duplicate: boolean };
    assert.equal(body.ok, true);
    assert.equal(body.duplicate, false);
    const [row] = await t.database.sql`select kind, svc_order_id, client_order_id, provider_status, occurred_at from order_events where id = ${body.event_id}`;
    assert.deepEqual(
      { ...row, occurred_at: (row!.occurred_at as Date).toISOString() },
      { kind: "status", svc_order_id: "9001", client_order_id: "CB-1", provider_status: "ALLOTTED", occurred_at: "2026-11-22T10:00:00.000Z" },
    );
  });

  it("answers the same event again with the first id and duplicate: true, storing nothing, counted as a duplicate", async () => {
    const [storedBefore, duplicatesBefore] = [await callbacksCounted("stored"), await callbacksCounted("duplicate")];
    const first = (await (await t.callback(status(2))).json()) as { event_id: string };
    const before = await count("order_events");
    // Same content, keys in another order: the same event.
    const reordered = Object.fromEntries(Object.entries(status(2)).reverse());
    const again = await t.callback(reordered);
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), { ok: true, event_id: first.event_id, duplicate: true });
    assert.equal(await count("order_events"), before);
    // /metrics tells stored from duplicate: a sender that repeats everything shows as such.
    assert.deepEqual([await callbacksCounted("stored"), await callbacksCounted("duplicate")], [storedBefore + 1, duplicatesBefore + 1]);
  });

  it("takes PUT as well as POST, and the secret in X-Callback-Secret on /callbacks", async () => {
    const put = await t.callback(status(3), { method: "PUT" });
    assert.equal(put.status, 200);
    const header = await t.callback(status(4), { path: "/callbacks", headers: { "x-callback-secret": CALLBACK_SECRET } });
    assert.equal(header.status, 200);
    const headerLocation = await t.callback(
      { sfx_order_id: 9004, latitude: 12.9, longitude: 77.6 },
      { path: "/callbacks/location", headers: { "x-callback-secret": CALLBACK_SECRET } },
    );
    assert.equal(headerLocation.status, 200);
  });

  it("stores the /location path as a location event even when the body has a status", async () => {
    const res = await t.callback(status(5, { rider_latitude: 12.97, rider_longitude: 77.59 }), {
      path: `/callbacks/${CALLBACK_SECRET}/location`,
    });
    const { event_id } = (await res.json()) as { event_id: string };
    const [row] = await t.database.sql`select kind, provider_status from order_events where id = ${event_id}`;
    assert.deepEqual({ ...row }, { kind: "location", provider_status: null });
  });

  it("takes every callback path with a trailing slash too, as the provider writes its own paths", async () => {
    const kindOf = async (res: Response) => {
      assert.equal(res.status, 200, await res.clone().text());
      const { event_id } = (await res.json()) as { event_id: string };
      return (await t.database.sql<{ kind: string }[]>`select kind from order_events where id = ${event_id}`)[0]!.kind;
    };
    const located = { rider_latitude: 12.97, rider_longitude: 77.59 };
    assert.equal(await kindOf(await t.callback(status(21), { path: `/callbacks/${CALLBACK_SECRET}/` })), "status");
    assert.equal(await kindOf(await t.callback(status(22, located), { path: `/callbacks/${CALLBACK_SECRET}/location/` })), "location");
    const header = { "x-callback-secret": CALLBACK_SECRET };
    assert.equal(await kindOf(await t.callback(status(23), { path: "/callbacks/", headers: header })), "status");
    assert.equal(await kindOf(await t.callback(status(24, located), { path: "/callbacks/location/", headers: header })), "location");
    assert.equal((await t.callback(status(25), { path: "/callbacks/wrong-secret-0123456789/" })).status, 401);
  });

  it("detects a location event from coordinates without a status", async () => {
    const res = await t.callback({ svc_order_id: "9006", rider_latitude: "12.5", rider_longitude: "77.1" });
    const { event_id } = (await res.json()) as { event_id: string };
    const [row] = await t.database.sql`select kind from order_events where id = ${event_id}`;
    assert.equal(row!.kind, "location");
  });

  it("queues each new event for projection with one drain job per flush; a duplicate queues nothing", async () => {
    const arrived = (i: number) => status(7, { order_status: "ARRIVED", arrival_time: `2026-11-22T10:0${i}:00Z` });
    const queued = () => t.database.sql<{ event_id: string; svc_order_id: string; client_order_id: string }[]>`
      select q.event_id::text, e.svc_order_id, e.client_order_id
      from projection_queue q join order_events e on e.id = q.event_id where e.svc_order_id = '9007'`;
    const drainJobs = async () => {
      const [row] = await t.database.sql<{ n: number }[]>`
        select count(*)::int as n from graphile_worker.jobs where task_identifier = 'projection__drain'`;
      return row!.n;
    };
    const jobsBefore = await drainJobs();
    const ids = await Promise.all([1, 2, 3].map(async (i) => ((await (await t.callback(arrived(i))).json()) as { event_id: string }).event_id));
    const rows = await queued();
    assert.deepEqual(rows.map((r) => r.event_id).sort(), [...ids].sort());
    for (const r of rows) assert.deepEqual({ svc: r.svc_order_id, coid: r.client_order_id }, { svc: "9007", coid: "CB-7" });
    // One job per flush: 1 to 3, as the group commit batched the three.
    const jobs = (await drainJobs()) - jobsBefore;
    assert.ok(jobs >= 1 && jobs <= 3, `${jobs} drain jobs`);

    const duplicate = await t.callback(arrived(2));
    assert.equal(((await duplicate.json()) as { duplicate: boolean }).duplicate, true);
    assert.equal((await queued()).length, 3);
    assert.equal((await drainJobs()) - jobsBefore, jobs);

    await t.runJobs();
    assert.equal((await queued()).length, 0);
    const [order] = await t.database.sql`select status, event_count from orders where svc_order_id = '9007'`;
    assert.equal(order!.status, "ARRIVED");
  });
});

describe("callbacks: refusals", () => {
  it("401 for a wrong or missing secret, storing nothing", async () => {
    const before = [await count("order_events"), await count("rejected_callbacks")];
    for (const path of ["/callbacks/not-the-secret-not-the-secret", "/callbacks", "/callbacks/location"]) {
      const res = await t.callback(status(10), { path });
      assert.equal(res.status, 401, path);
      const body = (await res.json()) as { error: { code: string } };
      assert.equal(body.error.code, "unauthorized");
    }
    const wrongHeader = await t.callback(status(10), { path: "/callbacks", headers: { "x-callback-secret": "nope" } });
    assert.equal(wrongHeader.status, 401);
    assert.deepEqual([await count("order_events"), await count("rejected_callbacks")], before);
  });

  it("400 invalid_json for a body that is not JSON, or not an object, and records it", async () => {
    for (const body of ["{not json", "[1,2]", '"a string"', "42", "null", ""]) {
      const res = await t.callback(body);
      assert.equal(res.status, 400, body);
      const err = (await res.json()) as { error: { code: string; message: string; request_id: string } };
      assert.equal(err.error.code, "invalid_json");
      assert.ok(err.error.request_id.length > 0);
      const [row] = await t.database.sql`select reason, body from rejected_callbacks order by id desc limit 1`;
      assert.deepEqual({ ...row }, { reason: "invalid_json", body });
    }
  });

  it("400 for invalid UTF-8, recorded with replacement characters", async () => {
    const res = await t.callback(new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]));
    assert.equal(res.status, 400);
    const [row] = await t.database.sql`select reason, body_bytes from rejected_callbacks order by id desc limit 1`;
    assert.deepEqual({ ...row }, { reason: "invalid_json", body_bytes: 8 });
  });

  it("422 missing_order_id naming the accepted fields, and records it", async () => {
    const res = await t.callback({ order_status: "DELIVERED" });
    assert.equal(res.status, 422);
    const err = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(err.error.code, "missing_order_id");
    assert.match(err.error.message, /svc_order_id.*client_order_id/);
    const [row] = await t.database.sql`select reason from rejected_callbacks order by id desc limit 1`;
    assert.equal(row!.reason, "missing_order_id");
  });

  it("422 for an order id of the wrong type, naming the field", async () => {
    const res = await t.callback({ sfx_order_id: { nested: true }, order_status: "DELIVERED" });
    assert.equal(res.status, 422);
    const err = (await res.json()) as { error: { message: string } };
    assert.match(err.error.message, /sfx_order_id/);
  });

  it("400 for text PostgreSQL cannot store (NUL), never a 500", async () => {
    const res = await t.callback('{"svc_order_id":"1","order_status":"A\\u0000B"}');
    assert.equal(res.status, 400);
  });

  it("413 for a body over 256 KiB, storing nothing", async () => {
    const before = [await count("order_events"), await count("rejected_callbacks")];
    const res = await t.callback({ svc_order_id: "1", pad: "x".repeat(256 * 1024) });
    assert.equal(res.status, 413);
    assert.equal(((await res.json()) as { error: { code: string } }).error.code, "payload_too_large");
    assert.deepEqual([await count("order_events"), await count("rejected_callbacks")], before);
  });

  it("accepts a body of exactly 256 KiB", async () => {
    const base = JSON.stringify({ svc_order_id: "9011", pad: "" });
    const body = JSON.stringify({ svc_order_id: "9011", pad: "y".repeat(256 * 1024 - base.length) });
    assert.equal(Buffer.byteLength(body), 256 * 1024);
    assert.equal((await t.callback(body)).status, 200);
  });
});

describe("callbacks: the size limit over a real socket", () => {
  it("with a Content-Length (as every real callback has), one byte over 256 KiB is 413 and nothing is kept; exactly 256 KiB is stored", async () => {
    const server = await t.listen();
    try {
      const sized = (n: number, bytes: number) => {
        const base = JSON.stringify({ svc_order_id: String(n), pad: "" });
        const body = JSON.stringify({ svc_order_id: String(n), pad: "z".repeat(bytes - base.length) });
        assert.equal(Buffer.byteLength(body), bytes);
        return body;
      };
      const send = (body: string) =>
        fetch(`${server.url}/callbacks/${CALLBACK_SECRET}`, { method: "POST", headers: { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }, body });
      const before = [await count("order_events"), await count("rejected_callbacks")];
      const over = await send(sized(9021, CALLBACK_MAX_BYTES + 1));
      assert.equal(over.status, 413);
      const { error } = (await over.json()) as { error: { code: string; message: string } };
      assert.deepEqual([error.code, error.message], ["payload_too_large", `callback body is larger than ${CALLBACK_MAX_BYTES} bytes`]);
      assert.deepEqual([await count("order_events"), await count("rejected_callbacks")], before);
      assert.equal((await send(sized(9022, CALLBACK_MAX_BYTES))).status, 200);
    } finally {
      await server.close();
    }
  });
});

describe("callbacks: compressed bodies", () => {
  const compress: Record<string, (b: Buffer) => Buffer> = { gzip: gzipSync, deflate: deflateSync, br: brotliCompressSync };
  const encoded = (encoding: string, body: string) => new Uint8Array(compress[encoding]!(Buffer.from(body)));
  const lastRejected = async () =>
    (await t.database.sql<{ reason: string; body: string; body_bytes: number }[]>`
      select reason, body, body_bytes from rejected_callbacks order by id desc limit 1`)[0];

  it("stores a gzip, deflate or br body as the same event it is sent plain (the same dedupe key)", async () => {
    for (const [i, encoding] of ["gzip", "deflate", "br", "GZip", "x-gzip"].entries()) {
      const body = JSON.stringify(status(40 + i, { order_status: "ARRIVED", arrival_time: "2026-11-22T10:05:00Z" }));
      const zipped = await t.callback(encoded(encoding === "GZip" || encoding === "x-gzip" ? "gzip" : encoding, body), { headers: { "content-encoding": encoding } });
      assert.equal(zipped.status, 200, `${encoding}: ${await zipped.clone().text()}`);
      const first = (await zipped.json()) as { event_id: string; duplicate: boolean };
      assert.equal(first.duplicate, false, encoding);
      const plain = await t.callback(body);
      assert.deepEqual(await plain.json(), { ok: true, event_id: first.event_id, duplicate: true }, encoding);
      const [row] = await t.database.sql`select provider_status, svc_order_id from order_events where id = ${first.event_id}`;
      assert.deepEqual({ ...row }, { provider_status: "ARRIVED", svc_order_id: String(9040 + i) }, encoding);
    }
    assert.equal((await t.callback(status(46), { headers: { "content-encoding": "identity" } })).status, 200);
  });

  it("applies the 256 KiB limit to the decompressed body: exactly 256 KiB is taken, one byte more is 413 with nothing kept", async () => {
    const sized = (size: number, id: string) => {
      const base = JSON.stringify({ client_order_id: id, pad: "" });
      return JSON.stringify({ client_order_id: id, pad: "z".repeat(size - base.length) });
    };
    const fits = await t.callback(encoded("gzip", sized(CALLBACK_MAX_BYTES, "CB-ZIP-FITS")), { headers: { "content-encoding": "gzip" } });
    assert.equal(fits.status, 200);
    const before = [await count("order_events"), await count("rejected_callbacks")];
    for (const encoding of ["gzip", "deflate", "br"]) {
      const over = await t.callback(encoded(encoding, sized(CALLBACK_MAX_BYTES + 1, "CB-ZIP-OVER")), { headers: { "content-encoding": encoding } });
      assert.equal(over.status, 413, encoding);
      const err = (await over.json()) as { error: { code: string; message: string } };
      assert.equal(err.error.code, "payload_too_large");
      assert.match(err.error.message, /262144 bytes once decompressed/);
    }
    // A bomb: 32 MiB of zeros that travel as 32 KiB.
    const bomb = await t.callback(new Uint8Array(gzipSync(Buffer.alloc(32 * 1024 * 1024))), { headers: { "content-encoding": "gzip" } });
    assert.equal(bomb.status, 413);
    assert.deepEqual([await count("order_events"), await count("rejected_callbacks")], before);
  });

  it("415 naming an unknown encoding, kept as it arrived", async () => {
    const wire = new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x02]);
    const res = await t.callback(wire, { headers: { "content-encoding": "zstd" } });
    assert.equal(res.status, 415);
    const err = (await res.json()) as { error: { code: string; message: string } };
    assert.equal(err.error.code, "unsupported_media_type");
    assert.match(err.error.message, /Content-Encoding "zstd".*gzip, deflate, br/);
    assert.deepEqual({ ...(await lastRejected()) }, { reason: "unsupported_media_type", body: "(\uFFFD/\uFFFD\u0001\u0002", body_bytes: 6 });
  });

  it("400 naming a corrupt or cut-short stream, kept as it arrived", async () => {
    const whole = encoded("gzip", JSON.stringify(status(47)));
    for (const [label, wire] of [["corrupt", new TextEncoder().encode(JSON.stringify(status(47)))], ["cut short", whole.subarray(0, whole.length - 9)]] as const) {
      const res = await t.callback(wire, { headers: { "content-encoding": "gzip" } });
      assert.equal(res.status, 400, label);
      const err = (await res.json()) as { error: { code: string; message: string } };
      assert.equal(err.error.code, "invalid_json", label);
      assert.match(err.error.message, /not valid gzip as its Content-Encoding says/, label);
      const row = await lastRejected();
      assert.deepEqual([row!.reason, row!.body_bytes], ["invalid_json", wire.byteLength], label);
    }
    const [stored] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from order_events where client_order_id = 'CB-47'`;
    assert.equal(stored!.n, 0);
  });

  it("keeps a refused compressed body decompressed, for reading", async () => {
    const res = await t.callback(encoded("deflate", '{"order_status": DELIVERED}'), { headers: { "content-encoding": "deflate" } });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: { message: string } }).error.message, /not JSON/);
    assert.deepEqual({ ...(await lastRejected()) }, { reason: "invalid_json", body: '{"order_status": DELIVERED}', body_bytes: 27 });
    const missing = await t.callback(encoded("br", '{"order_status":"DELIVERED"}'), { headers: { "content-encoding": "br" } });
    assert.equal(missing.status, 422);
    assert.deepEqual({ ...(await lastRejected()) }, { reason: "missing_order_id", body: '{"order_status":"DELIVERED"}', body_bytes: 28 });
  });

  it("over a real socket, declared or chunked, a gzip body is stored", async () => {
    const server = await t.listen();
    try {
      const wire = encoded("gzip", JSON.stringify(status(48)));
      const declared = await fetch(`${server.url}/callbacks/${CALLBACK_SECRET}`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
        body: wire,
      });
      assert.equal(declared.status, 200, await declared.clone().text());
      const stream = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(wire.subarray(0, 10));
          c.enqueue(wire.subarray(10));
          c.close();
        },
      });
      const chunked = await fetch(`${server.url}/callbacks/${CALLBACK_SECRET}`, {
        method: "POST",
        headers: { "content-type": "application/json", "content-encoding": "gzip" },
        body: stream,
        duplex: "half",
      } as RequestInit);
      assert.equal(chunked.status, 200);
      const [first, again] = [(await declared.json()) as { event_id: string }, (await chunked.json()) as { event_id: string; duplicate: boolean }];
      assert.deepEqual([again.event_id, again.duplicate], [first.event_id, true]);
    } finally {
      await server.close();
    }
  });
});

describe("the event log is append-only", () => {
  for (const statement of ["update order_events set kind = 'status'", "delete from order_events", "truncate order_events"]) {
    it(`refuses: ${statement}`, async () => {
      await assert.rejects(t.database.sql.unsafe(statement), /append-only/);
    });
  }
});
