/**
 * Personal data, and what replaces it once its purpose is served (PII_RETENTION_DAYS after
 * an order finished): the rider's name and contact in the provider's payloads, the
 * customer's name, phone, address and position in the commands' requests, and wherever the
 * provider's answers and error texts echo them. Pure functions: each returns the redacted
 * copy, or null when there is nothing (left) to redact.
 */
import { isJsonObject } from "./normalise.ts";
import { asciiDigits } from "./text.ts";
import type { JsonObject } from "./normalise.ts";
import type { FoldState, Winner } from "./projection.ts";

export const REDACTED = "[redacted]";

/** Keys of the rider's personal data in a callback, top-level or under rider_details. */
const RIDER_KEYS = new Set(["rider_name", "rider_contact", "rider_contact_number", "virtual_contact_number", "rider_phone", "masked_rider_contact"]);
/** Keys of the customer's personal data under a request's customer_details. */
const CUSTOMER_KEYS = new Set(["name", "contact_number", "address_line_1", "address_line_2", "latitude", "longitude"]);
/**
 * The keys of CUSTOMER_KEYS that hold the customer's phone: only their values are looked for
 * in other spellings. A value elsewhere with a phone's worth of digits (a date written
 * "2026-11-26", a pincode pair in an address line) is no phone, and its digits are found
 * only as its own text.
 */
const PHONE_KEYS = new Set(["contact_number"]);

/**
 * `object` with the values of `keys` that hold something replaced; null when none did. The
 * copy is made of entries, not assignments: a body may carry a `__proto__` key (JSON.parse
 * makes it an own key, and jsonb keeps it), which an assignment would take for the copy's
 * prototype, losing the key.
 */
function redactKeys(object: JsonObject, keys: ReadonlySet<string>): JsonObject | null {
  let changed = false;
  const entries = Object.entries(object).map(([k, v]): [string, unknown] => {
    if (!keys.has(k) || v === null || v === REDACTED || v === "") return [k, v];
    changed = true;
    return [k, REDACTED];
  });
  return changed ? (Object.fromEntries(entries) as JsonObject) : null;
}

/** A provider payload without the rider's name and contact. */
export function redactEventPayload(payload: JsonObject): JsonObject | null {
  const top = redactKeys(payload, RIDER_KEYS);
  const details = payload["rider_details"];
  const nested = isJsonObject(details) ? redactKeys(details, RIDER_KEYS) : null;
  if (top === null && nested === null) return null;
  return { ...(top ?? payload), ...(nested !== null ? { rider_details: nested } : {}) };
}

/** A command's request without the customer's details (place and edit bodies carry them). */
export function redactCommandRequest(request: JsonObject): JsonObject | null {
  const customer = request["customer_details"];
  const redacted = isJsonObject(customer) ? redactKeys(customer, CUSTOMER_KEYS) : null;
  return redacted === null ? null : { ...request, customer_details: redacted };
}

/**
 * The customer's values an order's requests carry (name, phone, address, position), to be
 * found again wherever the provider echoes them. Values already redacted or empty are left
 * out.
 */
export interface CustomerValues {
  /** Lower-cased text values in NFC, longest first (a longer value is replaced before a part of it). */
  texts: string[];
  /** Numeric values (a position, a phone sent as a number), also matched as text. */
  numbers: number[];
  /**
   * Phone numbers (the values of PHONE_KEYS only) as their digits in ASCII, as sent: an echo
   * spells a phone its own way ("+91 98765 43210" sent, "9876543210" or "+91-98765-43210"
   * echoed; Devanagari or full-width digits either way), so it is matched digit by digit
   * (the last 10, with or without what came before them), never inside a longer run of
   * digits.
   */
  phones: string[];
}

/** A text shorter than this is replaced only where it is a whole value: as a part of one it would hit ordinary words. */
const MIN_PART_LENGTH = 3;

/**
 * A number that says who or where: a coordinate with decimals, or a phone's worth of
 * digits. A small whole number (a house number sent as a number) would also match an
 * answer's amounts and quantities, which stay.
 */
const identifying = (n: number) => !Number.isInteger(n) || Math.abs(n) >= 100_000;

/** Fewest digits that make a value a phone number, and the most of them matched (India's 10; a country code before them varies). */
const PHONE_MIN_DIGITS = 7;
const PHONE_DIGITS = 10;
/** What may stand between a phone's digits: spaces, hyphens and dashes, dots, slashes, brackets (full-width ones too). */
const PHONE_SEPARATOR = "[\\s\\p{Pd}\\p{Ps}\\p{Pe}./／．]";
const PHONE_LIKE = /^[+＋\s\p{Nd}\p{Pd}\p{Ps}\p{Pe}./／．]+$/u;

/**
 * Every decimal digit of the Basic Multilingual Plane by its value: "०" (Devanagari), "০"
 * (Bengali), "௦" (Tamil), "０" (full width)… Unicode encodes each script's digits as a run
 * of ten, zero first, so a digit's value is its place in its run. Patterns match a phone's
 * digits with these; a value's digits are read as ASCII by text.ts's asciiDigits.
 */
