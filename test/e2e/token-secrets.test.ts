/**
 * The provider's OAuth access token never reaches a log line or a stored error, however
 * the token endpoint's answer goes wrong: an answer that fails its schema still holds the
 * token, and the error made of it travels into graphile-worker's log, the top-up's own
 * warning, job records and command errors.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";

const SECRET = "LEAKED-ACCESS-TOKEN-4f1c9a";
const TOKEN_PATH = "/oauth/token/";

/** Answers of the token endpoint that carry the token but are not a usable token answer. */
const LEAKY_ANSWERS: [string, Record<string, unknown>][] = [
  ["JSON without token_type", { status: 200, body: { access_token: SECRET, expires_in: 3600 } }],
  ["JSON that says Failure", { status: 200, body: { access_token: SECRET, refresh_token: SECRET, message: "Failure" } }],
  ["a form-encoded body", { status: 200, body: `access_token=${SECRET}&token_type=bearer&expires_in=3600`, content_type: "application/x-www-form-urlencoded" }],
  ["a JSON error body", { status: 400, body: { error: "invalid_grant", access_token: SECRET, details: { token: SECRET } } }],
  // Well formed but unusable: no HTTP header can carry it (fetch refuses it, quoting it).
  ["a token with a line break in it", { status: 200, body: { access_token: `${SECRET}\nx`, token_type: "Bearer", expires_in: 3600 } }],
];

async function storedErrors(s: Stack): Promise<string> {
  const sql = s.t.database.sql;
  const awb = await sql<{ last_error: string | null }[]>`select last_error from awb_requests`;
  const jobs = await sql<{ last_error: string | null }[]>`select last_error from graphile_worker.jobs`;
  const commands = await sql<{ last_error: string | null }[]>`select last_error from commands`;
  return [...awb, ...jobs, ...commands].map((r) => r.last_error ?? "").join("\n");
}

describe("the access token from a bad token answer", () => {
  let s: Stack;
  before(async () => {
    s = await startStack({ AWB_MODE: "pool", COMMAND_MAX_ATTEMPTS: "2" }, { product: "quick_commerce", auth: "oauth" });
  });
  after(async () => s.close());
  afterEach(async () => {
    await s.pair.control.send("DELETE", "/faults");
  });

  for (const [name, answer] of LEAKY_ANSWERS) {
    it(`${name}: not in any log line or stored error, through an AWB top-up and a place`, async () => {
      const firstLine = s.t.logLines.length;
      await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, action: "status", ...answer });
      // The manual top-up (graphile-worker logs each failed attempt with the error) and one on
      // its last attempt (the top-up logs the error itself and records it).
      assert.equal((await s.t.request("/v1/awb/replenish", { method: "POST", json: { count: 10 } })).status, 202);
      await s.t.database.sql`
        select graphile_worker.add_job('awb__replenish', '{"reason":"manual","count":3}'::json, queue_name := 'awb', max_attempts := 1)`;
      await s.t.runJobs();
      // The manual top-up would retry for minutes: ended here, so the place can settle.
      await s.t.database.sql`
        select graphile_worker.permanently_fail_jobs(array(select id from graphile_worker.jobs where task_identifier like 'awb\\_\\_%'), 'ended by the test')`;
      const res = await s.t.request("/v1/orders", { method: "POST", json: placeOrderBody() });
      assert.equal(res.status, 202);
      await settle(s.t, s.pair);
      s.t.log.flush();

      const exchanges = (await s.pair.control.requests()).filter((r) => r.path === TOKEN_PATH);
      assert.ok(exchanges.length >= 3, "the bad answer was really received");
      const lines = s.t.logLines.slice(firstLine);
      assert.ok(lines.some((l) => l.includes("awb top-up failed")), "the top-up logged its error");
      const leaked = lines.filter((l) => l.includes(SECRET));
      assert.deepEqual(leaked, [], "a log line holds the token");
      assert.ok(!(await storedErrors(s)).includes(SECRET), "a stored error holds the token");
    });
  }

  it("a token no header can carry is refused at the exchange: the place is never sent with it, and fails as not sent, not unconfirmed", async () => {
    await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, action: "status", status: 200, body: { access_token: `${SECRET}\nx`, token_type: "Bearer", expires_in: 3600 } });
    const body = placeOrderBody();
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(s.t, s.pair);
    const order = (await (await s.t.request(`/v1/orders/${body.order_details.client_order_id}`)).json()) as { placement: { state: string; error: string } };
    assert.equal(order.placement.state, "failed", order.placement.error);
    assert.match(order.placement.error, /token request failed/);
    const places = (await s.pair.control.requests()).filter((r) => r.path === "/api/v2/stores/orders/");
    assert.equal(places.length, 0, "no place went out");
  });
});
