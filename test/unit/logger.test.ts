import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { captureLog } from "../helpers/log.ts";

const SECRET = "s3cret-value-that-must-not-appear";

/** Logs one line with secrets in it and returns what reached the destination. */
const logWith = (format: "json" | "pretty") =>
  captureLog(format, (log) => log.info({ apiToken: SECRET, headers: { authorization: `Bearer ${SECRET}` }, order: "A-1" }, "order received"));

describe("log formats", () => {
  it("json: one JSON object a line, secrets redacted", async () => {
    const lines = await logWith("json");
    assert.ok(lines.length >= 1);
    for (const line of lines) {
      const entry = JSON.parse(line) as Record<string, unknown>;
      assert.equal(entry.msg, "order received");
      assert.equal(entry.apiToken, "[redacted]");
      assert.equal(entry.order, "A-1");
    }
    assert.ok(!lines.join("\n").includes(SECRET));
  });

  it("pretty: readable lines (not JSON) with the level and message, secrets redacted", async () => {
    const lines = await logWith("pretty");
    assert.ok(lines.length >= 1);
    assert.throws(() => JSON.parse(lines[0]!));
    assert.match(lines[0]!, /INFO.*order received/);
    const text = lines.join("\n");
    assert.match(text, /apiToken: "\[redacted\]"/);
    assert.match(text, /order: "A-1"/);
    assert.ok(!text.includes(SECRET));
    assert.ok(!text.includes("\u001b["), "no colour codes into a captured stream");
  });
});