let digitsByValue: readonly string[] | null = null;
/** Built on first use (a pass over 65,536 code points): only redaction needs it. */
function digitClasses(): readonly string[] {
  digitsByValue ??= digitsOfTheBmp();
  return digitsByValue;
}

function digitsOfTheBmp(): string[] {
  const byValue: string[][] = Array.from({ length: 10 }, () => []);
  const isDigit = /^\p{Nd}$/u;
  let run = 0;
  for (let cp = 0; cp <= 0xffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) {
      run = 0;
      continue;
    }
    if (!isDigit.test(String.fromCharCode(cp))) {
      run = 0;
      continue;
    }
    byValue[run % 10]!.push(String.fromCharCode(cp));
    run++;
  }
  return byValue.map((chars) => chars.join(""));
}

/** A value's digits in ASCII when it reads as a phone number (enough digits, nothing but digits and separators), else null. */
function phoneDigits(value: string): string | null {
  if (!PHONE_LIKE.test(value)) return null;
  const digits = asciiDigits(value).replace(/[^0-9]/g, "");
  return digits.length >= PHONE_MIN_DIGITS ? digits : null;
}

/**
 * What stands before a phone's 10 digits in India without a "+": the country code (91) and
 * the trunk prefix (0). A number sent bare comes back so from systems that normalise it.
 */
const INDIAN_PREFIXES = ["91", "0"];

/** Digits (ASCII) as a pattern matching them in any script, with separators between them. */
const digitsPattern = (digits: string) => [...digits].map((d) => `[${digitClasses()[Number(d)]}]`).join(`${PHONE_SEPARATOR}*`);

/**
 * A pattern matching a phone's last 10 digits in any script, with separators between them,
 * where no other digit (of any script) stands right before or after them: a longer run of
 * digits (an amount, an id, an AWB number) that holds them is not the phone. Before them
 * may stand a country code: the digits sent before the last 10 (with or without a "+"),
 * a "+" and one to three digits, or India's own prefixes written without a "+" (91, and
 * the trunk 0: "919876543210", "09876543210"); it is not replaced.
 */
function phonePattern(digits: string): string {
  const significant = digits.slice(-PHONE_DIGITS);
  const prefix = digits.slice(0, -PHONE_DIGITS);
  const codes = [
    `[+＋]\\p{Nd}{1,3}`,
    ...INDIAN_PREFIXES.map(digitsPattern),
    ...(prefix === "" ? [] : [`[+＋]?${digitsPattern(prefix)}`]),
  ];
  return `(?<=(?:^|\\P{Nd})(?:(?:${codes.join("|")})${PHONE_SEPARATOR}*)?)${digitsPattern(significant)}(?!\\p{Nd})`;
}

/**
 * A text value as a pattern; one that begins or ends with a digit is not matched next to
 * another digit (inside a longer number). One that ends in a decimal fraction (a position,
 * "12.9716") takes the digits after it along: the same value written more precisely
 * ("12.97160") is the same position.
 */
function textPattern(text: string): string {
  const first = /^\p{Nd}/u.test(text) ? "(?<!\\p{Nd})" : "";
  const last = /\.\p{Nd}+$/u.test(text) ? "\\p{Nd}*" : /\p{Nd}$/u.test(text) ? "(?!\\p{Nd})" : "";
  return `${first}${escapeRegExp(text)}${last}`;
}

