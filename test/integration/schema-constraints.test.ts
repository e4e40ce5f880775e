/**
 * Invariants the code relies on, held by the database itself, so that a bug, an older
 * release still running during an upgrade or a person with psql cannot break them.
 *
 * awb_numbers: a number linked to an order (client_order_id) is allocated. Allocation
 * answers an order with the number linked to it whatever its state, and hands the oldest
 * available number to the next caller: an available number that still named an order (a
 * number "put back" by hand, its order left on it) went to that order and to another one,
 * one waybill on two parcels.
 *
 * A constraint added to a table that can be large is added NOT VALID in its migration
 * (new rows are checked at once; the migration's lock lasts no scan) and validated by the
 * runner afterwards, outside the migrations' transaction, while writes go on.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { allocateAwb } from "../../src/awb/pool.ts";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { MIGRATIONS } from "../../src/db/ready.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let db: TestDatabase;
let sql: ReturnType<typeof driverSql>;
before(async () => {
  db = await createTestDatabase();
  sql = driverSql(db.url, { max: 4 });
});
after(async () => {
  await sql.end();
  await db.drop();
});

const CHECK_VIOLATION = "23514";

async function refused(statement: Promise<unknown>, constraint: string): Promise<void> {
  await statement.then(
    () => assert.fail(`accepted a row ${constraint} should refuse`),
    (err: unknown) => {
      assert.equal((err as { code?: string }).code, CHECK_VIOLATION, String(err));
      assert.equal((err as { constraint_name?: string }).constraint_name, constraint);
    },
  );
}

function capturing() {
  const lines: { level: number; msg: string; constraint?: string }[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  return { log: createLogger({ level: "info", format: "json", destination }), lines };
}

describe("awb_numbers: a number that names an order is allocated", () => {
  it("refuses an available number that names an order, inserted or put back by hand", async () => {
    await refused(sql`insert into awb_numbers (awb_number, source, client_order_id) values ('SFC1TST', 'pool', 'ord-c1')`, "awb_numbers_order_allocated");
    await sql`insert into awb_numbers (awb_number, source) values ('SFC2TST', 'pool')`;
    await sql`update awb_numbers set state = 'allocated', allocated_at = now(), client_order_id = 'ord-c2' where awb_number = 'SFC2TST'`;
    // Put back in the pool with its order left on it.
    await refused(sql`update awb_numbers set state = 'available', allocated_at = null where awb_number = 'SFC2TST'`, "awb_numbers_order_allocated");
    // Put back properly: allowed.
    await sql`update awb_numbers set state = 'available', allocated_at = null, client_order_id = null where awb_number = 'SFC2TST'`;
  });

  it("lets allocation do what it does: with an order, again for it, and without one", async () => {
    await sql`insert into awb_numbers (awb_number, source, created_at) values ('SFC3TST', 'pool', now() - interval '3 hours'), ('SFC4TST', 'pool', now() - interval '2 hours')`;
    assert.deepEqual(await allocateAwb(sql, { clientOrderId: "ord-c3", lowWatermark: 0 }), { awbNumber: "SFC3TST" });
    assert.deepEqual(await allocateAwb(sql, { clientOrderId: "ord-c3", lowWatermark: 0 }), { awbNumber: "SFC3TST" });
    assert.deepEqual(await allocateAwb(sql, { lowWatermark: 0 }), { awbNumber: "SFC4TST" });
    const rows = await sql<{ awb_number: string; state: string; client_order_id: string | null }[]>`
      select awb_number, state, client_order_id from awb_numbers order by awb_number`;
    assert.deepEqual(
      rows.map((r) => [r.awb_number, r.state, r.client_order_id]),
      [
        ["SFC2TST", "available", null],
        ["SFC3TST", "allocated", "ord-c3"],
        ["SFC4TST", "allocated", null],
      ],
    );
  });

  it("is validated by the migration run, after the migrations' transaction", async () => {
    const [c] = await sql<{ validated: boolean }[]>`
      select convalidated as validated from pg_constraint where conname = 'awb_numbers_order_allocated' and conrelid = 'awb_numbers'::regclass`;
    assert.equal(c?.validated, true);
  });

  it("an upgrade over rows that break it still completes: new rows are checked, the old ones named, and the next run validates once they are fixed", async () => {
    const tag = MIGRATIONS.find((m) => m.tag.endsWith("_awb_order_allocated"))!;
    await sql`alter table awb_numbers drop constraint awb_numbers_order_allocated`;
    await sql`delete from drizzle.__drizzle_migrations where created_at = ${tag.when}`;
    await sql`insert into awb_numbers (awb_number, source, client_order_id) values ('SFC9TST', 'pool', 'ord-c9')`;
    const first = capturing();
    await runMigrations(db.url, first.log);
    const warned = first.lines.find((l) => l.constraint === "awb_numbers_order_allocated");
    assert.ok(warned !== undefined && warned.level === 40, JSON.stringify(first.lines));
    const [c] = await sql<{ validated: boolean }[]>`select convalidated as validated from pg_constraint where conname = 'awb_numbers_order_allocated'`;
    assert.equal(c?.validated, false);
    await refused(sql`insert into awb_numbers (awb_number, source, client_order_id) values ('SFC10TST', 'pool', 'ord-c10')`, "awb_numbers_order_allocated");
    await sql`update awb_numbers set client_order_id = null where awb_number = 'SFC9TST'`;
    const second = capturing();
    await runMigrations(db.url, second.log);
    assert.equal(second.lines.filter((l) => l.level >= 40).length, 0, JSON.stringify(second.lines));
    const [v] = await sql<{ validated: boolean }[]>`select convalidated as validated from pg_constraint where conname = 'awb_numbers_order_allocated'`;
    assert.equal(v?.validated, true);
  });
});

describe("validating after the migrations", () => {
  it("is not cut short by a statement_timeout the database sets: a VALIDATE reads the whole table, holding up no write", async () => {
    // A check whose VALIDATE takes 1.5 s (one row, a pause per row), under a 1 s timeout.
    await sql`create table sc_slow (x int)`;
    await sql`insert into sc_slow values (1)`;
    await sql`alter table sc_slow add constraint sc_slow_check check (length(pg_sleep(1.5)::text) >= 0) not valid`;
    await sql.unsafe(`alter database "${db.name}" set statement_timeout = '1s'`);
    try {
      await runMigrations(db.url, capturing().log);
      const [c] = await sql<{ validated: boolean }[]>`select convalidated as validated from pg_constraint where conname = 'sc_slow_check'`;
      assert.equal(c?.validated, true);
    } finally {
      await sql.unsafe(`alter database "${db.name}" reset statement_timeout`);
      await sql`drop table sc_slow`;
    }
  });
});
