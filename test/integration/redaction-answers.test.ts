/**
 * The provider's answers and error texts stored with an order's commands lose the
 * customer's personal data with the rest of the order (docs/operations.md, "Personal
 * data"): the emulator echoes the customer in its place answer (`place_answer: "echo"`)
 * and in an edit's refusal; once the order is redacted neither holds the customer's name,
 * phone or address, in the database, the API or the console, and the ids, statuses and
 * AWB operations need stay.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { customerValues, redactProviderAnswer, redactText, REDACTED } from "../../src/domain/redact.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { consoleSignIn } from "../helpers/console.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

let t: TestApp;
let emulator: EmulatorPair;
before(async () => {
  emulator = await startEmulatorPair();
  t = await createTestApp({}, { provider: emulator.client });
});
after(async () => {
  await t.close();
  await emulator.close();
});

const DAY = 86_400_000;
/** What placeOrderBody sends as the customer, and must not survive the redaction anywhere. */
const PERSONAL = ["Asha Rao", "9876543210", "12 MG Road", "Flat 4", "12.9716", "77.5946"];

interface StoredCommand {
  kind: string;
  state: string;
  response: unknown;
  last_error: string | null;
  redacted_at: Date | null;
}

const storedCommands = async (coid: string) =>
  await t.database.sql<StoredCommand[]>`
    select c.kind, c.state, c.response, c.last_error, c.redacted_at from commands c join orders o on o.id = c.order_id
    where o.client_order_id = ${coid} order by c.id`;

describe("redaction of the provider's answers", () => {
  it("replaces the customer's values wherever an answer or an error text echoes them, and keeps ids, statuses and AWB", () => {
    const values = customerValues([placeOrderBody()]);
    const answer = {
      message: "Order for Asha Rao placed",
      data: {
        sfx_order_id: 31000001,
        client_order_id: "C-1",
        status: "CREATED",
        awb_number: "SF1234567890ABC",
        order_value: 250,
        drop: { phone: 9876543210, lat: 12.9716, note: "call asha rao at the gate" },
        customer_details: { name: "A. Rao", contact_number: "+91 98765 43210", city: "Bengaluru" },
        items: [{ name: "Masala tea", quantity: 2 }],
      },
    };
    assert.deepEqual(redactProviderAnswer(answer, values), {
      message: `Order for ${REDACTED} placed`,
      data: {
        sfx_order_id: 31000001,
        client_order_id: "C-1",
        status: "CREATED",
        awb_number: "SF1234567890ABC",
        order_value: 250,
        drop: { phone: REDACTED, lat: REDACTED, note: `call ${REDACTED} at the gate` },
        // Under customer_details the keys decide, whatever the values' spelling.
        customer_details: { name: REDACTED, contact_number: REDACTED, city: "Bengaluru" },
        items: [{ name: "Masala tea", quantity: 2 }],
      },
    });
    assert.equal(redactProviderAnswer({ message: "Success", data: { sfx_order_id: 1 } }, values), null, "nothing to do");
    assert.equal(redactText("client 400: contact_number: 9876543210 is not reachable", values), `client 400: contact_number: ${REDACTED} is not reachable`);
    assert.equal(redactText(`client 400: ${REDACTED} is not reachable`, values), null, "done once");
    assert.equal(redactText("server 500: Internal Server Error", values), null);
  });

  it("an order placed with an echoing provider keeps its answers until redacted, then reads [redacted] in them everywhere", async () => {
    assert.equal((await emulator.control.send("PUT", "/behaviour", { place_answer: "echo" })).status, 200);
    const body = placeOrderBody({ clientOrderId: "PII-ECHO" });
    assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await t.runJobs();
    // An edit the provider refuses, repeating the customer's phone in its words.
    await emulator.control.addFault({
      path: "/stores/edit-order/",
      action: "status",
      status: 400,
      body: { message: "Failure", errors: { customer_details: ["contact 9876543210 (Asha Rao) cannot be edited"] } },
      times: 1,
    });
    const edit = await t.request("/v1/orders/PII-ECHO", { method: "PATCH", json: { order_details: { order_value: 300 } } });
    assert.equal(edit.status, 202, await edit.clone().text());
    await t.runJobs();

    const placed = await storedCommands("PII-ECHO");
    assert.deepEqual(placed.map((c) => [c.kind, c.state]), [["place", "succeeded"], ["edit", "failed"]]);
    const svc = String((placed[0]!.response as { data: { sfx_order_id: number } }).data.sfx_order_id);
    assert.match(JSON.stringify(placed[0]!.response), /Asha Rao/, "the echo is stored as answered");
    assert.match(placed[1]!.last_error ?? "", /9876543210/);

    const now = new Date();
    for (const status of ["ALLOTTED", "DELIVERED"]) {
      assert.equal((await t.callback({ client_order_id: "PII-ECHO", svc_order_id: svc, order_status: status, timestamp: now.toISOString() })).status, 200);
    }
    await t.runJobs();
    assert.deepEqual(await redactDue(t.database.sql, 90, new Date(now.getTime() + 80 * DAY)), { orders: 0, events: 0, commands: 0, failed: [] }, "not due yet");
    const result = await redactDue(t.database.sql, 90, new Date(now.getTime() + 91 * DAY));
    assert.deepEqual({ ...result, events: 0 }, { orders: 1, events: 0, commands: 2, failed: [] });

    const [place, failedEdit] = await storedCommands("PII-ECHO");
    const answer = place!.response as { message: string; data: Record<string, unknown> };
    assert.deepEqual(
      { ...answer.data, customer_details: undefined },
      { sfx_order_id: Number(svc), svc_order_id: svc, track_url: null, client_order_id: "PII-ECHO", status: "CREATED", drop_details: `${REDACTED}, ${REDACTED} (${REDACTED})`, customer_details: undefined },
      "ids and status stay",
    );
    const customer = answer.data["customer_details"] as Record<string, unknown>;
    for (const k of ["name", "contact_number", "address_line_1", "address_line_2", "latitude", "longitude"]) assert.equal(customer[k], REDACTED, k);
    assert.ok(place!.redacted_at && failedEdit!.redacted_at);
    assert.equal(failedEdit!.last_error, `client 400: Failure: customer_details: contact ${REDACTED} (${REDACTED}) cannot be edited`);
    const stored = JSON.stringify(await storedCommands("PII-ECHO"));
    for (const p of PERSONAL) assert.ok(!stored.includes(p), `${p} in ${stored}`);

    // The API shows the error text as stored, [redacted] in it.
    const listed = (await (await t.request("/v1/orders/PII-ECHO/commands")).json()) as { items: { kind: string; last_error: string | null }[] };
    const shown = JSON.stringify(listed);
    assert.ok(shown.includes(REDACTED), shown);
    for (const p of PERSONAL) assert.ok(!shown.includes(p), `${p} in ${shown}`);

    // The console's order page shows each command's answer: without the customer.
    const server = await t.listen();
    try {
      const { cookie } = await consoleSignIn(server.url);
      const [row] = await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = 'PII-ECHO'`;
      const page = await (await fetch(`${server.url}/orders/${row!.id}`, { headers: { cookie } })).text();
      assert.match(page, /\[redacted\]/);
      for (const p of PERSONAL) assert.ok(!page.includes(p), `${p} on the console's page`);
    } finally {
      await server.close();
    }

    assert.deepEqual(await redactDue(t.database.sql, 90, new Date(now.getTime() + 92 * DAY)), { orders: 0, events: 0, commands: 0, failed: [] }, "done once");
  });
});
