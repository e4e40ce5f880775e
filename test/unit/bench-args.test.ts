import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SERVICE_NODE_ARGS } from "../../bench/lib/processes.ts";

describe("benchmark service processes", () => {
  it("run with exactly the node flags of `npm run web`, read from its last command", () => {
    assert.ok(SERVICE_NODE_ARGS.length > 0);
    for (const arg of SERVICE_NODE_ARGS) assert.match(arg, /^--/, `not a node flag: ${arg}`);
  });
});
