/**
 * DATABASE_URL's sslmode (src/db/tls.ts), against a test server without TLS (the
 * machine's and the embedded one both have ssl off): `prefer` and `disable` work for
 * migrate and the worker (graphile-worker's driver read `prefer` as verify-full, and
 * failed); `require` fails at once, in one line naming sslmode (exit 78).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { runOnce } from "graphile-worker";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { acceptsTls, workerConnectionString } from "../../src/db/tls.ts";
import { connectTarget } from "../../src/db/url.ts";
import { createLogger } from "../../src/logger.ts";
import { describeStartupError } from "../../src/runtime/startup-errors.ts";
import { graphileLogger } from "../../src/worker/logger.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let db: TestDatabase;
let tcp: boolean;
before(async () => {
  db = await createTestDatabase();
  tcp = !(connectTarget(db.url).host ?? "").includes("/");
});
after(async () => db.drop());

const withMode = (mode: string) => `${db.url}${db.url.includes("?") ? "&" : "?"}sslmode=${mode}`;
const silent = createLogger({ level: "silent" });

describe("sslmode in DATABASE_URL, on a server without TLS", () => {
  it("the test server has no TLS (what the tests below assume)", async (t) => {
    if (!tcp) return t.skip("the test server is reached through a Unix socket");
    const target = new URL(connectTarget(db.url).url);
    assert.equal(await acceptsTls(target.hostname, Number(target.port) || 5432), false);
  });

  for (const mode of ["prefer", "disable"]) {
    it(`sslmode=${mode}: migrate and graphile-worker connect`, async () => {
      const url = withMode(mode);
      await runMigrations(url, silent);
      await runOnce({ connectionString: await workerConnectionString(url), taskList: { tls_test_noop: async () => {} }, logger: graphileLogger(silent) });
      const sql = driverSql(url, { max: 1 });
      try {
        assert.equal((await sql<{ x: number }[]>`select 1 as x`)[0]!.x, 1);
      } finally {
        await sql.end();
      }
    });
  }

  it("sslmode=require: migrate fails at once, in one line naming sslmode (exit 78)", async (t) => {
    if (!tcp) return t.skip("the test server is reached through a Unix socket, where libpq uses no TLS");
    const url = withMode("require");
    const err = await runMigrations(url, silent).then(
      () => assert.fail("connected with TLS to a server without it"),
      (e: unknown) => e,
    );
    const { exitCode, lines } = describeStartupError(err, { databaseUrl: url });
    assert.equal(exitCode, 78, lines.join("\n"));
    assert.match(lines[0]!, /: the server does not accept TLS, and DATABASE_URL asks for it \(sslmode=require\); turn on ssl in the server, or connect without TLS/);
  });

  it("graphile-worker reads the modes as libpq does", async () => {
    assert.match(await workerConnectionString("postgres://u@db.example:5432/t?sslmode=require"), /sslmode=require&uselibpqcompat=true$/);
    assert.match(await workerConnectionString("postgres://u@db.example:5432/t?sslmode=verify-ca&sslrootcert=/ca.pem"), /uselibpqcompat=true$/);
    for (const same of ["postgres://u@db.example/t?sslmode=verify-full", "postgres://u@db.example/t?sslmode=disable", "postgres://u@db.example/t"]) {
      assert.equal(await workerConnectionString(same), same);
    }
    assert.match(await workerConnectionString("postgres://u@/t?host=/var/run/postgresql&sslmode=prefer"), /sslmode=disable/);
  });
});
