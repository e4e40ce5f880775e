/**
 * Secrets at any depth of an error: ProviderError keeps no secret from the answer it was
 * made of, and a log line scrubs whatever error it is given under `err` or `error`
 * (pino's redact paths reach one level down only).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { scrubSecrets } from "../../src/domain/secrets.ts";
import { captureLog } from "../helpers/log.ts";
import { ProviderError, existingOrderFromError } from "../../src/provider/errors.ts";

const SECRET = "s3cret-token-value-9d2e";

describe("ProviderError keeps no secret of the answer", () => {
  it("secret keys at any depth, in any spelling, and secrets written into text are replaced; the rest is kept", () => {
    const err = new ProviderError({
      kind: "invalid_response",
      operation: "POST /oauth/token/",
      status: 200,
      providerMessage: `response is not JSON: access_token=${SECRET}&token_type=bearer`,
      body: {
        access_token: SECRET,
        data: { svc_order_id: 7, track_url: "https://t/7", nested: [{ accessToken: SECRET, "Client-Secret": SECRET }] },
        raw: `{"refresh_token": "${SECRET}", "ok": true}`,
      },
    });
    assert.ok(!JSON.stringify(err.body).includes(SECRET), JSON.stringify(err.body));
    assert.ok(!err.providerMessage.includes(SECRET) && !err.message.includes(SECRET), err.message);
    assert.deepEqual(err.body, {
      access_token: "[redacted]",
      data: { svc_order_id: 7, track_url: "https://t/7", nested: [{ accessToken: "[redacted]", "Client-Secret": "[redacted]" }] },
      raw: '{"refresh_token": "[redacted]", "ok": true}',
    });
    assert.match(err.providerMessage, /access_token=\[redacted\]&token_type=bearer/);
  });

  it("what the client reads from a refusal survives the scrubbing", () => {
    const err = new ProviderError({
      kind: "client",
      operation: "POST /api/v2/stores/orders/",
      status: 400,
      body: { message: "Failure", errors: { client_order_id: ["exists"] }, data: { svc_order_id: 31, track_url: "https://t/31" } },
    });
    assert.deepEqual(existingOrderFromError(err), { svc_order_id: "31", track_url: "https://t/31" });
  });
});

describe("errors in log lines", () => {
  function leakyErrors() {
    const cause = Object.assign(new Error("socket"), { response: { headers: { authorization: `Bearer ${SECRET}` } } });
    const err = Object.assign(new Error("token exchange went wrong", { cause }), { body: { deep: { deeper: { access_token: SECRET } } } });
    const provider = new ProviderError({ kind: "invalid_response", operation: "POST /oauth/token/", status: 200, body: { access_token: SECRET, expires_in: 3600 } });
    return { err, provider };
  }

  for (const format of ["json", "pretty"] as const) {
    it(`${format}: no secret under err or error at any depth; the error's message and fields stay`, async () => {
      const text = (await captureLog(format, (log) => {
        const { err, provider } = leakyErrors();
        log.warn({ err, count: 10 }, "awb top-up failed");
        log.error({ error: err, job: { id: 1 } }, "Failed task 1");
        log.warn({ err: provider }, "provider error");
        log.warn({ error: `said {"access_token": "${SECRET}"}` }, "provider call failed");
        log.warn({ err: { response: { data: { client_secret: SECRET } } } }, "not an Error");
      })).join("\n");
      assert.ok(!text.includes(SECRET), text);
      assert.match(text, /token exchange went wrong/);
      assert.match(text, /invalid_response/);
      assert.match(text, /expires_in/);
    });
  }

  it("a provider's answer is scrubbed once, when its error is made: a log line passes over that copy, and nothing else", async () => {
    let walked = 0;
    // A getter counts each time a scrubbing reads the answer's nested value.
    const answer = { data: Object.defineProperty({ svc_order_id: 7 }, "access_token", { enumerable: true, get: () => (walked++, SECRET) }) };
    const provider = new ProviderError({ kind: "client", operation: "POST /api/v2/stores/orders/", status: 400, body: answer });
    assert.equal(walked, 1, "scrubbed when the error was made");
    assert.equal(scrubSecrets(provider.body), provider.body, "a scrubbed copy is kept as it is");
    const wrapped = scrubSecrets({ kept: provider.body, token: SECRET }) as { kept: unknown; token: unknown };
    assert.deepEqual([wrapped.kept === provider.body, wrapped.token], [true, "[redacted]"], "what is around a scrubbed copy is still scrubbed");
    // On the copy, a getter counts reads: writing the line reads it once; a second scrubbing would read it again.
    let read = 0;
    Object.defineProperty((provider.body as { data: object }).data, "probe", { enumerable: true, get: () => (read++, "p") });
    const text = (await captureLog("json", (log) => log.warn({ err: provider, error: { cause: { client_secret: SECRET } } }, "provider error"))).join("\n");
    assert.equal(read, 1, "the log line did not scrub the answer again");
    assert.ok(!text.includes(SECRET), text);
    assert.match(text, /"svc_order_id":7,"access_token":"\[redacted\]","probe":"p"/);
    // An answer with a `message` is serialised by pino as an error, which tags it: still no secret.
    const said = new ProviderError({ kind: "failure", operation: "POST /x/", status: 200, body: { message: "Failure", token: SECRET } });
    const line = (await captureLog("json", (log) => log.warn({ err: said }, "provider error"))).join("\n");
    assert.ok(!line.includes(SECRET) && line.includes("Failure"), line);
  });

  it("a long answer on a logged error is cut short, in the error's line and graphile-worker's: its start and its length stay", async () => {
    const page = `<html><body>${"Bad gateway. ".repeat(20_000)}</body></html>`;
    const numbers = { message: "Failure", awb_numbers: Array.from({ length: 20_000 }, (_, i) => `SF${String(i).padStart(10, "0")}ABC`) };
    const html = new ProviderError({ kind: "server", operation: "POST /api/v2/awb/", status: 502, body: page });
    const json = new ProviderError({ kind: "failure", operation: "POST /api/v2/awb/", status: 200, body: numbers });
    const cause = Object.assign(new Error("wrapped", { cause: html }), { note: "x".repeat(50_000) });
    const lines = await captureLog("json", (log) => {
      log.warn({ err: html, count: 10 }, "awb top-up failed");
      log.error({ error: json, job: { id: 1 } }, "Failed task 1");
      log.warn({ err: cause }, "wrapped");
    });
    assert.equal(lines.length, 3);
    for (const line of lines) assert.ok(line.length < 30_000, `a line of ${line.length} characters`);
    const [first, second, third] = lines.map((l) => JSON.parse(l) as { err?: Record<string, unknown>; error?: Record<string, unknown> });
    assert.match(String(first!.err!["body"]), /^<html><body>Bad gateway\. .*… \(260026 characters in all\)$/s);
    assert.match(String(second!.error!["body"]), /^\{.*"awb_numbers":\["SF0000000000ABC".*characters in all\)$/s);
    assert.equal(first!.err!["status"], 502, "the error's other fields stay");
    assert.match(String(third!.err!["note"]), /characters in all/);
    // The error itself keeps the whole answer (what reads a refusal needs it).
    assert.equal(html.body, page);
  });

  it("scrubSecrets keeps a __proto__ key of an answer as a key, and scrubs under it", () => {
    const answer = JSON.parse(`{"__proto__":{"access_token":"${SECRET}"},"ok":true}`) as unknown;
    assert.equal(JSON.stringify(scrubSecrets(answer)), '{"__proto__":{"access_token":"[redacted]"},"ok":true}');
  });

  it("scrubSecrets copies, never changes what it is given, and survives cycles", () => {
    const value: Record<string, unknown> = { token: SECRET, keep: { n: 1 } };
    value["self"] = value;
    const copy = scrubSecrets(value) as Record<string, unknown>;
    assert.equal(value["token"], SECRET);
    assert.equal(copy["token"], "[redacted]");
    assert.deepEqual(copy["keep"], { n: 1 });
    assert.equal(copy["self"], "[…]");
  });
});
