import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { ConfigError, loadEmulatorConfig } from "../../src/config.ts";
import { startEmulator } from "../../src/emulator/server.ts";
import type { StartEmulatorOptions } from "../../src/emulator/server.ts";
import { placeOrderBody, startCallbackReceiver, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { CallbackReceiver, EmulatorPair } from "../helpers/emulator.ts";

/**
 * The emulator's real-provider behaviour (behaviour.ts) and the faults that reproduce lost
 * answers. Raw HTTP throughout: these are the bytes a client gets, whatever our provider
 * client makes of them.
 */

const DEFAULTS = {
  accept_duplicate_orders: false,
  place_answer: "spec",
  edit_answer: "spec",
  callback_shape: "spec",
  callback_timezone: null,
  status_endpoint: true,
  callback_retries: true,
};
const REALISTIC = {
  accept_duplicate_orders: true,
  place_answer: "sfx",
  edit_answer: "sfx",
  callback_shape: "nested",
  callback_timezone: "Asia/Kolkata",
  status_endpoint: true,
  callback_retries: false,
};
const IST_OFFSET_MS = (5 * 60 + 30) * 60_000;
const ZONELESS = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/;

interface RawAnswer {
  status: number;
  contentType: string;
  text: string;
  json(): Record<string, unknown>;
}

async function call(pair: EmulatorPair, method: string, path: string, body?: unknown, auth = true): Promise<RawAnswer> {
  const headers: Record<string, string> = auth ? { authorization: `Token ${TEST_TOKEN}` } : {};
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(`${pair.url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get("content-type") ?? "",
    text,
    json: () => JSON.parse(text) as Record<string, unknown>,
  };
}

const place = (pair: EmulatorPair, body: ReturnType<typeof placeOrderBody>) => call(pair, "POST", "/api/v2/stores/orders/", body);

/** Places an order and finds its provider id through the control API (whatever the place answer's shape). */
async function placed(pair: EmulatorPair): Promise<{ coid: string; svc: string }> {
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  const res = await place(pair, body);
  assert.equal(res.status, 200, res.text);
  const [order, ...more] = await pair.control.orders(coid);
  assert.equal(more.length, 0);
  return { coid, svc: String(order?.["svc_order_id"]) };
}

async function allot(pair: EmulatorPair, svc: string, riderId = 4242): Promise<void> {
  const res = await call(pair, "PUT", `/app/v3/sandbox/clusters/orders/${svc}/allot/`, { rider_id: riderId });
  assert.equal(res.status, 200, res.text);
}

async function moveRider(pair: EmulatorPair, svc: string, latitude: number, longitude: number): Promise<void> {
  const res = await call(pair, "PUT", `/app/v3/sandbox/order/${svc}/update-rider-location/`, { latitude, longitude });
  assert.equal(res.status, 200, res.text);
}

async function behaviour(pair: EmulatorPair, patch: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await pair.control.send("PUT", "/behaviour", patch);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

interface OrderView {
  track_url: string;
  rider: { id: string; name: string; contact: string } | null;
  virtual_contact_number: string | null;
  last_location: { at: string } | null;
  history: { status: string; at: string }[];
}

async function view(pair: EmulatorPair, svc: string): Promise<OrderView> {
  return (await pair.control.order(svc)) as unknown as OrderView;
}

/** When the order reached `status`, per the emulator (ISO, ms). */
function reachedAt(order: OrderView, status: string): string {
  const step = order.history.findLast((h) => h.status === status);
  assert.ok(step, `order never reached ${status}`);
  return step.at;
}

/** The instant a zone-less Asia/Kolkata wall-clock time stands for. */
function fromIst(wallClock: unknown): number {
  assert.equal(typeof wallClock, "string");
  assert.match(String(wallClock), ZONELESS);
  return Date.parse(`${String(wallClock).replace(" ", "T")}Z`) - IST_OFFSET_MS;
}

/** Whole seconds: zone-less times carry no milliseconds. */
const toSecond = (iso: string) => Math.floor(Date.parse(iso) / 1000) * 1000;

describe("behaviour switches (/__emulator/behaviour)", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair();
  });
  after(() => pair.close());
  beforeEach(() => pair.emulator.reset());

  it("start strict: every switch at its spec default", async () => {
    const res = await pair.control.get("/behaviour");
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, DEFAULTS);
  });

  it("PUT merges a partial object into the current switches", async () => {
    assert.deepEqual(await behaviour(pair, { place_answer: "sfx" }), { ...DEFAULTS, place_answer: "sfx" });
    const both = { ...DEFAULTS, place_answer: "sfx", callback_shape: "unified", callback_timezone: "UTC" };
    assert.deepEqual(await behaviour(pair, { callback_shape: "unified", callback_timezone: "UTC" }), both);
    assert.deepEqual((await pair.control.get("/behaviour")).body, both);
    assert.deepEqual(await behaviour(pair, { callback_timezone: null }), { ...both, callback_timezone: null });
  });

  it("realistic: true sets the preset, explicit fields beside it win, realistic: false restores the defaults", async () => {
    await behaviour(pair, { status_endpoint: false });
    assert.deepEqual(await behaviour(pair, { realistic: true }), REALISTIC);
    assert.deepEqual(await behaviour(pair, { realistic: true, callback_shape: "unified" }), { ...REALISTIC, callback_shape: "unified" });
    assert.deepEqual(await behaviour(pair, { realistic: false }), DEFAULTS);
    assert.deepEqual(await behaviour(pair, { realistic: false, place_answer: "sfx" }), { ...DEFAULTS, place_answer: "sfx" });
  });

  it("refuses bad values naming the field, and changes nothing then", async () => {
    await behaviour(pair, { place_answer: "sfx" });
    const cases: [Record<string, unknown>, string][] = [
      [{ place_answer: "xml" }, "place_answer"],
      [{ callback_shape: "flat" }, "callback_shape"],
      [{ callback_timezone: "Mars/Olympus_Mons" }, "callback_timezone"],
      [{ callback_timezone: 530 }, "callback_timezone"],
      [{ accept_duplicate_orders: "yes" }, "accept_duplicate_orders"],
      [{ status_endpoint: 0 }, "status_endpoint"],
      [{ callback_retries: "no" }, "callback_retries"],
      [{ realistic: "true" }, "realistic"],
      [{ accept_duplicates: true }, "accept_duplicates"],
      // A bad field refuses the whole update, the good one beside it too.
      [{ callback_shape: "nested", place_answer: "xml" }, "place_answer"],
    ];
    for (const [patch, field] of cases) {
      const res = await pair.control.send("PUT", "/behaviour", patch);
      assert.equal(res.status, 400, JSON.stringify(patch));
      assert.equal(res.body["message"], "Failure");
      const errors = res.body["errors"] as Record<string, string[]>;
      assert.deepEqual(Object.keys(errors), [field], JSON.stringify(res.body));
      assert.ok((errors[field]?.[0] ?? "").length > 0);
    }
    const notJson = await fetch(`${pair.url}/__emulator/behaviour`, { method: "PUT", body: "{" });
    assert.equal(notJson.status, 400);
    assert.deepEqual((await pair.control.get("/behaviour")).body, { ...DEFAULTS, place_answer: "sfx" });
  });

  it("reset goes back to the start options", async () => {
    await behaviour(pair, { realistic: true });
    assert.equal((await pair.control.send("POST", "/reset", {})).status, 200);
    assert.deepEqual((await pair.control.get("/behaviour")).body, DEFAULTS);
  });

  it("the start option sets the start values (preset plus fields), which reset keeps", async () => {
    const other = await startEmulatorPair({ emulator: { behaviour: { realistic: true, status_endpoint: false } } });
    try {
      const start = { ...REALISTIC, status_endpoint: false };
      assert.deepEqual((await other.control.get("/behaviour")).body, start);
      assert.deepEqual((await other.control.get("")).body["behaviour"], start);
      await behaviour(other, { realistic: false });
      other.emulator.reset();
      assert.deepEqual((await other.control.get("/behaviour")).body, start);
    } finally {
      await other.close();
    }
  });

  it("a bad start option stops the start", async () => {
    const bad = [{ callback_timezone: "Nowhere/Special" }, { place_answer: "xml" }] as unknown as StartEmulatorOptions["behaviour"][];
    for (const b of bad) await assert.rejects(startEmulator({ behaviour: b }), /behaviour/);
  });

  it("EMULATOR_REALISTIC selects the preset for npm run emulator", () => {
    assert.equal(loadEmulatorConfig({}).realistic, false);
    assert.equal(loadEmulatorConfig({ EMULATOR_REALISTIC: "true" }).realistic, true);
    assert.equal(loadEmulatorConfig({ EMULATOR_REALISTIC: "false" }).realistic, false);
    assert.throws(() => loadEmulatorConfig({ EMULATOR_REALISTIC: "yes" }), ConfigError);
  });
});

describe("place: duplicates and the answer's shape", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair();
  });
  after(() => pair.close());
  beforeEach(() => pair.emulator.reset());

  it("strict: a repeated (store_code, client_order_id) is still refused, naming the first order", async () => {
    const body = placeOrderBody();
    const first = await place(pair, body);
    assert.equal(first.status, 200);
    const again = await place(pair, body);
    assert.equal(again.status, 400);
    assert.ok((again.json()["errors"] as Record<string, unknown>)["client_order_id"]);
    assert.equal((again.json()["data"] as Record<string, unknown>)["svc_order_id"], (first.json()["data"] as Record<string, unknown>)["svc_order_id"]);
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 1);
  });

  it("accept_duplicate_orders: every repeated place creates another order, all listed", async () => {
    await behaviour(pair, { accept_duplicate_orders: true });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const answers = [await place(pair, body), await place(pair, body), await place(pair, body)];
    assert.deepEqual(answers.map((a) => a.status), [200, 200, 200]);
    const ids = answers.map((a) => String((a.json()["data"] as Record<string, unknown>)["svc_order_id"]));
    assert.equal(new Set(ids).size, 3);
    const listed = await pair.control.orders(coid);
    assert.deepEqual(listed.map((o) => o["svc_order_id"]).sort(), [...ids].sort());
    assert.ok(listed.every((o) => o["status"] === "CREATED" && o["client_order_id"] === coid));
    // dispatch-ready addresses orders by client id: duplicates in one store do not block it.
    const ready = await call(pair, "PUT", `/api/v2/orders/${coid}/dispatch-ready/`, { shipment_ready_timestamp: 1_700_000_000 });
    assert.equal(ready.status, 200, ready.text);
    // Switched back, the refusal returns and names the first order.
    await behaviour(pair, { accept_duplicate_orders: false });
    const refused = await place(pair, body);
    assert.equal(refused.status, 400);
    assert.equal(String((refused.json()["data"] as Record<string, unknown>)["svc_order_id"]), ids[0]);
    assert.equal((await pair.control.orders(coid)).length, 3);
  });

  it('place_answer "sfx": {"message":"Success","data":{"sfx_order_id": <number>}} and nothing else', async () => {
    await behaviour(pair, { place_answer: "sfx" });
    const body = placeOrderBody();
    const res = await place(pair, body);
    assert.equal(res.status, 200);
    assert.match(res.contentType, /^application\/json/);
    const [order] = await pair.control.orders(body.order_details.client_order_id);
    assert.deepEqual(res.json(), { message: "Success", data: { sfx_order_id: Number(order?.["svc_order_id"]) } });
    assert.match(res.text, /"sfx_order_id":\d+\}/, "a JSON number, not a string");
  });

  it('place_answer "spec" (default): svc_order_id, track_url and the rest', async () => {
    const res = await place(pair, placeOrderBody());
    const data = res.json()["data"] as Record<string, unknown>;
    assert.equal(typeof data["svc_order_id"], "number");
    assert.equal(typeof data["track_url"], "string");
    assert.equal("sfx_order_id" in data, false);
  });
});

describe("callback shapes and times", () => {
  let pair: EmulatorPair;
  let receiver: CallbackReceiver;
  before(async () => {
    receiver = await startCallbackReceiver();
    pair = await startEmulatorPair();
  });
  after(async () => {
    await pair.close();
    await receiver.close();
  });
  beforeEach(async () => {
    pair.emulator.reset();
    receiver.received.length = 0;
    await pair.control.send("PUT", "/callback-urls", { urls: [receiver.url] });
  });

  async function callbacks(): Promise<Record<string, unknown>[]> {
    await pair.emulator.callbacks.idle();
    return receiver.received.map((r) => r.body);
  }

  it("nested: status callbacks carry rider_details, location callbacks no status", async () => {
    await behaviour(pair, { callback_shape: "nested" });
    const { coid, svc } = await placed(pair);
    await allot(pair, svc);
    await moveRider(pair, svc, 12.9352, 77.6245);
    await pair.control.advanceClock(30);
    assert.equal((await call(pair, "POST", `/app/v3/sandbox/order/${svc}/update-rider-arrival/`)).status, 200);
    const order = await view(pair, svc);
    assert.ok(order.rider && order.last_location);
    const rider = { rider_id: 4242, rider_name: order.rider.name, rider_phone: order.rider.contact };
    const location = { latitude: "12.9352", longitude: "77.6245" };
    const [allotted, moved, arrived, ...rest] = await callbacks();
    assert.equal(rest.length, 0);
    assert.deepEqual(allotted, {
      sfx_order_id: Number(svc),
      client_order_id: coid,
      store_code: "STORE-1",
      order_status: "ALLOTTED",
      track_url: order.track_url,
      // No location is known yet: no rider_location.
      rider_details: rider,
      allot_time: reachedAt(order, "ALLOTTED"),
    });
    assert.deepEqual(moved, {
      sfx_order_id: Number(svc),
      client_order_id: coid,
      rider_details: { ...rider, rider_location: location },
      event_timestamp: order.last_location.at,
    });
    assert.deepEqual(arrived, {
      sfx_order_id: Number(svc),
      client_order_id: coid,
      store_code: "STORE-1",
      order_status: "ARRIVED",
      track_url: order.track_url,
      rider_details: { ...rider, rider_location: location },
      arrival_time: reachedAt(order, "ARRIVED"),
    });
  });

  it("nested: no rider_details before a rider exists (cancel of a fresh order)", async () => {
    await behaviour(pair, { callback_shape: "nested" });
    const { coid, svc } = await placed(pair);
    const res = await call(pair, "PUT", `/api/v2/orders/${svc}/cancel/`, { reason: "customer changed mind", user: "Customer" });
    assert.equal(res.status, 200, res.text);
    const [cancelled] = await callbacks();
    assert.ok(cancelled);
    assert.equal("rider_details" in cancelled, false);
    assert.equal(cancelled["client_order_id"], coid);
    assert.equal(cancelled["order_status"], "CANCELLED");
    assert.equal(cancelled["cancel_time"], reachedAt(await view(pair, svc), "CANCELLED"));
  });

  it("unified: status callbacks name only the client's id, as order_id; location callbacks the provider's beside client_order_id", async () => {
    await behaviour(pair, { callback_shape: "unified" });
    const { coid, svc } = await placed(pair);
    await allot(pair, svc, 77);
    await moveRider(pair, svc, 12.5, 77.25);
    assert.equal((await call(pair, "PUT", `/app/v3/sandbox/order/${svc}/collect/`, { status: "COLLECTED" })).status, 200);
    const order = await view(pair, svc);
    assert.ok(order.rider && order.last_location && order.virtual_contact_number);
    const rider = { rider_id: 77, rider_name: order.rider.name, rider_phone: order.rider.contact };
    const location = { latitude: "12.5", longitude: "77.25" };
    const [allotted, moved, collected, ...rest] = await callbacks();
    assert.equal(rest.length, 0);
    assert.deepEqual(allotted, {
      order_id: coid,
      status: "ALLOTTED",
      event_timestamp: reachedAt(order, "ALLOTTED"),
      rider_details: rider,
      masked_rider_contact: { number: order.rider.contact },
      track_url: order.track_url,
    });
    assert.deepEqual(moved, {
      order_id: svc,
      client_order_id: coid,
      rider_details: { ...rider, rider_location: location },
      event_timestamp: order.last_location.at,
    });
    assert.equal(typeof moved?.["order_id"], "string");
    // After collect the masked number is the virtual one the provider issued.
    assert.deepEqual(collected, {
      order_id: coid,
      status: "COLLECTED",
      event_timestamp: reachedAt(order, "COLLECTED"),
      rider_details: { ...rider, rider_location: location },
      masked_rider_contact: { number: order.virtual_contact_number },
      track_url: order.track_url,
    });
  });

  it("unified: callback faults still match on the status", async () => {
    await behaviour(pair, { callback_shape: "unified" });
    await pair.control.addFault({ action: "drop", order_status: "ALLOTTED" });
    const { svc } = await placed(pair);
    await allot(pair, svc);
    assert.equal((await call(pair, "POST", `/app/v3/sandbox/order/${svc}/update-rider-arrival/`)).status, 200);
    assert.deepEqual((await callbacks()).map((b) => b["status"]), ["ARRIVED"]);
  });

  it("callback_timezone: zone-less local times that are the emulator clock's instant at +05:30", async () => {
    await behaviour(pair, { callback_timezone: "Asia/Kolkata" });
    // Far from the real now, so a time taken from the wrong clock cannot pass.
    await pair.control.advanceClock(3 * 86_400 + 4321);
    const { svc } = await placed(pair);
    await allot(pair, svc);
    await moveRider(pair, svc, 12.9, 77.6);
    const order = await view(pair, svc);
    assert.ok(order.last_location);
    const [allotted, moved] = await callbacks();
    assert.equal(fromIst(allotted?.["allot_time"]), toSecond(reachedAt(order, "ALLOTTED")));
    assert.equal(fromIst(moved?.["timestamp"]), toSecond(order.last_location.at));
    // The same times in the status answer.
    const status = await call(pair, "GET", `/api/v2/orders/${svc}/status/`);
    const details = (status.json()["data"] as Record<string, Record<string, unknown>>)["order_details"];
    assert.equal(details?.["allot_time"], allotted?.["allot_time"]);
  });

  it("callback_timezone with the nested shape, and back to ISO when null", async () => {
    await behaviour(pair, { callback_shape: "nested", callback_timezone: "Asia/Kolkata" });
    const { svc } = await placed(pair);
    await allot(pair, svc);
    await moveRider(pair, svc, 12.9, 77.6);
    await behaviour(pair, { callback_timezone: null });
    await moveRider(pair, svc, 12.8, 77.5);
    const order = await view(pair, svc);
    const [allotted, first, second] = await callbacks();
    assert.equal(fromIst(allotted?.["allot_time"]), toSecond(reachedAt(order, "ALLOTTED")));
    assert.match(String(first?.["event_timestamp"]), ZONELESS);
    assert.equal(second?.["event_timestamp"], order.last_location?.at);
    assert.match(String(second?.["event_timestamp"]), /T.*Z$/);
  });

  it("the realistic preset: duplicates accepted, sfx answers, nested callbacks in Asia/Kolkata", async () => {
    await behaviour(pair, { realistic: true });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const answers = [await place(pair, body), await place(pair, body)];
    for (const a of answers) assert.deepEqual(Object.keys(a.json()["data"] as object), ["sfx_order_id"]);
    const orders = await pair.control.orders(coid);
    assert.equal(orders.length, 2);
    const svc = String((answers[1]?.json()["data"] as Record<string, unknown>)["sfx_order_id"]);
    await allot(pair, svc);
    const [allotted] = await callbacks();
    assert.equal(allotted?.["sfx_order_id"], Number(svc));
    assert.ok(allotted?.["rider_details"]);
    assert.equal(fromIst(allotted?.["allot_time"]), toSecond(reachedAt(await view(pair, svc), "ALLOTTED")));
  });
});

describe("connection and answer faults", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair();
  });
  after(() => pair.close());
  beforeEach(() => pair.emulator.reset());

  /** The fetch fails at the socket (no HTTP answer at all). */
  async function assertSocketError(promise: Promise<unknown>): Promise<void> {
    await assert.rejects(promise, (err: unknown) => {
      assert.ok(err instanceof TypeError, String(err));
      const code = (err.cause as { code?: unknown } | undefined)?.code;
      assert.ok(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"].includes(String(code)), `cause: ${String(code)}`);
      return true;
    });
  }

  async function lastLogged(): Promise<{ method: string; path: string; status: number | null; fault?: string }> {
    const log = await pair.control.requests();
    const last = log.at(-1);
    assert.ok(last);
    return last;
  }

  it("close_after: the order is created, then the connection closes without an answer", async () => {
    await pair.control.addFault({ path: "/api/v2/stores/orders/", action: "close_after", times: 1 });
    const body = placeOrderBody();
    await assertSocketError(place(pair, body));
    const orders = await pair.control.orders(body.order_details.client_order_id);
    assert.equal(orders.length, 1);
    const logged = await lastLogged();
    assert.deepEqual([logged.method, logged.path, logged.status, logged.fault], ["POST", "/api/v2/stores/orders/", null, "close_after"]);
    // The rule is spent: the same place now meets the duplicate refusal.
    assert.equal((await place(pair, body)).status, 400);
  });

  it("close_before: the connection closes and nothing is created", async () => {
    await pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", action: "close_before", times: 1 });
    const body = placeOrderBody();
    await assertSocketError(place(pair, body));
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 0);
    const logged = await lastLogged();
    assert.equal(logged.status, null);
    assert.equal(logged.fault, "close_before");
    assert.equal((await place(pair, body)).status, 200);
  });

  it("status with content_type: an HTML 502 as a proxy sends it", async () => {
    const html = "<html><body><h1>502 Bad Gateway</h1></body></html>";
    await pair.control.addFault({ path: "/api/v2/stores/orders/", action: "status", status: 502, body: html, content_type: "text/html" });
    const body = placeOrderBody();
    const res = await place(pair, body);
    assert.equal(res.status, 502);
    assert.equal(res.contentType, "text/html");
    assert.equal(res.text, html);
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 0);
    const logged = await lastLogged();
    assert.equal(logged.status, 502);
    assert.equal(logged.fault, "status");
  });

  it("status 200 with a refusal body still answers JSON", async () => {
    const refusal = { message: "Order in non-serviceable area" };
    await pair.control.addFault({ path: "/api/v2/stores/orders/", action: "status", status: 200, body: refusal });
    const res = await place(pair, placeOrderBody());
    assert.equal(res.status, 200);
    assert.match(res.contentType, /^application\/json/);
    assert.deepEqual(res.json(), refusal);
  });

  it("validates the new fault fields", async () => {
    assert.equal((await pair.control.send("POST", "/faults", { action: "status", status: 502, content_type: "" })).status, 400);
    assert.equal((await pair.control.send("POST", "/faults", { action: "status", status: 502, content_type: 1 })).status, 400);
    assert.equal((await pair.control.send("POST", "/faults", { action: "close_after", path_regex: "(" })).status, 400);
    assert.equal((await pair.control.send("POST", "/faults", { action: "close_before", probability: 2 })).status, 400);
  });
});

describe("GET /api/v2/orders/{svc_order_id}/status/", () => {
  let pair: EmulatorPair;
  let receiver: CallbackReceiver;
  before(async () => {
    receiver = await startCallbackReceiver();
    pair = await startEmulatorPair();
  });
  after(async () => {
    await pair.close();
    await receiver.close();
  });
  beforeEach(async () => {
    pair.emulator.reset();
    receiver.received.length = 0;
    await pair.control.send("PUT", "/callback-urls", { urls: [receiver.url] });
  });

  const statusOf = (svc: string, auth = true) => call(pair, "GET", `/api/v2/orders/${svc}/status/`, undefined, auth);
  const NO_STEPS = {
    allot_time: null,
    arrival_time: null,
    dispatch_time: null,
    customer_doorstep_arrival_time: null,
    delivery_time: null,
    cancel_time: null,
    return_time: null,
  };

  it("a fresh order: its status and ids, no rider, no step times", async () => {
    const { coid, svc } = await placed(pair);
    const res = await statusOf(svc);
    assert.equal(res.status, 200);
    const order = await view(pair, svc);
    assert.deepEqual(res.json(), {
      message: "Success",
      data: { status: "CREATED", sfx_order_id: Number(svc), client_order_id: coid, track_url: order.track_url, order_details: NO_STEPS },
    });
  });

  it("an order under way: rider with location, and the time of each step reached", async () => {
    const { coid, svc } = await placed(pair);
    await allot(pair, svc, 31);
    await pair.control.advanceClock(60);
    assert.equal((await call(pair, "POST", `/app/v3/sandbox/order/${svc}/update-rider-arrival/`)).status, 200);
    await moveRider(pair, svc, 12.97, 77.59);
    await pair.control.advanceClock(60);
    assert.equal((await call(pair, "PUT", `/app/v3/sandbox/order/${svc}/collect/`, { status: "COLLECTED" })).status, 200);
    await pair.emulator.callbacks.idle();
    const sent = receiver.received.length;
    const deliveries = (await pair.control.get<{ deliveries: unknown[] }>("/callbacks")).body.deliveries.length;

    const res = await statusOf(svc);
    assert.equal(res.status, 200);
    const order = await view(pair, svc);
    assert.ok(order.rider);
    assert.deepEqual(res.json(), {
      message: "Success",
      data: {
        status: "COLLECTED",
        sfx_order_id: Number(svc),
        client_order_id: coid,
        track_url: order.track_url,
        rider_details: {
          rider_id: 31,
          rider_name: order.rider.name,
          rider_phone: order.rider.contact,
          rider_location: { latitude: "12.97", longitude: "77.59" },
        },
        order_details: {
          ...NO_STEPS,
          allot_time: reachedAt(order, "ALLOTTED"),
          arrival_time: reachedAt(order, "ARRIVED"),
          dispatch_time: reachedAt(order, "COLLECTED"),
        },
      },
    });
    // Reading the status sends nothing.
    await pair.emulator.callbacks.idle();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(receiver.received.length, sent);
    assert.equal((await pair.control.get<{ deliveries: unknown[] }>("/callbacks")).body.deliveries.length, deliveries);
  });

  it("a rider but no known location: rider_details without rider_location", async () => {
    const { svc } = await placed(pair);
    await allot(pair, svc, 5);
    const data = (await statusOf(svc)).json()["data"] as Record<string, unknown>;
    assert.deepEqual(Object.keys(data["rider_details"] as object).sort(), ["rider_id", "rider_name", "rider_phone"]);
  });

  it("unknown order: 404 {detail}; no credentials: 401", async () => {
    const unknown = await statusOf("999");
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.json(), { detail: "Not found." });
    const { svc } = await placed(pair);
    assert.equal((await statusOf(svc, false)).status, 401);
  });

  it("status_endpoint: false answers an HTML 404, as a server without the route", async () => {
    const { svc } = await placed(pair);
    await behaviour(pair, { status_endpoint: false });
    for (const auth of [true, false]) {
      const res = await statusOf(svc, auth);
      assert.equal(res.status, 404);
      assert.match(res.contentType, /^text\/html/);
      assert.match(res.text, /<h1>Not Found<\/h1>/);
      assert.throws(() => res.json());
    }
    await behaviour(pair, { status_endpoint: true });
    assert.equal((await statusOf(svc)).status, 200);
  });
});
