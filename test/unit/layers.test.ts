/**
 * The core is free of the transport: no feature imports from src/http/, and the refusals
 * it throws (DomainError) become the API's codes in one table there.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DomainError } from "../../src/domain/errors.ts";
import type { DomainErrorKind } from "../../src/domain/errors.ts";
import { statusOf, toApiError } from "../../src/http/errors.ts";

const SRC = join(import.meta.dirname, "../../src");
const CORE = ["domain", "commands", "projection", "ingest", "reconcile", "awb", "provider", "db"];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));
}

describe("layers", () => {
  it("no core module imports from src/http/", () => {
    const offenders = CORE.flatMap((d) => files(join(SRC, d))).filter((f) => /from\s+["'](\.\.\/)+http\//.test(readFileSync(f, "utf8")));
    assert.deepEqual(offenders, []);
  });

  it("every refusal of the core becomes its API code and status", () => {
    const expected: Record<DomainErrorKind, [string, number]> = {
      order_not_found: ["order_not_found", 404],
      command_not_found: ["command_not_found", 404],
      conflict: ["conflict", 409],
      order_picked_up: ["order_picked_up", 409],
    };
    for (const [kind, [code, status]] of Object.entries(expected) as [DomainErrorKind, [string, number]][]) {
      const api = toApiError(new DomainError(kind, `refused: ${kind}`));
      assert.deepEqual([api.code, statusOf(api.code), api.message], [code, status, `refused: ${kind}`]);
    }
  });
});
