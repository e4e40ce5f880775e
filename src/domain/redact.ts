/**
 * Personal data, and what replaces it once its purpose is served (PII_RETENTION_DAYS after
 * an order finished): the rider's name and contact in the provider's payloads, the
 * customer's name, phone, address and position in the commands' requests. Pure functions:
 * each returns the redacted copy, or null when there is nothing (left) to redact.
 */
import { isJsonObject } from "./normalise.ts";
import type { JsonObject } from "./normalise.ts";
import type { FoldState, Winner } from "./projection.ts";

export const REDACTED = "[redacted]";

/** Keys of the rider's personal data in a callback, top-level or under rider_details. */
const RIDER_KEYS = new Set(["rider_name", "rider_contact", "rider_contact_number", "virtual_contact_number", "rider_phone", "masked_rider_contact"]);
/** Keys of the customer's personal data under a request's customer_details. */
const CUSTOMER_KEYS = new Set(["name", "contact_number", "address_line_1", "address_line_2", "latitude", "longitude"]);

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
