/**
 * `npm test`: provides PostgreSQL (TEST_DATABASE_URL's server, or an embedded one under
 * .data/test), builds a template database with every migration applied, then runs all
 * test files with node's test runner. Each file clones the template (test/helpers/db.ts),
 * so files run in parallel without sharing state.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { resolve } from "node:path";
import { driverSql } from "../src/db/client.ts";
import { runMigrations } from "../src/db/migrate.ts";
import { withDatabase } from "../src/db/url.ts";
import { createLogger } from "../src/logger.ts";
import { resolveDatabase } from "../src/runtime/database.ts";

const log = createLogger({ level: process.env.TEST_LOG_LEVEL ?? "warn" });
const root = resolve(import.meta.dirname, "..");

async function main(): Promise<number> {
  const server = await resolveDatabase({
    databaseUrl: process.env.TEST_DATABASE_URL || undefined,
    dataDir: resolve(root, ".data/test"),
    log,
  });
  console.log(`tests use ${process.env.TEST_DATABASE_URL ? "TEST_DATABASE_URL" : server.description}`);
  const template = `tracklane_tpl_${randomBytes(4).toString("hex")}`;
  const admin = driverSql(withDatabase(server.url, "postgres"), { max: 1 });
  try {
    await admin.unsafe(`create database ${template}`);
    await runMigrations(withDatabase(server.url, template), log);
    const files = process.argv.slice(2);
    const code = await new Promise<number>((done) => {
      const child = spawn(
        process.execPath,
        ["--test", "--test-concurrency=3", "--test-timeout=120000", ...(files.length ? files : ["test/**/*.test.ts"])],
        {
          cwd: root,
          stdio: "inherit",
          env: { ...process.env, TEST_SERVER_URL: server.url, TEST_TEMPLATE_DB: template },
        },
      );
      child.on("exit", (c, signal) => done(c ?? (signal ? 1 : 0)));
    });
    return code;
  } finally {
    await admin.unsafe(`drop database if exists ${template} with (force)`).catch(() => {});
    // Clones left behind by a crashed file.
    const stale = await admin<{ datname: string }[]>`select datname from pg_database where datname like ${`${template}_%`}`;
    for (const { datname } of stale) await admin.unsafe(`drop database if exists ${datname} with (force)`).catch(() => {});
    await admin.end();
    await server.release();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
