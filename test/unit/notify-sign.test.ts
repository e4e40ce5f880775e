import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { describe, it } from "node:test";
import { Webhook } from "standardwebhooks";
import { firstMessageIdAt, newEndpointId, newMessageId, newSecret, signatureHeader, signPayload, webhookHeaders } from "../../src/notify/sign.ts";

const now = (): number => Math.floor(Date.now() / 1000);
const body = JSON.stringify({ type: "order.status_changed", data: { order: "A-1", status: "delivered", note: "é ✓ 😀" } });

describe("newSecret", () => {
  it("is whsec_ + base64 of 24 random bytes", () => {
    const secret = newSecret();
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{32}$/);
    assert.equal(Buffer.from(secret.slice(6), "base64").length, 24);
    assert.notEqual(newSecret(), secret);
  });
});

describe("signPayload / webhookHeaders", () => {
  it("verify with the standardwebhooks reference implementation", () => {
    const secret = newSecret();
    const id = newMessageId();
    const ts = now();
    const headers = webhookHeaders([secret], id, ts, body);
    assert.deepEqual(Object.keys(headers).sort(), ["content-type", "webhook-id", "webhook-signature", "webhook-timestamp"]);
    assert.equal(headers["content-type"], "application/json");
    assert.equal(headers["webhook-id"], id);
    assert.equal(headers["webhook-timestamp"], String(ts));
    assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    // Same bytes as the reference signer.
    assert.equal(signPayload(secret, id, ts, body), new Webhook(secret).sign(id, new Date(ts * 1000), body));
  });

  it("matches a known vector (HMAC-SHA256 of id.timestamp.body with the decoded key)", () => {
    const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const sig = signPayload(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}');
    assert.equal(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  it("a header signed with an old and a new secret verifies with each", () => {
    const oldSecret = newSecret();
    const newer = newSecret();
    const id = newMessageId();
    const ts = now();
    const headers = webhookHeaders([oldSecret, newer], id, ts, body);
    const parts = headers["webhook-signature"]!.split(" ");
    assert.equal(parts.length, 2);
    for (const part of parts) assert.match(part, /^v1,[A-Za-z0-9+/]{43}=$/);
    assert.equal(signatureHeader([oldSecret, newer], id, ts, body), headers["webhook-signature"]);
    assert.deepEqual(new Webhook(oldSecret).verify(body, headers), JSON.parse(body));
    assert.deepEqual(new Webhook(newer).verify(body, headers), JSON.parse(body));
  });

  it("a tampered body, id, timestamp or a wrong secret fails", () => {
    const secret = newSecret();
    const id = newMessageId();
    const ts = now();
    const headers = webhookHeaders([secret], id, ts, body);
    const wh = new Webhook(secret);
    assert.throws(() => wh.verify(body.replace("A-1", "A-2"), headers), /No matching signature/);
    assert.throws(() => wh.verify(`${body} `, headers), /No matching signature/);
    assert.throws(() => wh.verify(body, { ...headers, "webhook-id": newMessageId() }), /No matching signature/);
    assert.throws(() => wh.verify(body, { ...headers, "webhook-timestamp": String(ts - 1) }), /No matching signature/);
    assert.throws(() => new Webhook(newSecret()).verify(body, headers), /No matching signature/);
  });

  it("refuses malformed secrets, no secrets and fractional timestamps", () => {
    assert.throws(() => signPayload("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_1", 1, "{}"), TypeError);
    assert.throws(() => signPayload("whsec_", "msg_1", 1, "{}"), TypeError);
    assert.throws(() => signPayload("whsec_not base64!", "msg_1", 1, "{}"), TypeError);
    assert.throws(() => signatureHeader([], "msg_1", 1, "{}"), RangeError);
    assert.throws(() => signPayload(newSecret(), "msg_1", 1.5, "{}"), RangeError);
  });
});

describe("ids", () => {
  it("have their prefix and 26 Crockford base32 characters", () => {
    assert.match(newMessageId(), /^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.match(newEndpointId(), /^ep_[0-9A-HJKMNP-TV-Z]{26}$/);
  });

  it("start with the creation time in milliseconds", () => {
    const before = Date.now();
    const id = newMessageId().slice(4);
    const after = Date.now();
    const ms = [...id.slice(0, 10)].reduce((n, c) => n * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".indexOf(c), 0);
    assert.ok(ms >= before && ms <= after + 1, `${ms} in [${before}, ${after}]`);
  });

  it("sort in creation order, within one millisecond too", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 1000; i++) ids.push(newMessageId());
    await sleep(3);
    ids.push(newMessageId());
    assert.equal(new Set(ids).size, ids.length);
    assert.deepEqual([...ids].sort(), ids);
    const endpoints = [newEndpointId()];
    await sleep(3);
    endpoints.push(newEndpointId());
    assert.ok(endpoints[0]! < endpoints[1]!);
  });
});

describe("firstMessageIdAt (retention's cut)", () => {
  it("sorts above every message id made before the instant and at or below those made from it on", async () => {
    const before = newMessageId();
    await sleep(3);
    const cut = new Date();
    await sleep(3);
    const after = newMessageId();
    const first = firstMessageIdAt(cut);
    assert.match(first, /^msg_[0-9A-Z]{10}0{16}$/);
    assert.ok(before < first, `${before} < ${first}`);
    assert.ok(first < after, `${first} < ${after}`);
  });
});
