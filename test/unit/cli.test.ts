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
