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

describe("redaction of names in another normalisation form", () => {
  it("finds a name echoed decomposed (e + U+0301) when it was sent composed, and the other way", () => {
    const composed = customerValues([request("1", "Jos\u00e9 Kumar")]);
    assert.equal(redactText("customer Jose\u0301 Kumar not found", composed), `customer ${REDACTED} not found`);
    const decomposed = customerValues([request("1", "Jose\u0301 Kumar")]);
    assert.equal(redactText("customer Jos\u00e9 Kumar not found", decomposed), `customer ${REDACTED} not found`);
  });
});
