/**
 * `npm run migrate` as deploys run it (src/db/migrate.ts): a second run at once waits for
 * the first and says so; a migration that fails leaves every migration of that run
 * unapplied and the next run starts again from it (drizzle applies them in one
 * transaction); a migration missing below newer applied ones, which drizzle would pass
 * over for ever, is refused; a database a later release migrated is said so. Readiness
 * and the start check of web, worker and rebuild go by the same plan.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { DateStyleError, MIGRATIONS, MigrationFailedError, MigrationsSkippedError, migrationPlan, schemaState } from "../../src/db/ready.ts";
import { describeTarget } from "../../src/db/url.ts";
import { createLogger } from "../../src/logger.ts";
import { opsRoutes } from "../../src/http/routes/ops.ts";
import { createMetrics } from "../../src/metrics.ts";
import { MigrationsBehindError, NotOwnerError, SearchPathError, describeStartupError, requireMigrations } from "../../src/runtime/startup-errors.ts";
import { createTestDatabase, serverUrl } from "../helpers/db.ts";
import { startProcess } from "../helpers/process.ts";
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
      // Not "migrations applied": a deploy's log must not claim a change it did not make.
      assert.deepEqual(
        lines.filter((l) => l.msg.startsWith("migrations")).map((l) => l.msg),
        ["migrations: nothing to apply, the database is up to date"],
      );
    } finally {
      await holder.end();
    }
  });

  it("a migration that fails leaves the run's earlier ones unapplied too, and the next run applies them all", async () => {
    // A database nothing migrated yet, and something in 0015's way: every migration of
    // this release is pending, so they all run in the transaction 0015 fails in (whatever
    // migrations come after it).
    const name = `${db.name}_empty`;
    const admin = driverSql(serverUrl("postgres"), { max: 1 });
    await admin.unsafe(`create database ${name}`);
    const url = serverUrl(name);
    const empty = driverSql(url, { max: 1 });
    try {
      await empty`create table commands_pending_idx (x int)`;
      const { log } = capturing();
      const err = await runMigrations(url, log).then(
        () => assert.fail("migrated over the table in the way"),
        (e: unknown) => e,
      );
      // Said in one line naming the migration and PostgreSQL's reason (drizzle's own error
      // was "Failed query:" and the statement).
      assert.ok(err instanceof MigrationFailedError, String(err));
      assert.deepEqual(describeStartupError(err, { databaseUrl: url }).lines, [
        `tracklane: migration 0015_pending_commands_index failed on ${describeTarget(url)} (DATABASE_URL): relation "commands_pending_idx" already exists; none of this run's migrations is applied (they run in one transaction): remove the cause, then run \`npm run migrate\` again`,
      ]);
      const [state] = await empty<{ orders: boolean; recorded: number }[]>`
        select to_regclass('orders') is not null as orders,
               (select count(*)::int from drizzle.__drizzle_migrations) as recorded`;
      assert.deepEqual(state, { orders: false, recorded: 0 }, "0000 to 0014 rolled back with 0015");
      await empty`drop table commands_pending_idx`;
      const again = capturing();
      await runMigrations(url, again.log);
      const said = again.lines.find((l) => l.msg === "migrations applied") as { applied?: unknown } | undefined;
      assert.deepEqual(said?.applied, MIGRATIONS.map((m) => m.tag), "each migration applied, named");
      const applied = (await empty<{ created_at: string }[]>`select created_at::text from drizzle.__drizzle_migrations`).map((r) => Number(r.created_at));
      assert.deepEqual(applied.sort(), MIGRATIONS.map((m) => m.when).sort());
      const [made] = await empty<{ ok: boolean }[]>`select to_regclass('commands_pending_idx') is not null as ok`;
      assert.equal(made!.ok, true);
    } finally {
      await empty.end();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });

  it("a migration that waits for a table another session holds gives up after lock_timeout, naming the session, rather than holding every callback behind it", async () => {
    // 0017 pending (the schema of the release before), and a session left idle in a
    // transaction that read orders: 0017's ALTER TABLE orders waits for it, and every
    // statement on orders queues behind that ALTER until the migration gives up.
    await sql`drop index orders_pii_due_idx`;
    await sql`alter table orders drop column finished_at`;
    await sql`create index orders_pii_due_idx on orders using btree (status_at) where redacted_at is null and status in ('DELIVERED', 'CANCELLED', 'CANCELLED_BY_CUSTOMER', 'RETURNED_TO_SELLER')`;
    // Nor what the migrations after it added (0018's check): 0017 and later pending.
    await sql`alter table awb_numbers drop constraint awb_numbers_order_allocated`;
    await sql`delete from drizzle.__drizzle_migrations where created_at >= ${whenOf("0017_finished_at")}`;
    const holder = driverSql(db.url, { max: 1, connection: { application_name: "a-long-report" } });
    const reserved = await holder.reserve();
    try {
      await reserved`begin`;
      await reserved`select count(*) from orders`;
      const [me] = await reserved<{ pid: number }[]>`select pg_backend_pid() as pid`;
      const { log } = capturing();
      const started = Date.now();
      const err = await Promise.race([
        runMigrations(db.url, log).then(
          () => assert.fail("migrated while orders was held"),
          (e: unknown) => e,
        ),
        new Promise((r) => setTimeout(() => r(new Error("still waiting after 40 s: no bound on the lock wait")), 40_000).unref()),
      ]);
      assert.ok(err instanceof MigrationFailedError, String(err));
      assert.ok(Date.now() - started < 30_000, `gave up after ${Date.now() - started} ms`);
      assert.equal(err.tag, "0017_finished_at");
      assert.match(err.reason, /lock timeout: it waited 10 s for a table that another session holds, pid (\d+) \(a-long-report, idle in transaction, /);
      assert.equal(Number(/pid (\d+)/.exec(err.reason)![1]), me!.pid);
      await reserved`rollback`;
      await runMigrations(db.url, log);
      const [made] = await sql<{ ok: boolean }[]>`select count(*) = 1 as ok from information_schema.columns where table_name = 'orders' and column_name = 'finished_at'`;
      assert.equal(made!.ok, true, "the next run applied it");
    } finally {
      reserved.release();
      await holder.end();
    }
  });

  it("a migration missing below newer applied ones is refused in one line, not passed over", async () => {
    // 0014 not applied, 0015 applied: drizzle compares with the newest applied only.
    await sql`drop index orders_placement_idx`;
    await sql`create index orders_placement_attention_idx on orders (id)`;
    await sql`delete from drizzle.__drizzle_migrations where created_at = ${whenOf("0014_placement_index")}`;
    const { log } = capturing();
    const err = await runMigrations(db.url, log).then(
      () => assert.fail("migrated without 0014"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof MigrationsSkippedError, String(err));
    assert.deepEqual(err.tags, ["0014_placement_index"]);
    const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url });
    assert.equal(exitCode, 1);
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /lacks migration 0014_placement_index of this release but has newer ones applied, so drizzle would never apply it; nothing was migrated: apply migrations\/0014_placement_index.sql by hand/);
    // Applied by hand as the line says, the next run goes through.
    await sql`drop index orders_placement_attention_idx`;
    await sql`create index orders_placement_idx on orders using btree (placement_state, id desc nulls first)`;
    await sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('by hand', ${whenOf("0014_placement_index")})`;
    await runMigrations(db.url, log);
  });

  it("a search_path that puts another schema first (a role's own schema, ALTER ROLE ... SET search_path): the tables go to public all the same, where web and worker find them", async () => {
    const name = `${db.name}_path`;
    const admin = driverSql(serverUrl("postgres"), { max: 1 });
    await admin.unsafe(`create database ${name}`);
    const url = serverUrl(name);
    try {
      const setup = driverSql(url, { max: 1 });
      await setup`create schema app`;
      await setup.end();
      await admin.unsafe(`alter database ${name} set search_path = app, public`);
      await runMigrations(url, capturing().log); // failed: relation "public.orders" does not exist
      const check = driverSql(url, { max: 1 });
      try {
        const [where] = await check<{ app: number; public: number }[]>`
          select count(*) filter (where schemaname = 'app')::int as app, count(*) filter (where schemaname = 'public')::int as public
          from pg_tables where tablename in ('orders', 'order_events', 'commands')`;
        assert.deepEqual(where, { app: 0, public: 3 });
      } finally {
        await check.end();
      }
      await requireMigrations(url);
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
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

describe("readiness and the start check go by migrate's plan", () => {
  const readyz = async () => {
    const res = await opsRoutes(sql, createMetrics()).request("/readyz");
    return { status: res.status, body: (await res.json()) as { ok: boolean; reason?: string } };
  };
  const startError = () =>
    requireMigrations(db.url).then(
      () => undefined,
      (e: unknown) => e,
    );

  it("a database that writes dates in another style than ISO: web, worker, rebuild and npm start refuse to start (exit 78), naming the setting to change", async () => {
    assert.equal(await startError(), undefined);
    for (const [style, order] of [["SQL, DMY", "DMY"], ["German", "DMY"], ["Postgres, MDY", "MDY"]] as const) {
      await sql.unsafe(`alter database ${db.name} set DateStyle = '${style}'`);
      try {
        const err = await startError();
        assert.ok(err instanceof DateStyleError, `${style}: ${String(err)}`);
        const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url });
        assert.equal(exitCode, 78);
        assert.match(lines[0]!, new RegExp(`writes dates in the style "${err.dateStyle}" \\(its DateStyle\\); tracklane reads ISO dates only: run \`ALTER DATABASE <name> SET DateStyle = 'ISO, ${order}'\``));
      } finally {
        await sql.unsafe(`alter database ${db.name} reset DateStyle`);
      }
    }
    await sql.unsafe(`alter database ${db.name} set DateStyle = 'ISO, DMY'`);
    try {
      assert.equal(await startError(), undefined, "ISO in either order is read");
    } finally {
      await sql.unsafe(`alter database ${db.name} reset DateStyle`);
    }
  });

  it("npm run migrate on a fresh database that writes non-ISO dates: refused before anything is applied, exit 78 naming the setting (was: migrations applied, then \"Invalid time value\")", async () => {
    const name = `${db.name}_style`;
    const admin = driverSql(serverUrl("postgres"), { max: 1 });
    await admin.unsafe(`create database ${name}`);
    await admin.unsafe(`alter database ${name} set DateStyle = 'SQL, DMY'`);
    const url = serverUrl(name);
    const tables = async () => {
      const check = driverSql(url, { max: 1 });
      try {
        const [row] = await check<{ n: number }[]>`select count(*)::int as n from pg_tables where schemaname in ('public', 'graphile_worker', 'drizzle')`;
        return row!.n;
      } finally {
        await check.end();
      }
    };
    try {
      await assert.rejects(runMigrations(url, capturing().log), (err: unknown) => err instanceof DateStyleError && err.dateStyle === "SQL, DMY");
      assert.equal(await tables(), 0, "nothing applied");
      // The command as run: one line naming the setting, exit 78, the database untouched.
      const migrate = startProcess("src/migrate.ts", { DATABASE_URL: url, LOG_FORMAT: "json" });
      const code = await new Promise((r) => migrate.child.once("exit", r));
      assert.equal(code, 78, migrate.output().slice(-1500));
      assert.match(migrate.output(), /writes dates in the style "SQL, DMY" \(its DateStyle\); tracklane reads ISO dates only: run `ALTER DATABASE <name> SET DateStyle = 'ISO, DMY'`/);
      assert.doesNotMatch(migrate.output(), /Invalid time value|migrations applied/);
      assert.equal(await tables(), 0);
      // Set as the line says, the same command migrates.
      await admin.unsafe(`alter database ${name} set DateStyle = 'ISO, DMY'`);
      const again = startProcess("src/migrate.ts", { DATABASE_URL: url, LOG_FORMAT: "json" });
      assert.equal(await new Promise((r) => again.child.once("exit", r)), 0, again.output().slice(-1500));
      await requireMigrations(url);
    } finally {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    }
  });

  it("a search_path that misses tracklane's tables: web, worker, rebuild and npm start refuse to start (exit 78), naming the setting", async () => {
    assert.equal(await startError(), undefined);
    await sql`create schema if not exists other`;
    for (const [path, found] of [["other", null], ["\"$user\"", null]] as const) {
      await sql.unsafe(`alter database ${db.name} set search_path = ${path}`);
      try {
        const err = await startError();
        assert.ok(err instanceof SearchPathError, `${path}: ${String(err)}`);
        assert.equal(err.found, found);
        const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url });
        assert.equal(exitCode, 78);
        assert.match(lines[0]!, /gives this login the search_path ".*", which finds no order_events table; tracklane's tables are in the public schema: run `ALTER ROLE <user> IN DATABASE <name> SET search_path = public`/);
      } finally {
        await sql.unsafe(`alter database ${db.name} reset search_path`);
      }
    }
    // A table of the same name earlier on the path would be read instead of tracklane's.
    await sql`create table other.order_events (x int)`;
    await sql.unsafe(`alter database ${db.name} set search_path = other, public`);
    try {
      const err = await startError();
      assert.ok(err instanceof SearchPathError, String(err));
      assert.equal(err.found, "other.order_events");
    } finally {
      await sql.unsafe(`alter database ${db.name} reset search_path`);
      await sql`drop schema other cascade`;
    }
    assert.equal(await startError(), undefined);
  });

  it("a login that neither owns the tables nor is a member of their owner: web, worker and rebuild refuse to start (exit 78), naming both roles; a member starts", async () => {
    const role = `tracklane_test_app_${db.name.slice(-8)}`;
    // What a second role of an application usually gets: every table's rows, no ownership.
    await sql.unsafe(`
      create role ${role} login password 'test-app-role';
      grant usage on schema public, graphile_worker, drizzle to ${role};
      grant select, insert, update, delete on all tables in schema public, graphile_worker to ${role};
      grant select on all tables in schema drizzle to ${role};
      grant usage, select, update on all sequences in schema public, graphile_worker to ${role};`);
    try {
      const url = new URL(db.url);
      url.username = role;
      url.password = "test-app-role";
      const [owner] = await sql<{ owner: string }[]>`select relowner::regrole::text as owner from pg_class where oid = 'graphile_worker._private_jobs'::regclass`;
      const err = await requireMigrations(url.toString()).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof NotOwnerError, String(err));
      const { exitCode, lines } = describeStartupError(err, { databaseUrl: url.toString() });
      assert.equal(exitCode, 78);
      assert.match(lines[0]!, new RegExp(`is reached as ${role}, which neither owns tracklane's tables nor is a member of their owner, ${owner!.owner} .*: log in as ${owner!.owner}, or run \`GRANT ${owner!.owner} TO ${role}\``));
      await sql.unsafe(`grant ${owner!.owner} to ${role}`);
      await requireMigrations(url.toString());
    } finally {
      await sql.unsafe(`drop owned by ${role}; drop role ${role}`);
    }
  });

  it("a migration missing below newer applied ones: not ready, and web, worker and rebuild refuse to start naming it; a later release's schema stays ready", async () => {
    assert.deepEqual(await schemaState(sql), { state: "ready" });
    assert.equal(await startError(), undefined);
    // 0016 not applied, 0017 (the newest) applied: the newest alone looks current.
    const skipped = MIGRATIONS.at(-2)!;
    const [row] = await sql<{ id: number; hash: string; created_at: string }[]>`
      delete from drizzle.__drizzle_migrations where created_at = ${skipped.when} returning id, hash, created_at::text`;
    assert.ok(row, `${skipped.tag} is recorded`);
    try {
      assert.deepEqual(await schemaState(sql), { state: "skipped", tags: [skipped.tag] });
      const ready = await readyz();
      assert.equal(ready.status, 503);
      assert.match(ready.body.reason ?? "", new RegExp(`this release needs ${skipped.tag}, missing below newer applied ones`));
      const err = await startError();
      assert.ok(err instanceof MigrationsSkippedError, String(err));
      assert.deepEqual(err.tags, [skipped.tag]);
      const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url });
      assert.equal(exitCode, 1);
      assert.match(lines[0]!, new RegExp(`lacks migration ${skipped.tag} of this release but has newer ones applied`));
    } finally {
      await sql`insert into drizzle.__drizzle_migrations (id, hash, created_at) values (${row.id}, ${row.hash}, ${row.created_at}::bigint)`;
    }
    assert.deepEqual(await readyz(), { status: 200, body: { ok: true } });

    // A later release applied one more: this release's are all there, so it runs.
    const later = MIGRATIONS.at(-1)!.when + 60_000;
    await sql`insert into drizzle.__drizzle_migrations (hash, created_at) values ('a later release', ${later})`;
    try {
      assert.deepEqual(await schemaState(sql), { state: "ready" });
      assert.deepEqual(await readyz(), { status: 200, body: { ok: true } });
      assert.equal(await startError(), undefined);
    } finally {
      await sql`delete from drizzle.__drizzle_migrations where created_at = ${later}`;
    }

    // The newest missing (an older release's schema): behind, as before.
    await sql`delete from drizzle.__drizzle_migrations where created_at = ${MIGRATIONS.at(-1)!.when}`;
    assert.deepEqual(await schemaState(sql), { state: "behind" });
    assert.ok((await startError()) instanceof MigrationsBehindError);
  });
});
