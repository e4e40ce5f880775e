/**
 * The layout's rules: the core is free of the transport (no feature imports from
 * src/http/; its DomainErrors become the API's codes in one table there), each table has
 * its one owner module, and routes hold no SQL.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { DomainError } from "../../src/domain/errors.ts";
import type { DomainErrorKind } from "../../src/domain/errors.ts";
import { statusOf, toApiError } from "../../src/http/errors.ts";

const SRC = join(import.meta.dirname, "../../src");
const CORE = ["domain", "db", "ingest", "events", "projection", "orders", "commands", "awb", "reconcile", "provider", "worker", "notify", "sessions", "retention"];

/** The modules allowed to write each table (docs/architecture.md, "Tables and their owners"). */
const OWNERS: Record<string, string[]> = {
  order_events: ["events/log.ts"],
  order_periods: ["events/log.ts"],
  // Inserted by order_events_attach_partition() (migration 0011), which only partitions.ts calls.
  event_partitions: ["events/partitions.ts"],
  // Queue rows are inserted by the append statement, with their events.
  projection_queue: ["projection/backlog.ts", "events/log.ts"],
  orders: ["orders/store.ts"],
  commands: ["commands/store.ts"],
  awb_numbers: ["awb/pool.ts"],
  awb_requests: ["awb/topup.ts"],
  rejected_callbacks: ["ingest/rejected.ts"],
  notification_endpoints: ["notify/endpoints.ts"],
  notification_messages: ["notify/outbox.ts"],
  notification_sequences: ["notify/outbox.ts"],
  // New deliveries are written by the outbox with their message; their state by deliveries.ts.
  notification_deliveries: ["notify/outbox.ts", "notify/deliveries.ts"],
  notification_attempts: ["notify/deliveries.ts"],
  console_sessions: ["sessions/store.ts"],
  console_marks: ["sessions/marks.ts"],
};

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []));
}

describe("layers", () => {
  it("no core module imports from src/http/", () => {
    const offenders = CORE.flatMap((d) => files(join(SRC, d))).filter((f) => /from\s+["'](\.\.\/)+http\//.test(readFileSync(f, "utf8")));
    assert.deepEqual(offenders, []);
  });

  it("each table is written by its owner module only", () => {
    const sources = files(SRC).filter((f) => !f.includes("/emulator/") && !f.includes("/db/schema/"));
    for (const [table, owners] of Object.entries(OWNERS)) {
      const write = new RegExp(`\\b(insert\\s+into|update|delete\\s+from)\\s+${table}\\b`, "i");
      const writers = sources.filter((f) => write.test(readFileSync(f, "utf8"))).map((f) => f.slice(SRC.length + 1));
      assert.deepEqual(writers.sort(), [...owners].sort(), `writers of ${table}`);
    }
  });

  it("routes hold no SQL", () => {
    const routes = files(join(SRC, "http"));
    const offenders = routes.filter((f) => /\b(sql|tx)(<[^>]*>)?`/.test(readFileSync(f, "utf8")));
    assert.deepEqual(offenders, []);
  });

  it("every refusal of the core becomes its API code and status", () => {
    const expected: Record<DomainErrorKind, [string, number]> = {
      order_not_found: ["order_not_found", 404],
      command_not_found: ["command_not_found", 404],
      conflict: ["conflict", 409],
      order_picked_up: ["order_picked_up", 409],
      notification_endpoint_not_found: ["notification_endpoint_not_found", 404],
      endpoint_url_forbidden: ["endpoint_url_forbidden", 422],
    };
    for (const [kind, [code, status]] of Object.entries(expected) as [DomainErrorKind, [string, number]][]) {
      const api = toApiError(new DomainError(kind, `refused: ${kind}`));
      assert.deepEqual([api.code, statusOf(api.code), api.message], [code, status, `refused: ${kind}`]);
    }
  });
});