export function customerValues(requests: readonly unknown[]): CustomerValues {
  const texts = new Set<string>();
  const numbers = new Set<number>();
  const phones = new Set<string>();
  for (const request of requests) {
    const customer = isJsonObject(request) ? request["customer_details"] : undefined;
    if (!isJsonObject(customer)) continue;
    for (const [k, v] of Object.entries(customer)) {
      if (!CUSTOMER_KEYS.has(k)) continue;
      if (typeof v === "number" && Number.isFinite(v)) {
        if (identifying(v)) numbers.add(v);
        texts.add(String(v));
        const phone = PHONE_KEYS.has(k) && Number.isInteger(v) ? phoneDigits(String(Math.abs(v))) : null;
        if (phone !== null) phones.add(phone);
      } else if (typeof v === "string" && v.trim() !== "" && v !== REDACTED) {
        const trimmed = v.trim().normalize("NFC");
        texts.add(trimmed.toLowerCase());
        const phone = PHONE_KEYS.has(k) ? phoneDigits(trimmed) : null;
        if (phone !== null) phones.add(phone);
        if (/^-?\d+(\.\d+)?$/.test(trimmed) && identifying(Number(trimmed))) numbers.add(Number(trimmed));
      }
    }
  }
  return { texts: [...texts].sort((a, b) => b.length - a.length), numbers: [...numbers], phones: [...phones] };
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * `text` with each customer value in it replaced by "[redacted]" (case-insensitive); null
 * when none is there. A free-text answer or error ("invalid phone 98…", an HTML page) is
 * kept for diagnosis, without the customer in it.
 */
export function redactText(text: string, values: CustomerValues): string | null {
  if (text === REDACTED) return null;
  // Values are held in NFC: an echo that spells a name in another form is the same name.
  const nfc = text.normalize("NFC");
  if (values.texts.includes(nfc.trim().toLowerCase())) return REDACTED;
  const parts = [...values.texts.filter((v) => v.length >= MIN_PART_LENGTH).map(textPattern), ...values.phones.map(phonePattern)];
  if (parts.length === 0) return null;
  const pattern = new RegExp(parts.join("|"), "giu");
  // What an earlier run put in stays as it is: a value is never looked for inside "[redacted]".
  const out = nfc
    .split(REDACTED)
    .map((segment) => segment.replace(pattern, REDACTED))
    .join(REDACTED);
  return out === nfc ? null : out;
}

/**
 * What operations needs of an answer, never touched: the provider's and the merchant's ids,
 * the store, statuses, the tracking link and AWB numbers.
 */
const KEPT_ANSWER_KEYS = new Set([
  "svc_order_id",
  "sfx_order_id",
  "id",
  "client_order_id",
  "coid",
  "store_code",
  "status",
  "order_status",
  "track_url",
  "awb",
  "awb_number",
  "rts_order_id",
]);

/**
 * A whole number that is one of the customer's phones (sent as text, echoed as a number):
 * all its digits, as sent or without the country code (the last 10). A number that only
 * ends with them (an amount, an id) is not the phone.
 */
function isPhone(n: number, values: CustomerValues): boolean {
  if (!Number.isSafeInteger(n) || values.phones.length === 0) return false;
  const digits = String(Math.abs(n));
  return values.phones.some((phone) => {
    const significant = phone.slice(-PHONE_DIGITS);
    return digits === phone || digits === significant || INDIAN_PREFIXES.some((p) => digits === `${p}${significant}`);
  });
}

/** Walks one JSON value of an answer; undefined: unchanged. */
function redactAnswerValue(value: unknown, values: CustomerValues): unknown {
  if (typeof value === "string") return redactText(value, values) ?? undefined;
  if (typeof value === "number") return values.numbers.includes(value) || isPhone(value, values) ? REDACTED : undefined;
  if (Array.isArray(value)) {
    let changed = false;
    const items = value.map((item) => {
      const r = redactAnswerValue(item, values);
      if (r === undefined) return item;
      changed = true;
      return r;
    });
    return changed ? items : undefined;
  }
  if (!isJsonObject(value)) return undefined;
  let changed = false;
  // Entries, not assignments: a `__proto__` key stays a key (redactKeys).
  const entries = Object.entries(value).map(([k, v]): [string, unknown] => {
    if (KEPT_ANSWER_KEYS.has(k)) return [k, v];
    let next: unknown = v;
    if (k === "customer_details" && isJsonObject(v)) next = redactKeys(v, CUSTOMER_KEYS) ?? v;
    const deeper = redactAnswerValue(next, values);
    if (deeper !== undefined) next = deeper;
    if (next === v) return [k, v];
    changed = true;
    return [k, next];
  });
  return changed ? Object.fromEntries(entries) : undefined;
}

/**
 * A provider answer stored with a command without the customer's personal data: the
 * customer's keys under any `customer_details`, and the customer's values (`values`, from
 * the order's requests) wherever else they are echoed, as a whole value or inside a text.
 * Ids, statuses, the tracking link and AWB numbers stay. Null when nothing changed.
 */
export function redactProviderAnswer(answer: unknown, values: CustomerValues): unknown {
  const redacted = redactAnswerValue(answer, values);
  return redacted === undefined ? null : redacted;
}

/** A command's stored data, as domain code sees it (commands/store.ts CommandPersonalData). */
export interface CommandData {
  id: number;
  request: unknown;
  response: unknown;
  last_error: string | null;
}

/**
 * An order's commands without the customer's personal data: their requests' customer
 * details, and the same values wherever the provider's answers and error texts echo them
 * (`values`: customerValues of every request, read before any is redacted). Only the
 * commands that changed.
 */
export function redactCommandData(commands: readonly CommandData[], values: CustomerValues): CommandData[] {
  return commands.flatMap((c) => {
    const request = isJsonObject(c.request) ? redactCommandRequest(c.request) : null;
    const response = redactProviderAnswer(c.response, values);
    const lastError = c.last_error === null ? null : redactText(c.last_error, values);
    if (request === null && response === null && lastError === null) return [];
    return [{ id: c.id, request: request ?? c.request, response: response ?? c.response, last_error: lastError ?? c.last_error }];
  });
}

const redactedWinner = (w: Winner<string> | null): Winner<string> | null => (w === null || w.value === REDACTED ? w : { ...w, value: REDACTED });

/**
 * A stored fold state without the rider's name and contact, each stamp kept. A derivation
 * whose order lost events to retention takes what those events told from the stored state
 * (projection.ts withShed), and a rider's name last seen in a dropped location event would
 * otherwise outlive the redaction of the events that are left.
 */
export function redactState(state: FoldState): FoldState {
  return { ...state, riderName: redactedWinner(state.riderName), riderContact: redactedWinner(state.riderContact) };
}
