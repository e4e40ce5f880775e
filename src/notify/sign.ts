/**
 * Standard Webhooks signing (standardwebhooks.com): `whsec_` secrets, `v1,<base64 HMAC-SHA256>`
 * signatures over `${id}.${timestamp}.${body}`, the webhook-* headers, and time-ordered ids.
 */
import { createHmac, createSecretKey, randomBytes } from "node:crypto";
import type { KeyObject } from "node:crypto";

const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** A new endpoint secret: `whsec_` + base64 of 24 random bytes. */
export function newSecret(): string {
  return SECRET_PREFIX + randomBytes(24).toString("base64");
}

/** Keys already decoded: an HMAC keyed with a KeyObject costs a quarter of one keyed with a Buffer. */
const keys = new Map<string, KeyObject>();
const KEYS_KEPT = 1000;

function keyOf(secret: string): KeyObject {
  const known = keys.get(secret);
  if (known) return known;
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : "";
  // Buffer.from(…, "base64") skips invalid characters silently: a mangled secret would sign with the wrong key.
  if (!BASE64.test(encoded)) throw new TypeError("webhook secret must be whsec_ followed by base64");
  const key = createSecretKey(Buffer.from(encoded, "base64"));
  if (keys.size >= KEYS_KEPT) keys.clear();
  keys.set(secret, key);
  return key;
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the decoded secret. */
export function signPayload(secret: string, id: string, timestampS: number, body: string): string {
  if (!Number.isSafeInteger(timestampS)) throw new RangeError(`timestamp must be whole seconds, got ${timestampS}`);
  const mac = createHmac("sha256", keyOf(secret)).update(`${id}.${timestampS}.${body}`, "utf8").digest("base64");
  return `v1,${mac}`;
}

/** The webhook-signature value: one signature per secret (a rotated-out secret may still sign), space-separated. */
export function signatureHeader(secrets: readonly string[], id: string, timestampS: number, body: string): string {
  if (secrets.length === 0) throw new RangeError("at least one secret is needed to sign");
  return secrets.map((s) => signPayload(s, id, timestampS, body)).join(" ");
}

export function webhookHeaders(secrets: readonly string[], id: string, timestampS: number, body: string): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampS),
    "webhook-signature": signatureHeader(secrets, id, timestampS, body),
    "content-type": "application/json",
  };
}

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const RANDOM_MAX = (1n << 80n) - 1n;
let lastMs = -1;
let lastRandom = 0n;

/**
 * 26 Crockford base32 characters: a 48-bit millisecond timestamp then 80 random bits (a ULID).
 * Within one millisecond (or if the clock steps back) the previous random part is incremented,
 * so the ids of this process sort in creation order.
 */
function timeOrderedId(): string {
  let ms = Date.now();
  let random: bigint;
  if (ms <= lastMs) {
    ms = lastMs;
    random = lastRandom + 1n;
    if (random > RANDOM_MAX) {
      ms += 1;
      random = BigInt(`0x${randomBytes(10).toString("hex")}`);
    }
  } else {
    random = BigInt(`0x${randomBytes(10).toString("hex")}`);
  }
  lastMs = ms;
  lastRandom = random;
  let out = "";
  for (let i = 0, t = ms; i < 10; i++, t = Math.floor(t / 32)) out = CROCKFORD[t % 32]! + out;
  let tail = "";
  for (let i = 0, r = random; i < 16; i++, r >>= 5n) tail = CROCKFORD[Number(r & 31n)]! + tail;
  return out + tail;
}

/** The lowest message id of `at`'s millisecond: every message created before `at` has an id below it. */
export function firstMessageIdAt(at: Date): string {
  let out = "";
  for (let i = 0, t = at.getTime(); i < 10; i++, t = Math.floor(t / 32)) out = CROCKFORD[t % 32]! + out;
  return `msg_${out}${"0".repeat(16)}`;
}

/** `msg_` + a time-ordered id; also the webhook-id header (stable across retries of one message). */
export function newMessageId(): string {
  return `msg_${timeOrderedId()}`;
}

export function newEndpointId(): string {
  return `ep_${timeOrderedId()}`;
}
