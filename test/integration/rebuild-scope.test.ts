/**
 * `npm run rebuild`'s scopes (src/projection/rebuild.ts, src/rebuild.ts): every order, an id
 * range of orders, the orders of events received since a time; a log whose orders are all
 * missing is rebuilt from the log alone; the command line's refusals.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { rebuild } from "../../src/projection/rebuild.ts";
import type { RebuildProgress } from "../../src/projection/rebuild.ts";
import { scopeOf } from "../../src/rebuild.ts";
import { RebuildFailedError, describeStartupError } from "../../src/runtime/startup-errors.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
  // Six orders, two events each.
  for (let i = 1; i <= 6; i++) {
    await t.callback({ client_order_id: `RB-${i}`, svc_order_id: String(990_000 + i), order_status: "ALLOTTED", timestamp: "2026-11-23T09:00:00Z" });
    await t.callback({ client_order_id: `RB-${i}`, svc_order_id: String(990_000 + i), order_status: "DELIVERED", timestamp: "2026-11-23T09:30:00Z" });
  }
  await t.runJobs();
});
after(async () => {
  await t.close();
});

const statuses = async () =>
  Object.fromEntries(
    (await t.database.sql<{ client_order_id: string; status: string }[]>`select client_order_id, status from orders where client_order_id like 'RB-%' order by id`).map((r) => [
      r.client_order_id,
      r.status,
    ]),
  );
const idOf = async (coid: string) => (await t.database.sql<{ id: number }[]>`select id from orders where client_order_id = ${coid}`)[0]!.id;
const damage = async () => t.database.sql`update orders set status = 'CREATED', event_count = 0 where client_order_id like 'RB-%'`;

describe("rebuild's scopes", () => {
  it("an id range of orders repairs those orders and touches no other", async () => {
    await damage();
    const [from, to] = [await idOf("RB-2"), await idOf("RB-3")];
    const result = await rebuild(t.database.sql, { fromOrderId: from, toOrderId: to });
    assert.deepEqual([result.orders, result.changed, result.read], [2, 2, 0], "no log read for a range");
    assert.deepEqual(await statuses(), { "RB-1": "CREATED", "RB-2": "DELIVERED", "RB-3": "DELIVERED", "RB-4": "CREATED", "RB-5": "CREATED", "RB-6": "CREATED" });
  });

  it("--since repairs the orders of events received since then, found by a binary search of the log", async () => {
    await damage();
    // The events of RB-5 and RB-6 arrived later than the rest.
    await t.database.sql`alter table order_events disable trigger user`;
    try {
      await t.database.sql`update order_events set received_at = received_at - interval '2 days' where client_order_id not in ('RB-5', 'RB-6')`;
    } finally {
      await t.database.sql`alter table order_events enable trigger user`;
    }
    const result = await rebuild(t.database.sql, { since: new Date(Date.now() - 86_400_000) });
    assert.equal(result.changed, 2);
    assert.deepEqual(await statuses(), { "RB-1": "CREATED", "RB-2": "CREATED", "RB-3": "CREATED", "RB-4": "CREATED", "RB-5": "DELIVERED", "RB-6": "DELIVERED" });
    assert.deepEqual(await rebuild(t.database.sql, { since: new Date(Date.now() + 3_600_000) }), { orders: 0, changed: 0, read: 0 }, "nothing received since: nothing to do");
  });

  it("everything: every order repaired, and orders whose rows are gone made again from the log, in slices, with progress", async () => {
    await damage();
    await t.database.sql`delete from orders where client_order_id in ('RB-1', 'RB-4')`;
    const seen: RebuildProgress[] = [];
    const result = await rebuild(t.database.sql, {}, (p) => seen.push(p));
    assert.ok(result.changed >= 6, JSON.stringify(result));
    assert.deepEqual(await statuses(), { "RB-2": "DELIVERED", "RB-3": "DELIVERED", "RB-5": "DELIVERED", "RB-6": "DELIVERED", "RB-1": "DELIVERED", "RB-4": "DELIVERED" });
    assert.ok(seen.some((p) => p.phase === "orders") && seen.some((p) => p.phase === "keys"), "both phases reported");
    // The order rows' phase says how far it is through their ids, and ends at all of them.
    const orders = seen.filter((p) => p.phase === "orders");
    const [maxId] = await t.database.sql<{ id: number }[]>`select max(id)::int as id from orders where client_order_id not in ('RB-1', 'RB-4')`;
    assert.ok(orders.every((p, i) => p.total > 0 && p.read <= p.total && (i === 0 || p.read >= orders[i - 1]!.read)), JSON.stringify(orders));
    assert.equal(orders[orders.length - 1]!.read, orders[orders.length - 1]!.total, JSON.stringify(orders));
    assert.ok(orders[0]!.total >= maxId!.id, "the range runs to the last order row's id");
    const last = seen[seen.length - 1]!;
    assert.equal(last.read, last.total, "every order key of the log read");
    assert.equal((await rebuild(t.database.sql)).changed, 0, "a second run changes nothing");
  });

  it("a stop signal (SIGINT, SIGTERM) ends it between pages, with the pages begun committed, saying how far it got", async () => {
    await damage();
    const stopping = new AbortController();
    const seen: RebuildProgress[] = [];
    const result = await rebuild(
      t.database.sql,
      {},
      (p) => {
        seen.push(p);
        stopping.abort();
      },
      stopping.signal,
    );
    const [maxId] = await t.database.sql<{ id: number }[]>`select max(id)::int as id from orders`;
    assert.deepEqual(result.stopped, { phase: "orders", throughOrderId: maxId!.id }, JSON.stringify(result));
    assert.ok(!seen.some((p) => p.phase === "keys"), "no page begun after the signal");
    assert.ok(Object.values(await statuses()).every((s) => s === "DELIVERED"), "the page in flight committed");
    const since = await rebuild(t.database.sql, { since: new Date(0) }, undefined, AbortSignal.abort());
    assert.deepEqual(since, { orders: 0, changed: 0, read: 0, stopped: { phase: "log", throughOrderId: null } });
  });
});

describe("the rebuild command line", () => {
  it("takes --orders FROM-TO or --since ISO-TIME, and refuses anything else with a sentence and the usage", () => {
    assert.deepEqual(scopeOf([]), {});
    assert.deepEqual(scopeOf(["--orders", "10-20"]), { fromOrderId: 10, toOrderId: 20 });
    assert.deepEqual(scopeOf(["--since", "2026-11-01T00:00:00Z"]), { since: new Date("2026-11-01T00:00:00Z") });
    for (const [args, pattern] of [
      [["--orders", "20-10"], /--orders must be FROM-TO/],
      [["--orders", "abc"], /--orders must be FROM-TO/],
      [["--since", "yesterday"], /--since must be an ISO 8601 time/],
      [["--orders", "1-2", "--since", "2026-11-01"], /exclude each other/],
      [["--all"], /Unknown option '--all'/],
    ] as const) {
      const said = scopeOf(args);
      assert.equal(typeof said, "string", args.join(" "));
      assert.match(said as string, pattern);
      assert.match(said as string, /usage: npm run rebuild/);
    }
  });

  it("--since: a time without Z or an offset is refused, not read in the host's zone; a date alone is its UTC midnight", () => {
    const zone = process.env.TZ;
    try {
      for (const tz of ["America/New_York", "Asia/Kolkata"]) {
        process.env.TZ = tz;
        for (const since of ["2026-11-01T10:00:00", "2026-11-01T10:00", "2026-11-01 10:00:00"]) {
          const said = scopeOf(["--since", since]);
          assert.equal(typeof said, "string", `${since} in ${tz}`);
          assert.match(said as string, /--since must be an ISO 8601 time with Z or an offset, or a date/);
        }
        assert.deepEqual(scopeOf(["--since", "2026-11-01T10:00:00+05:30"]), { since: new Date("2026-11-01T04:30:00Z") }, tz);
        assert.deepEqual(scopeOf(["--since", "2026-11-01"]), { since: new Date("2026-11-01T00:00:00Z") }, tz);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("--help is the usage, not an error; --since takes a date or a time with its zone, and refuses one this machine's zone would read, or a day that does not exist", () => {
    assert.equal(scopeOf(["--help"]), null);
    assert.equal(scopeOf(["-h"]), null);
    assert.deepEqual(scopeOf(["--since", "2026-11-01"]), { since: new Date("2026-11-01T00:00:00Z") });
    assert.deepEqual(scopeOf(["--since", "2026-11-01T05:30:00+05:30"]), { since: new Date("2026-11-01T00:00:00Z") });
    // Without a zone, `new Date()` reads it in the machine's zone: a rebuild "since midnight"
    // on a server west of UTC would leave out the orders of the first hours, silently.
    // 2026-02-30 would be read as 2 March.
    for (const since of ["2026-11-01T00:00:00", "2026-11-01 00:00", "2026-02-30", "2026-02-30T00:00:00Z", "2026-11-31T00:00:00Z"]) {
      const said = scopeOf(["--since", since]);
      assert.equal(typeof said, "string", since);
      assert.match(said as string, /--since must be an ISO 8601 time with Z or an offset, or a date/, since);
    }
  });

  it("--since takes every ISO 8601 time with its zone: minutes only, fractional seconds, an offset, a lowercase t or z", () => {
    const zone = process.env.TZ;
    try {
      for (const tz of ["America/New_York", "Asia/Kolkata"]) {
        process.env.TZ = tz;
        for (const [since, at] of [
          ["2026-11-01T00:00Z", "2026-11-01T00:00:00Z"],
          ["2026-11-01T10:00+05:30", "2026-11-01T04:30:00Z"],
          ["2026-11-01T10:00-0330", "2026-11-01T13:30:00Z"],
          ["2026-11-01T10:00+05", "2026-11-01T05:00:00Z"],
          ["2026-11-01T00:00:00.5Z", "2026-11-01T00:00:00.500Z"],
          ["2026-11-01T00:00:00.123456+05:30", "2026-10-31T18:30:00.123Z"],
          ["2026-11-01t00:00:00z", "2026-11-01T00:00:00Z"],
          ["2026-11-01t00:00z", "2026-11-01T00:00:00Z"],
          ["2026-11-01 10:15+00", "2026-11-01T10:15:00Z"],
        ] as const) {
          assert.deepEqual(scopeOf(["--since", since]), { since: new Date(at) }, `${since} in ${tz}`);
        }
        // Still refused with the same sentence: no zone, or a time that does not exist.
        for (const since of ["2026-11-01T00:00", "2026-11-01t00:00", "2026-11-01T24:00Z", "2026-11-01T10:60Z", "2026-11-01T10Z", "2026-11-01T10:00+24:00"]) {
          const said = scopeOf(["--since", since]);
          assert.equal(typeof said, "string", `${since} in ${tz}`);
          assert.match(said as string, /--since must be an ISO 8601 time with Z or an offset, or a date/, since);
        }
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("--since takes a time as PostgreSQL writes it (a received_at copied from psql: a space, an offset in hours), as before the zone rule", () => {
    const zone = process.env.TZ;
    try {
      for (const tz of ["America/New_York", "Asia/Kolkata"]) {
        process.env.TZ = tz;
        assert.deepEqual(scopeOf(["--since", "2026-11-01 10:15:00.123+00"]), { since: new Date("2026-11-01T10:15:00.123Z") }, tz);
        assert.deepEqual(scopeOf(["--since", "2026-11-01 10:15:00+05:30"]), { since: new Date("2026-11-01T04:45:00Z") }, tz);
        assert.deepEqual(scopeOf(["--since", "2026-11-01T10:15:00-0330"]), { since: new Date("2026-11-01T13:45:00Z") }, tz);
        assert.deepEqual(scopeOf(["--since", "2026-11-01 10:15:00Z"]), { since: new Date("2026-11-01T10:15:00Z") }, tz);
        // Still refused: no zone, or a day that does not exist, written either way.
        for (const since of ["2026-11-01 10:15:00", "2026-11-01 10:15:00.123", "2026-02-30 00:00:00+00", "2026-11-01 25:00:00+00"]) {
          assert.equal(typeof scopeOf(["--since", since]), "string", `${since} in ${tz}`);
        }
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("refuses the flags npm took for itself (written before --) instead of rebuilding every order", () => {
    // `npm run rebuild --orders=1-5`: no argument reaches it, npm_config_orders=1-5 does.
    for (const [argv, env] of [
      [[], { npm_config_orders: "1-5" }],
      [["1-5"], { npm_config_orders: "true" }],
      [["2026-11-01T00:00:00Z"], { npm_config_since: "true" }],
    ] as const) {
      const said = scopeOf(argv, env);
      assert.equal(typeof said, "string", JSON.stringify(env));
      assert.match(said as string, /^npm took --(orders|since) for itself \(a program's flags go after `--`\), so nothing was done: write e\.g\. npm run <script> -- --(orders|since)\nusage: npm run rebuild/);
    }
    assert.deepEqual(scopeOf(["--orders", "1-5"], { npm_config_cache: "/x" }), { fromOrderId: 1, toOrderId: 5 });
  });

  it("a failure after it began says how far it got and that it is safe to run again, not that the start failed", () => {
    const cause = Object.assign(new Error("deadlock detected"), { code: "40P01" });
    const { exitCode, lines } = describeStartupError(new RebuildFailedError({ orders: 1500, changed: 3 }, cause), {}, true);
    assert.equal(exitCode, 1);
    assert.deepEqual(lines, [
      "tracklane: rebuild failed after 1500 orders (3 changed): deadlock detected. Each order is re-derived whole or not at all, and those done are kept: run it again once that is fixed",
    ]);
  });
});
