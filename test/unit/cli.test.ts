import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseCommandLine } from "../../src/runtime/cli.ts";

describe("parseCommandLine", () => {
  it("refuses a flag npm took for itself (written before `--`), e.g. npm run migrate --after-restore", () => {
    const line = parseCommandLine([], { "after-restore": { type: "boolean" } }, { npm_config_after_restore: "true" });
    assert.ok("error" in line, JSON.stringify(line));
    assert.match(line.error, /npm took --after-restore for itself/);
    assert.deepEqual(parseCommandLine(["--after-restore"], { "after-restore": { type: "boolean" } }, {}), { help: false, values: { "after-restore": true } });
  });
});

describe("a flag given twice", () => {
  it("a value flag given twice is refused, not silently the last (npm run rebuild -- --orders 1-5 --orders 6-9)", () => {
    const line = parseCommandLine(["--orders", "1-5", "--orders=6-9"], { orders: { type: "string" } });
    assert.ok("error" in line, JSON.stringify(line));
    assert.match(line.error, /--orders given 2 times \(1-5, 6-9\)/);
  });
});
