import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { parseEnv } from "node:util";
import { describe, it } from "node:test";
import { ENV_EXAMPLE_PATH, renderEnvExample } from "../../scripts/env-example.ts";
import { envVariables } from "../../src/config.ts";

describe(".env.example", () => {
  const committed = readFileSync(ENV_EXAMPLE_PATH, "utf8");

  it("is what `npm run env:example` writes from the schema now (run it after changing src/config.ts)", () => {
    const fresh = renderEnvExample();
    if (committed === fresh) return;
    const a = committed.split("\n");
    const b = fresh.split("\n");
    const i = a.findIndex((line, n) => line !== b[n]);
    assert.fail(`.env.example is stale at line ${(i < 0 ? a.length : i) + 1}: has ${JSON.stringify(a[i])}, the schema gives ${JSON.stringify(b[i < 0 ? a.length : i])}; run \`npm run env:example\``);
  });

  it("lists every schema variable with its default, meaning and example", () => {
    const variables = envVariables();
    assert.ok(variables.length >= 30 && variables.some((v) => v.name === "LOG_FORMAT") && variables.some((v) => v.name === "METRICS_TOKEN"));
    for (const v of variables) {
      assert.ok(committed.includes(`\n# ${v.name}=${v.default ?? ""}\n`), `${v.name} is missing`);
      assert.ok(committed.includes(`#   e.g. ${v.name}=${v.example}\n`), `${v.name} has no example`);
    }
    assert.ok(committed.includes("\n# PORT=3000\n") && committed.includes("\n# PROVIDER_DEDUPES_ORDERS=false\n"));
    assert.ok(committed.includes("\n# PROVIDER_PATHS=\n") && !committed.includes("[object"), "PROVIDER_PATHS's default is unset, not a parsed object");
  });

  it("sets nothing when copied to .env as it is", () => {
    assert.deepEqual(parseEnv(committed), {});
    for (const line of committed.split("\n")) assert.ok(line === "" || line.startsWith("#"), `not commented out: ${line}`);
  });
});
