/**
 * `npm run migrate` as deploys run it (src/db/migrate.ts): a second run at once waits for
 * the first and says so; a migration that fails leaves every migration of that run
 * unapplied and the next run starts again from it (drizzle applies them in one
 * transaction); a migration missing below newer applied ones, which drizzle would pass
 * over for ever, is refused; a database a later release migrated is said so.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { MIGRATIONS, MigrationFailedError, MigrationsSkippedError, migrationPlan } from "../../src/db/ready.ts";
import { describeTarget } from "../../src/db/url.ts";
import { createLogger } from "../../src/logger.ts";
import { describeStartupError } from "../../src/runtime/startup-errors.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let db: TestDatabase;
let sql: ReturnType<typeof driverSql>;
before(async () => {
  db = await createTestDatabase();
  sql = driverSql(db.url, { max: 2 });
});
after(async () => {
  await sql.end();
  await db.drop();
});

/** A logger whose lines (parsed) land in `lines`. */
function capturing() {
  const lines: { level: number; msg: string }[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString("utf8").split("\n").filter(Boolean)) lines.push(JSON.parse(l) as { level: number; msg: string });
      done();
    },
  });
  return { log: createLogger({ level: "info", format: "json", destination }), lines };
}

const whenOf = (tag: string) => MIGRATIONS.find((m) => m.tag === tag)!.when;
const recorded = async () => (await sql<{ created_at: string }[]>`select created_at::text from drizzle.__drizzle_migrations`).map((r) => Number(r.created_at));
const exists = async (relation: string) => (await sql<{ ok: boolean }[]>`select to_regclass(${relation}) is not null as ok`)[0]!.ok;

describe("npm run migrate", () => {
  it("the journal's migrations are in the order of their `when`, which is the order drizzle applies them in", () => {
    for (let i = 1; i < MIGRATIONS.length; i++) {
      assert.ok(MIGRATIONS[i]!.when > MIGRATIONS[i - 1]!.when, `${MIGRATIONS[i]!.tag} has an older "when" than ${MIGRATIONS[i - 1]!.tag}: a database that ran the latter would never run it`);
    }
    assert.deepEqual(migrationPlan(MIGRATIONS, []), { skipped: [], unknown: 0 });
    assert.deepEqual(migrationPlan(MIGRATIONS, [MIGRATIONS[0]!.when, MIGRATIONS[2]!.when]), { skipped: [MIGRATIONS[1]!.tag], unknown: 0 });
  });

  it("a second run while one holds the lock waits for it, saying so, then finds nothing to do", async () => {
    const holder = driverSql(db.url, { max: 1 });
    try {
      await holder`select pg_advisory_lock(7305201144)`;
      const { log, lines } = capturing();
      let done = false;
      const second = runMigrations(db.url, log).finally(() => (done = true));
      for (let i = 0; i < 200 && !lines.some((l) => l.msg.includes("waiting")); i++) await new Promise((r) => setTimeout(r, 25));
      assert.ok(lines.some((l) => /another npm run migrate .* waiting for it to finish/.test(l.msg)), JSON.stringify(lines));
      assert.equal(done, false, "it waits while the lock is held");
      await holder`select pg_advisory_unlock(7305201144)`;
      await second;
      assert.ok(lines.some((l) => l.msg === "migrations applied"));
    } finally {
      await holder.end();
    }
  });

  // The release's two newest migrations: 0016 makes notification_sequences and
  // orders_other_svc_ids_idx, 0017 adds orders.finished_at (and remakes orders_pii_due_idx on it).
  const M16 = "0016_other_svc_ids_index_and_sequences";
  const M17 = "0017_finished_at";
  const undo16 = async () => {
    await sql`drop table notification_sequences`;
    await sql`drop index orders_other_svc_ids_idx`;
  };

  it("a migration that fails leaves the run's earlier ones unapplied too, and the next run applies them all", async () => {
    // The database as before 0016 and 0017, and 0017's column already there: in its way.
    await undo16();
    await sql`delete from drizzle.__drizzle_migrations where created_at >= ${whenOf(M16)}`;
    const { log } = capturing();
    const err = await runMigrations(db.url, log).then(
      () => assert.fail("migrated over the column in the way"),
      (e: unknown) => e,
    );
    // Said in one line naming the migration and PostgreSQL's reason (drizzle's own error
    // was "Failed query:" and the statement).
    assert.ok(err instanceof MigrationFailedError, String(err));
    assert.deepEqual(describeStartupError(err, { databaseUrl: db.url }).lines, [
      `tracklane: migration ${M17} failed on ${describeTarget(db.url)} (DATABASE_URL): column "finished_at" of relation "orders" already exists; none of this run's migrations is applied (they run in one transaction): remove the cause, then run \`npm run migrate\` again`,
    ]);
    assert.equal(await exists("notification_sequences"), false, "0016 rolled back with 0017");
    assert.ok(!(await recorded()).includes(whenOf(M16)));
    await sql`drop index orders_pii_due_idx`;
    await sql`alter table orders drop column finished_at`;
    await sql`create index orders_pii_due_idx on orders (id)`;
    await runMigrations(db.url, log);
    assert.equal(await exists("notification_sequences"), true);
    assert.equal(await exists("orders_other_svc_ids_idx"), true);
    assert.equal((await sql<{ n: number }[]>`select count(*)::int as n from information_schema.columns where table_name = 'orders' and column_name = 'finished_at'`)[0]!.n, 1);
    assert.deepEqual((await recorded()).sort(), MIGRATIONS.map((m) => m.when).sort());
  });

  it("a migration missing below newer applied ones is refused in one line, not passed over", async () => {
    // 0016 not applied, 0017 applied: drizzle compares with the newest applied only.
    await undo16();
    await sql`delete from drizzle.__drizzle_migrations where created_at = ${whenOf(M16)}`;
    const { log } = capturing();
    const err = await runMigrations(db.url, log).then(
      () => assert.fail(`migrated without ${M16}`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MigrationsSkippedError, String(err));
    assert.deepEqual(err.tags, [M16]);
    const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url });
    assert.equal(exitCode, 1);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, new RegExp(`lacks migration ${M16} of this release but has newer ones applied, so drizzle would never apply it; nothing was migrated: apply migrations/${M16}.sql by hand`));
    assert.equal(await exists("notification_sequences"), false, "nothing was migrated");
    // Applied by hand as the line says, the next run goes through.
    await sql.unsafe(readFileSync(new URL(`../../migrations/${M16}.sql`, import.meta.url), "utf8"));
    await sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('by hand', ${whenOf(M16)})`;
    await runMigrations(db.url, log);
    assert.equal(await exists("notification_sequences"), true);
  });

  it("a database a later release migrated: nothing applied or undone, and a warning says so", async () => {
    const later = MIGRATIONS.at(-1)!.when + 60_000;
    await sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('a later release', ${later})`;
    try {
      const { log, lines } = capturing();
      await runMigrations(db.url, log);
      const warning = lines.find((l) => l.level === 40);
      assert.ok(warning, JSON.stringify(lines));
      assert.match(warning.msg, /the database has 1 migration\(s\) newer than this release/);
    } finally {
      await sql`delete from drizzle.__drizzle_migrations where created_at = ${later}`;
    }
  });
});
