/**
 * src/db/columns.ts: what the set-based writes send beside postgres.js's own array
 * parameters. JSON lines must split back into exactly the texts joined, whatever the texts
 * hold; a text with a raw newline is refused rather than split in two.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { arrayLiteral, jsonLines } from "../../src/db/columns.ts";

describe("jsonLines", () => {
  it("joins JSON.stringify's output so that splitting on newlines gives each text back", () => {
    const values = [
      { name: "line one\nline two\r\n", note: 'quote " backslash \\ tab \t' },
      { sep: "\u2028\u2029", nul: "\u0000", emoji: "🛵", empty: "" },
      "just a string\n",
      null,
      [1, 2.5, -0, 1e21],
    ];
    const texts = values.map((v) => JSON.stringify(v));
    const joined = jsonLines(texts);
    assert.deepEqual(joined.split("\n"), texts);
    assert.deepEqual(
      joined.split("\n").map((t) => JSON.parse(t) as unknown),
      values.map((v) => JSON.parse(JSON.stringify(v)) as unknown),
    );
  });

  it("refuses a text holding a raw newline: it would arrive as two rows", () => {
    assert.throws(() => jsonLines(['{"a":1}', '{"a":\n2}']), /raw newline/);
  });
});

describe("arrayLiteral", () => {
  it("quotes every element and escapes quotes and backslashes", () => {
    assert.equal(arrayLiteral([]), "{}");
    assert.equal(arrayLiteral(["a", "NULL", 'q"1\\x,{y}']), '{"a","NULL","q\\"1\\\\x,{y}"}');
  });
});
