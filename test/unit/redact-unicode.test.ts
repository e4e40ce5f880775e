/**
 * Redaction finds the customer's values where the provider echoes them in another
 * spelling: a phone with other separators, without its country code, or in other digits
 * (Devanagari, Bengali, Tamil, full width); a name in another normalisation form.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { customerValues, REDACTED, redactCommandData, redactText } from "../../src/domain/redact.ts";

const request = (contact: string | number, name = "Jos\u00e9 \u0930\u093e\u092e") => ({
  store_code: "S1",
  customer_details: { name, contact_number: contact, address_line_1: "12, गांधी मार्ग", latitude: 12.9, longitude: 77.6 },
});

describe("redaction of phones spelt another way", () => {
  const values = customerValues([request("+91 98765 43210")]);
  const cases: [string, string][] = [
    ["invalid contact_number 9876543210", `invalid contact_number ${REDACTED}`],
    ["contact +91-98765-43210 is not reachable", `contact +91-${REDACTED} is not reachable`],
    ["phone +919876543210", `phone +91${REDACTED}`],
    ["फ़ोन ९८७६५४३२१० गलत है", `फ़ोन ${REDACTED} गलत है`],
    ["ফোন ৯৮৭৬৫ ৪৩২১০", `ফোন ${REDACTED}`],
    ["தொலைபேசி ௯௮௭௬௫௪௩௨௧௦", `தொலைபேசி ${REDACTED}`],
    ["tel ９８７６５－４３２１０", `tel ${REDACTED}`],
    ["(98765) 43210", `(${REDACTED}`],
  ];
  for (const [text, expected] of cases) {
    it(JSON.stringify(text), () => assert.equal(redactText(text, values), expected));
  }

  it("a phone given in Devanagari or full-width digits is found in ASCII ones", () => {
    for (const contact of ["९८७६५ ४३२१०", "＋９１ ９８７６５４３２１０", 919876543210]) {
      assert.equal(redactText("bad phone 98765-43210", customerValues([request(contact)])), `bad phone ${REDACTED}`, String(contact));
    }
  });

  it("finds a phone sent as text and echoed as a number in an answer", () => {
    const [changed] = redactCommandData([{ id: 1, request: request("+91 98765 43210"), response: { data: { phone: 919876543210, amount: 250 } }, last_error: null }], values);
    assert.deepEqual(changed?.response, { data: { phone: REDACTED, amount: 250 } });
  });

  it("leaves amounts, ids and short numbers alone", () => {
    assert.equal(redactText("order 12345 of 250.00 rupees, 3 items", values), null);
  });

  it("reaches a command's last error", () => {
    const [changed] = redactCommandData([{ id: 1, request: request("+91 98765 43210"), response: null, last_error: "provider client: 400: contact_number: 98765-43210 is invalid" }], values);
    assert.equal(changed?.last_error, `provider client: 400: contact_number: ${REDACTED} is invalid`);
  });
});

describe("redaction leaves a longer number and a value that is not a phone alone", () => {
  const values = customerValues([request("+91 98765 43210")]);

  it("finds the phone's digits only where no other digit (of any script) stands before or after them", () => {
    for (const text of [
      "awb 19876543210 allotted",
      "id 98765432101",
      "order value 298765432105",
      "ref ७९८७६५४३२१०",
      "ref ９８７６５４３２１０１",
    ]) {
      assert.equal(redactText(text, values), null, text);
    }
    // A country code before them is not another digit: the one sent, or a "+" and one to three digits.
    assert.equal(redactText("phone 919876543210", values), `phone 91${REDACTED}`);
    assert.equal(redactText("phone +1 9876543210.", customerValues([request("9876543210")])), `phone +1 ${REDACTED}.`);
  });

  it("finds a phone sent without a country code only as a whole run of digits too", () => {
    const bare = customerValues([request("9876543210")]);
    assert.equal(redactText("awb 19876543210, phone 9876543210", bare), `awb 19876543210, phone ${REDACTED}`);
  });

  it("finds a phone sent bare where it comes back with India's 91 or trunk 0 before it, as text or as a number", () => {
    const bare = customerValues([request("98765 43210")]);
    assert.equal(redactText("phone 919876543210 or 09876543210", bare), `phone 91${REDACTED} or 0${REDACTED}`);
    assert.equal(redactText("awb 19876543210", bare), null);
    const [changed] = redactCommandData(
      [{ id: 1, request: request("98765 43210"), response: { data: { phone: 919876543210, awb: 19876543210 } }, last_error: null }],
      bare,
    );
    assert.deepEqual(changed?.response, { data: { phone: REDACTED, awb: 19876543210 } });
  });

  it("an answer's whole number is the phone only when it is all of the phone's digits", () => {
    const [changed] = redactCommandData(
      [{ id: 1, request: request("+91 98765 43210"), response: { data: { phone: 9876543210, awb: 19876543210, order_id: 5919876543210, ref: 919876543210 } }, last_error: null }],
      values,
    );
    assert.deepEqual(changed?.response, { data: { phone: REDACTED, awb: 19876543210, order_id: 5919876543210, ref: REDACTED } });
  });

  it("a value that begins or ends with a digit is not found inside a longer number (a position's 12.9 in an amount)", () => {
    assert.equal(redactText("total 112.90 for 12 items", values), null);
    assert.equal(redactText("at 12.9, 77.6", values), `at ${REDACTED}, ${REDACTED}`);
    // A position written more precisely is the same position.
    assert.equal(redactText("at 12.900, 77.60", values), `at ${REDACTED}, ${REDACTED}`);
  });

  it("a value outside the phone's field with a phone's worth of digits (a date, a pincode pair) is not looked for as a phone", () => {
    const dated = customerValues([
      { customer_details: { name: "Asha", contact_number: "+91 98765 43210", address_line_1: "2026-11-26", address_line_2: "560 001 / 560 002" } },
    ]);
    assert.equal(redactText("created 20261126 at 10:00, pincodes 560001560002", dated), null);
    assert.equal(redactText("invalid contact 98765-43210", dated), `invalid contact ${REDACTED}`);
  });
});

describe("redaction of names in another normalisation form", () => {
  it("finds a name echoed decomposed (e + U+0301) when it was sent composed, and the other way", () => {
    const composed = customerValues([request("1", "Jos\u00e9 Kumar")]);
    assert.equal(redactText("customer Jose\u0301 Kumar not found", composed), `customer ${REDACTED} not found`);
    const decomposed = customerValues([request("1", "Jose\u0301 Kumar")]);
    assert.equal(redactText("customer Jos\u00e9 Kumar not found", decomposed), `customer ${REDACTED} not found`);
  });
});
