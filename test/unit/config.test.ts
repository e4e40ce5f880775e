import assert from "node:assert/strict";
import fs, { mkdtempSync, readFileSync, statSync } from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { listenPorts } from "../../src/runtime/role.ts";
import { ConfigError, ENV_DOCS, envVariables, loadConfig, loadEmulatorConfig, resolveLogFormat, settingsShown } from "../../src/config.ts";

const dataDir = () => mkdtempSync(join(tmpdir(), "tracklane-config-"));

/** The lines printed at start: each problem with an example of a good value. */
function lines(env: Record<string, string>): string[] {
  try {
    loadConfig({ DATA_DIR: dataDir(), ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.lines;
  }
  assert.fail("expected a ConfigError");
}

function loadEmulatorConfigProblems(env: Record<string, string>): string[] {
  try {
    loadEmulatorConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail("expected a ConfigError");
}

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ DATA_DIR: dataDir(), ...env });
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems;
  }
  assert.fail("expected a ConfigError");
}

describe("config", () => {
  it("has the documented defaults", () => {
    const c = loadConfig({ DATA_DIR: dataDir() });
    assert.equal(c.port, 3000);
    assert.equal(c.host, "0.0.0.0");
    assert.equal(c.publicUrl, "http://127.0.0.1:3000");
    assert.equal(c.logLevel, "info");
    assert.equal(c.provider.env, "staging");
    assert.equal(c.provider.product, "hyperlocal_dedicated_store");
    assert.equal(c.provider.baseUrl, undefined);
    assert.deepEqual(c.awb, { lowWatermark: 100, target: 500, mode: "pool" });
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.databaseReadUrl, undefined);
    assert.deepEqual(c.db, { poolMax: 10, readPoolMax: 10 });
    assert.equal(c.console.stuckAfterMin, 45);
    assert.equal(c.metricsToken, undefined);
    assert.equal(c.emulatorPort, 4010);
    // PUBLIC_URL's default follows PORT; PROVIDER_GATEWAY_URL's follows PROVIDER_BASE_URL.
    assert.equal(loadConfig({ DATA_DIR: dataDir(), PORT: "8123" }).publicUrl, "http://127.0.0.1:8123");
    const provider = loadConfig({ DATA_DIR: dataDir(), PROVIDER_BASE_URL: "https://api.provider.example/", PROVIDER_TOKEN: "tok" }).provider;
    assert.deepEqual([provider.baseUrl, provider.gatewayUrl], ["https://api.provider.example", "https://api.provider.example"]);
  });

  it("DATABASE_READ_URL: taken with DATABASE_URL, refused without it or when not a postgres URL, its password never echoed", () => {
    const primary = "postgres://tracklane:pw@db.internal:5432/tracklane";
    const replica = "postgres://tracklane_ro:replica-pw@db-replica.internal:5432/tracklane";
    const c = loadConfig({ DATA_DIR: dataDir(), DATABASE_URL: primary, DATABASE_READ_URL: replica, DB_READ_POOL_MAX: "25" });
    assert.deepEqual([c.databaseUrl, c.databaseReadUrl, c.db.readPoolMax], [primary, replica, 25]);
    assert.deepEqual(lines({ DATABASE_READ_URL: replica }), [
      `DATABASE_READ_URL: needs DATABASE_URL as well (the database that is written); e.g. DATABASE_URL=${ENV_DOCS.DATABASE_URL!.example}`,
    ]);
    const bad = lines({ DATABASE_URL: primary, DATABASE_READ_URL: "mysql://ro:replica-pw@db/x", DB_READ_POOL_MAX: "0" });
    assert.equal(bad.length, 2, bad.join("\n"));
    assert.match(bad.find((l) => l.startsWith("DATABASE_READ_URL"))!, /^DATABASE_READ_URL: must be a postgres:\/\/ or postgresql:\/\/ URL; e\.g\. /);
    assert.ok(!bad.join("\n").includes("replica-pw"), "the password was printed");
    assert.match(bad.find((l) => l.startsWith("DB_READ_POOL_MAX"))!, /must be at least 1/);
  });

  it("PUBLIC_URL: a trailing slash is dropped; a ?query or #fragment (which would swallow /callbacks/<secret>) or a password (printed at start) is refused", () => {
    assert.equal(loadConfig({ DATA_DIR: dataDir(), PUBLIC_URL: "https://track.example.com/tl/" }).publicUrl, "https://track.example.com/tl");
    for (const url of ["https://track.example.com/?via=lb", "https://track.example.com#top", "https://track.example.com?"]) {
      assert.match(problems({ PUBLIC_URL: url })[0]!, /^PUBLIC_URL: must have no \?query or #fragment: the callback URL is it followed by \/callbacks\/<secret>/, url);
    }
    assert.deepEqual(problems({ PUBLIC_URL: "https://merchant:pw-zq9x@track.example.com" }), [
      "PUBLIC_URL: must not hold a user name or password (the callback URL is printed at start)",
    ]);
  });

  it("DATA_DIR and HOST with a \\r left by Windows line endings (or another control character) are refused, not taken as another directory", () => {
    for (const [variable, value] of [["DATA_DIR", "/var/lib/tracklane\r"], ["DATA_DIR", "data\n"], ["HOST", "0.0.0.0\r"]] as const) {
      assert.deepEqual(problems({ [variable]: value }), [`${variable}: must not hold a line break or other control character (found ${JSON.stringify(value)})`]);
    }
    assert.deepEqual(loadEmulatorConfigProblems({ EMULATOR_HOST: "127.0.0.1\r" }), ['EMULATOR_HOST: must not hold a line break or other control character (found "127.0.0.1\\r")']);
  });

  it("DATABASE_URL: a Unix socket directory as libpq spells it is taken; a URL the pool cannot read is refused", () => {
    for (const url of ["postgres://app:pw@/orders?host=/var/run/postgresql", "postgres:///orders?host=/tmp&port=5433", "postgres://app@%2Ftmp/orders"]) {
      assert.equal(loadConfig({ DATA_DIR: dataDir(), DATABASE_URL: url }).databaseUrl, url);
    }
    assert.deepEqual(lines({ DATABASE_URL: "postgres://app:s3cret@/orders?host=/tmp&port=five" }), [
      `DATABASE_URL: has port=five in its query: a port is a whole number from 1 to 65535; e.g. DATABASE_URL=${ENV_DOCS.DATABASE_URL!.example}`,
    ]);
    assert.match(lines({ DATABASE_URL: "postgres://app:s3cret@[db/orders" })[0]!, /^DATABASE_URL: is not a valid URL \(in a user name or password write % as %25, # as %23, .*\); e\.g\. /);
  });

  it("DATABASE_URL: a password with a lone % (every start ended in \"URI malformed\") or an sslmode libpq does not know is refused, the password never echoed", () => {
    const encoding = "in a user name or password write % as %25, # as %23, / as %2F, ? as %3F, @ as %40, : as %3A";
    for (const url of ["postgres://app:100%pw-zq9x@db/orders", "postgres://app%zq9x:pw@db/orders"]) {
      assert.deepEqual(problems({ DATABASE_URL: url }), [`DATABASE_URL: its user name or password holds a % that is not percent-encoding (${encoding})`], url);
    }
    assert.deepEqual(problems({ DATABASE_URL: "postgres://app:pw-zq9x#x@db/orders" }), [`DATABASE_URL: is not a valid URL (${encoding})`]);
    for (const mode of ["required", "disabled", "true", "no-verify"]) {
      assert.deepEqual(problems({ DATABASE_READ_URL: `postgres://app:pw-zq9x@db/orders?sslmode=${mode}`, DATABASE_URL: "postgres://app@db/orders" }), [
        "DATABASE_READ_URL: its sslmode must be one of disable, allow, prefer, require, verify-ca, verify-full",
      ]);
    }
    // Encoded, all of them are taken as written; so is every libpq mode.
    for (const url of ["postgres://app:100%25p%23w%2F@db/orders", "postgres://app:p@ss@db/orders", ...["disable", "allow", "prefer", "require", "verify-ca", "verify-full"].map((m) => `postgres://app@db/orders?sslmode=${m}`)]) {
      assert.equal(loadConfig({ DATA_DIR: dataDir(), DATABASE_URL: url }).databaseUrl, url);
    }
  });

  it("generates the API token and callback secret once, keeps them under the data dir (0600), and reuses them", () => {
    const dir = dataDir();
    const first = loadConfig({ DATA_DIR: dir });
    const second = loadConfig({ DATA_DIR: dir });
    assert.equal(first.apiToken, second.apiToken);
    assert.equal(first.callbackSecret, second.callbackSecret);
    assert.notEqual(first.apiToken, first.callbackSecret);
    assert.ok(first.apiToken.length >= 32);
    assert.equal(readFileSync(join(dir, "api-token"), "utf8").trim(), first.apiToken);
    assert.equal(statSync(join(dir, "callback-secret")).mode & 0o777, 0o600);
    assert.match(first.secretSources.apiToken, /^generated, stored in /);
  });

  it("a secret another process stored after this one looked is taken, not overwritten (processes started together)", () => {
    const dir = dataDir();
    const path = join(dir, "api-token");
    const theirs = "stored-by-the-other-process-0123456789";
    // The other process stores its secret just after this one found none: what two web
    // processes started at once on one DATA_DIR did, in either order of look and write.
    const original = { existsSync: fs.existsSync, readFileSync: fs.readFileSync };
    let raced = false;
    const race = (p: unknown) => {
      if (raced || p !== path) return false;
      raced = true;
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path, `${theirs}\n`, { mode: 0o600 });
      return true;
    };
    fs.existsSync = ((p: fs.PathLike) => (race(p) ? false : original.existsSync(p))) as typeof fs.existsSync;
    fs.readFileSync = ((p: fs.PathOrFileDescriptor, o?: unknown) => {
      if (race(p)) throw Object.assign(new Error(`ENOENT: no such file or directory, open '${String(p)}'`), { code: "ENOENT" });
      return (original.readFileSync as (p: fs.PathOrFileDescriptor, o?: unknown) => string | Buffer)(p, o);
    }) as typeof fs.readFileSync;
    syncBuiltinESMExports();
    let config;
    try {
      config = loadConfig({ DATA_DIR: dir });
    } finally {
      Object.assign(fs, original);
      syncBuiltinESMExports();
    }
    assert.ok(raced, "the race was staged");
    assert.equal(config.apiToken, theirs);
    assert.equal(readFileSync(path, "utf8").trim(), theirs);
    assert.deepEqual(fs.readdirSync(dir).sort(), ["api-token", "callback-secret"], "no file left aside");
  });

  it("a DATA_DIR on a file system without hard links still gets its generated secrets, and a later start reads them", () => {
    const dir = dataDir();
    const original = fs.linkSync;
    // What link() does on FAT or exFAT, and on some network and VM shares.
    fs.linkSync = ((from: fs.PathLike) => {
      throw Object.assign(new Error(`EPERM: operation not permitted, link '${String(from)}'`), { code: "EPERM" });
    }) as typeof fs.linkSync;
    syncBuiltinESMExports();
    let first;
    try {
      first = loadConfig({ DATA_DIR: dir });
    } finally {
      fs.linkSync = original;
      syncBuiltinESMExports();
    }
    assert.equal(readFileSync(join(dir, "api-token"), "utf8").trim(), first.apiToken);
    assert.equal(statSync(join(dir, "api-token")).mode & 0o777, 0o600);
    assert.deepEqual(fs.readdirSync(dir).sort(), ["api-token", "callback-secret"], "no file left aside");
    assert.equal(loadConfig({ DATA_DIR: dir }).callbackSecret, first.callbackSecret);
  });

  it("a DATA_DIR where a generated secret cannot be kept is a configuration problem naming DATA_DIR, not a bare file-system error", () => {
    const file = join(dataDir(), "a-file");
    fs.writeFileSync(file, "");
    const bad = join(file, "data");
    assert.deepEqual(problems({ DATA_DIR: bad }), [
      `DATA_DIR: cannot keep the generated API_TOKEN in ${join(bad, "api-token")} (ENOTDIR): make DATA_DIR a directory this process can write, or set API_TOKEN`,
      `DATA_DIR: cannot keep the generated CALLBACK_SECRET in ${join(bad, "callback-secret")} (ENOTDIR): make DATA_DIR a directory this process can write, or set CALLBACK_SECRET`,
    ]);
    // Both configured: nothing is kept there, so nothing is wrong with it (yet).
    assert.equal(loadConfig({ DATA_DIR: bad, API_TOKEN: "configured-token-0123456789", CALLBACK_SECRET: "configured-secret-0123456789" }).dataDir, bad);
  });

  it("prefers configured secrets and never reports their values as the source", () => {
    const c = loadConfig({ DATA_DIR: dataDir(), API_TOKEN: "a".repeat(20), CALLBACK_SECRET: "b".repeat(20) });
    assert.equal(c.apiToken, "a".repeat(20));
    assert.equal(c.secretSources.apiToken, "environment (API_TOKEN)");
    assert.ok(!c.secretSources.callbackSecret.includes("b".repeat(20)));
  });

  it("reports one clear message per bad variable", () => {
    const p = problems({
      PORT: "eighty",
      LOG_LEVEL: "loud",
      PROVIDER_ENV: "prod",
      AWB_MODE: "both",
      DATABASE_URL: "mysql://x",
      CALLBACK_SECRET: "short",
    });
    const vars = p.map((line) => line.split(":")[0]).sort();
    assert.deepEqual(vars, ["AWB_MODE", "CALLBACK_SECRET", "DATABASE_URL", "LOG_LEVEL", "PORT", "PROVIDER_ENV"]);
  });

  it("real-provider settings: defaults, a bad zone name, a bad flag, a negative reconciliation delay", () => {
    const c = loadConfig({ DATA_DIR: dataDir() });
    assert.deepEqual([c.provider.timezone, c.provider.dedupesOrders, c.provider.reconcileAfterMin], ["UTC", false, 15]);
    const set = loadConfig({ DATA_DIR: dataDir(), PROVIDER_TIMEZONE: "Asia/Kolkata", PROVIDER_DEDUPES_ORDERS: "true", RECONCILE_AFTER_MIN: "0.5" });
    assert.deepEqual([set.provider.timezone, set.provider.dedupesOrders, set.provider.reconcileAfterMin], ["Asia/Kolkata", true, 0.5]);
    const p = problems({ PROVIDER_TIMEZONE: "Asia/Bangalore", PROVIDER_DEDUPES_ORDERS: "yes", RECONCILE_AFTER_MIN: "-1" });
    assert.equal(p.length, 3, p.join("\n"));
    assert.match(p.find((l) => l.startsWith("PROVIDER_TIMEZONE"))!, /IANA time zone name \(found "Asia\/Bangalore"\)/);
    assert.match(p.find((l) => l.startsWith("PROVIDER_DEDUPES_ORDERS"))!, /"true" or "false"/);
    assert.ok(p.some((l) => l.startsWith("RECONCILE_AFTER_MIN")));
  });

  it("PROVIDER_PATHS: the default paths unless named; each override checked for its name, form and :parameters", () => {
    assert.deepEqual(loadConfig({ DATA_DIR: dataDir() }).provider.paths, {});
    const set = loadConfig({ DATA_DIR: dataDir(), PROVIDER_PATHS: " oauthToken=/auth/token/ , awbPool=/v2/awb/, orderStatus=/orders/:svc_order_id/state/" });
    assert.deepEqual(set.provider.paths, { oauthToken: "/auth/token/", awbPool: "/v2/awb/", orderStatus: "/orders/:svc_order_id/state/" });
    const p = problems({ PROVIDER_PATHS: "tokenPath=/t/,awbPool=v2/awb,orderStatus=/orders/:id/,awbFresh=/a?x=1,oauthToken=/a/,oauthToken=/b/" });
    assert.equal(p.length, 1, p.join("\n"));
    const line = p[0]!;
    assert.match(line, /^PROVIDER_PATHS: /);
    assert.match(line, /"tokenPath" is not a provider path; the names are placeOrder, editOrder/);
    assert.match(line, /awbPool must be a path starting with \/ \(no spaces, query or fragment\), e\.g\. awbPool=\/v3\/clients\/generate_marketplace_awb\//);
    assert.match(line, /orderStatus must name :svc_order_id, as \/api\/v2\/orders\/:svc_order_id\/status\/ does/);
    assert.match(line, /awbFresh must be a path starting with \//);
    assert.match(line, /oauthToken is given twice/);
    const emulator = loadEmulatorConfig({ EMULATOR_PATHS: "oauthToken=/auth/token/" });
    assert.deepEqual(emulator.paths, { oauthToken: "/auth/token/" });
    assert.throws(() => loadEmulatorConfig({ EMULATOR_PATHS: "nope=/x/" }), /EMULATOR_PATHS: "nope" is not a provider path/);
  });

  it("a bad variable does not hide the problems across the others; a check that involves a bad one is left out", () => {
    const p = problems({ PORT: "abc", PROVIDER_BASE_URL: "http://127.0.0.1:9", PROVIDER_PRODUCT: "quick_commerce", AWB_POOL_LOW_WATERMARK: "600", AWB_POOL_TARGET: "500" });
    assert.equal(p.length, 3, p.join("\n"));
    assert.match(p.find((l) => l.startsWith("PORT"))!, /must be a number/);
    assert.match(p.find((l) => l.startsWith("PROVIDER_PRODUCT"))!, /quick_commerce/);
    assert.match(p.find((l) => l.startsWith("AWB_POOL_LOW_WATERMARK"))!, /must not be greater than AWB_POOL_TARGET/);
    // The target itself bad: its default (500) would make the watermark look wrong; not said.
    assert.deepEqual(problems({ AWB_POOL_LOW_WATERMARK: "600", AWB_POOL_TARGET: "lots" }).map((l) => l.split(":")[0]), ["AWB_POOL_TARGET"]);
    // A bad provider URL: the credentials' checks, which read it, are left out.
    assert.deepEqual(problems({ PROVIDER_BASE_URL: "not a url", PROVIDER_PRODUCT: "quick_commerce" }).map((l) => l.split(":")[0]), ["PROVIDER_BASE_URL"]);
  });

  it("refuses a callback secret that cannot sit in a URL path", () => {
    assert.match(problems({ CALLBACK_SECRET: "has/slash/and spaces!!" })[0]!, /^CALLBACK_SECRET: .*URL-safe/);
  });

  it("takes a previous callback secret and API token for a rotation, refusing one the same as the new value or not fit for its place", () => {
    const rotating = { API_TOKEN: "new-api-token-0123456789", CALLBACK_SECRET: "new-callback-secret-0123" };
    const c = loadConfig({ DATA_DIR: dataDir(), ...rotating, API_TOKEN_PREVIOUS: "old-api-token-0123456789", CALLBACK_SECRET_PREVIOUS: "old-callback-secret-0123" });
    assert.equal(c.apiTokenPrevious, "old-api-token-0123456789");
    assert.equal(c.callbackSecretPrevious, "old-callback-secret-0123");
    const unset = loadConfig({ DATA_DIR: dataDir(), ...rotating, API_TOKEN_PREVIOUS: "", CALLBACK_SECRET_PREVIOUS: "" });
    assert.equal(unset.apiTokenPrevious, undefined);
    assert.equal(unset.callbackSecretPrevious, undefined);
    // The same value twice is a rotation not done: the old one is not what it names.
    assert.deepEqual(problems({ ...rotating, API_TOKEN_PREVIOUS: rotating.API_TOKEN, CALLBACK_SECRET_PREVIOUS: rotating.CALLBACK_SECRET }), [
      "API_TOKEN_PREVIOUS: is the same as API_TOKEN: set it to the value being replaced, or unset it",
      "CALLBACK_SECRET_PREVIOUS: is the same as CALLBACK_SECRET: set it to the value being replaced, or unset it",
    ]);
    // Against a generated secret too (the file under DATA_DIR), with no value echoed.
    const dir = dataDir();
    const generated = loadConfig({ DATA_DIR: dir }).callbackSecret;
    const same = lines({ DATA_DIR: dir, CALLBACK_SECRET_PREVIOUS: generated });
    assert.deepEqual(same.map((l) => l.split(":")[0]), ["CALLBACK_SECRET_PREVIOUS"]);
    assert.ok(!same.join("\n").includes(generated), "the secret was printed");
    assert.match(problems({ ...rotating, CALLBACK_SECRET_PREVIOUS: "has/slash/and spaces!!" })[0]!, /^CALLBACK_SECRET_PREVIOUS: .*URL-safe/);
    assert.match(problems({ ...rotating, API_TOKEN_PREVIOUS: "short" })[0]!, /^API_TOKEN_PREVIOUS: must be at least 16/);
  });

  it("refuses a low watermark above the target", () => {
    assert.deepEqual(problems({ AWB_POOL_LOW_WATERMARK: "600", AWB_POOL_TARGET: "500" }), [
      "AWB_POOL_LOW_WATERMARK: must not be greater than AWB_POOL_TARGET",
    ]);
  });

  describe("the product matrix (provider-api.md §5.3)", () => {
    const base = { PROVIDER_BASE_URL: "https://provider.example" };
    it("Quick Commerce without OAuth credentials is an error", () => {
      assert.match(problems({ ...base, PROVIDER_PRODUCT: "quick_commerce", PROVIDER_TOKEN: "t" })[0]!, /quick_commerce supports only OAuth2/);
    });
    it("Hyperlocal Dedicated Store with only OAuth credentials is an error", () => {
      assert.match(
        problems({ ...base, PROVIDER_CLIENT_ID: "id", PROVIDER_CLIENT_SECRET: "s" })[0]!,
        /hyperlocal_dedicated_store does not support OAuth2/,
      );
    });
    it("no credentials at all is an error naming what to set", () => {
      assert.match(problems(base)[0]!, /PROVIDER_PRODUCT: hyperlocal_dedicated_store needs credentials: set PROVIDER_TOKEN/);
    });
    it("half of the OAuth pair is an error", () => {
      assert.ok(problems({ ...base, PROVIDER_PRODUCT: "exchange", PROVIDER_CLIENT_ID: "id" }).some((l) => /set both or neither/.test(l)));
    });
    it("a PROVIDER_TOKEN no header can carry (a space, a line break, a character pasted from an e-mail) is an error that does not echo it", () => {
      for (const token of ["tok en", "tok\nen", "tok\u200ben", "tok\u00a0en"]) {
        const found = problems({ ...base, PROVIDER_TOKEN: token });
        assert.deepEqual(found, ["PROVIDER_TOKEN: must be printable ASCII without spaces (it is sent in a header)"], JSON.stringify(token));
      }
    });
    it("OAuth credentials with a line break (a \\r from a Windows file) or spaces at either end are an error, the secret never echoed, instead of a 401 at every token exchange", () => {
      const oauth = { ...base, PROVIDER_PRODUCT: "quick_commerce" };
      const bad = "must not hold a line break or other control character, nor spaces at either end";
      for (const secret of ["sec-zq9x\r", " sec-zq9x", "sec-zq9x ", "sec\nzq9x", "sec\tzq9x"]) {
        assert.deepEqual(problems({ ...oauth, PROVIDER_CLIENT_ID: "id", PROVIDER_CLIENT_SECRET: secret }), [`PROVIDER_CLIENT_SECRET: ${bad}`], JSON.stringify(secret));
      }
      assert.deepEqual(problems({ ...oauth, PROVIDER_CLIENT_ID: "id\r", PROVIDER_CLIENT_SECRET: "s" }), [`PROVIDER_CLIENT_ID: ${bad} (found "id\\r")`]);
      assert.match(problems({ ...oauth, PROVIDER_CLIENT_ID: "i:d", PROVIDER_CLIENT_SECRET: "s" })[0]!, /^PROVIDER_CLIENT_ID: must not hold a colon/);
      // Inside, a space is the provider's business: taken as given.
      const auth = loadConfig({ DATA_DIR: dataDir(), ...oauth, PROVIDER_CLIENT_ID: "my id", PROVIDER_CLIENT_SECRET: "s3 cr=t/é" }).provider.auth;
      assert.deepEqual(auth, { method: "oauth", clientId: "my id", clientSecret: "s3 cr=t/é", product: "quick_commerce" });
    });
    it("a provider URL with a ?query or #fragment (which would swallow every call's path) is an error naming the variable", () => {
      for (const variable of ["PROVIDER_BASE_URL", "PROVIDER_GATEWAY_URL"]) {
        for (const value of ["https://api.provider.example/?region=in", "https://api.provider.example/v3#docs"]) {
          const found = problems({ ...base, PROVIDER_TOKEN: "tok", [variable]: value });
          assert.equal(found.length, 1, found.join("\n"));
          assert.match(found[0]!, new RegExp(`^${variable}: must have no \\?query or #fragment: each call's path is added after it`), value);
        }
      }
    });
    it("a provider URL holding a user name or password is an error that does not echo it (no request could be sent to it)", () => {
      for (const [variable, value] of [
        ["PROVIDER_BASE_URL", "https://merchant:pw-zq9x@provider.example"],
        ["PROVIDER_GATEWAY_URL", "https://user-zq9x@gateway.provider.example/v1"],
      ] as const) {
        const found = problems({ ...base, PROVIDER_TOKEN: "tok", [variable]: value });
        assert.equal(found.length, 1, found.join("\n"));
        assert.match(found[0]!, new RegExp(`^${variable}: must not hold a user name or password .*PROVIDER_TOKEN`));
        assert.doesNotMatch(found[0]!, /zq9x/);
      }
      // An @ after the host (a path or query) is no user name.
      assert.equal(loadConfig({ DATA_DIR: dataDir(), ...base, PROVIDER_TOKEN: "tok", PROVIDER_GATEWAY_URL: "https://gw.example/a@b" }).provider.gatewayUrl, "https://gw.example/a@b");
    });
    it("credentials without a provider URL are an error", () => {
      assert.match(problems({ PROVIDER_TOKEN: "t" })[0]!, /^PROVIDER_BASE_URL/);
    });
    it("chooses token auth for Dedicated Store and OAuth where both are given and supported", () => {
      const store = loadConfig({ DATA_DIR: dataDir(), ...base, PROVIDER_TOKEN: "tok" });
      assert.deepEqual(store.provider.auth, { method: "token", token: "tok" });
      const market = loadConfig({ DATA_DIR: dataDir(), ...base, PROVIDER_PRODUCT: "hyperlocal_marketplace", PROVIDER_TOKEN: "tok", PROVIDER_CLIENT_ID: "id", PROVIDER_CLIENT_SECRET: "sec" });
      assert.deepEqual(market.provider.auth, { method: "oauth", clientId: "id", clientSecret: "sec", product: "hyperlocal_marketplace" });
      assert.equal(market.provider.gatewayUrl, "https://provider.example");
    });
  });
});

describe("config errors for people", () => {
  it("a bad enum names the variable, every allowed value, what was found and a good value", () => {
    assert.deepEqual(lines({ PROVIDER_PRODUCT: "hyperlocal" }), [
      'PROVIDER_PRODUCT: must be one of reverse_logistics, forward_logistics, exchange, hyperlocal_marketplace, hyperlocal_dedicated_store, quick_commerce (found "hyperlocal"); e.g. PROVIDER_PRODUCT=hyperlocal_dedicated_store',
    ]);
  });

  it("says what to write, not what type zod expected", () => {
    const found = lines({ PORT: "eighty", WORKER_CONCURRENCY: "1.5", AWB_POOL_TARGET: "0", INGEST_BATCH_WAIT_MS: "5000", LOG_LEVEL: "loud" });
    assert.deepEqual(found.sort(), [
      'AWB_POOL_TARGET: must be at least 1 (found "0"); e.g. AWB_POOL_TARGET=1000',
      'INGEST_BATCH_WAIT_MS: must be at most 1000 (found "5000"); e.g. INGEST_BATCH_WAIT_MS=5',
      'LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent (found "loud"); e.g. LOG_LEVEL=debug',
      'PORT: must be a number (found "eighty"); e.g. PORT=8080',
      'WORKER_CONCURRENCY: must be a whole number (found "1.5"); e.g. WORKER_CONCURRENCY=16',
    ]);
  });

  it("every line, cross-variable ones too, carries an example", () => {
    const all = [
      ...lines({ AWB_POOL_LOW_WATERMARK: "600", AWB_POOL_TARGET: "500" }),
      ...lines({ HTTP_REQUEST_TIMEOUT_MS: "1000", HTTP_HEADERS_TIMEOUT_MS: "2000" }),
      ...lines({ PROVIDER_BASE_URL: "https://provider.example", PROVIDER_PRODUCT: "quick_commerce" }),
      ...lines({ PROVIDER_BASE_URL: "https://provider.example", PROVIDER_PRODUCT: "exchange", PROVIDER_CLIENT_ID: "id" }),
      ...lines({ PROVIDER_GATEWAY_URL: "https://gw.example" }),
      ...lines({ CALLBACK_SECRET: "short", PROVIDER_TIMEZONE: "Mars/Olympus", PROVIDER_DEDUPES_ORDERS: "yes" }),
    ];
    assert.ok(all.length >= 8, all.join("\n"));
    for (const line of all) assert.match(line, /^[A-Z_]+(?: \/ [A-Z_]+)*: .+; e\.g\. [A-Z_]+=\S+/, line);
    assert.ok(all.includes("AWB_POOL_LOW_WATERMARK: must not be greater than AWB_POOL_TARGET; e.g. AWB_POOL_LOW_WATERMARK=100"));
    assert.ok(all.some((l) => /^PROVIDER_PRODUCT: quick_commerce needs credentials.*; e\.g\. PROVIDER_CLIENT_ID=\S+ PROVIDER_CLIENT_SECRET=\S+$/.test(l)), all.join("\n"));
  });

  it("never echoes a secret or a database password back", () => {
    const found = lines({ DATABASE_URL: "mysql://app:hunter2-password@db/x", CALLBACK_SECRET: "tiny-secret", METRICS_TOKEN: "short-metrics" });
    assert.equal(found.length, 3, found.join("\n"));
    for (const secret of ["hunter2-password", "tiny-secret", "short-metrics"]) {
      assert.ok(!found.join("\n").includes(secret), `${secret} was printed`);
    }
  });

  it("documents every variable of the schema, each example is accepted for its variable", () => {
    const names = envVariables().map((v) => v.name);
    assert.deepEqual(Object.keys(ENV_DOCS).sort(), [...names].sort(), "ENV_DOCS and envSchema list different variables");
    // Variables that are only valid together with another one.
    const companions: Record<string, Record<string, string>> = {
      PROVIDER_GATEWAY_URL: { PROVIDER_BASE_URL: ENV_DOCS.PROVIDER_BASE_URL!.example },
      DATABASE_READ_URL: { DATABASE_URL: ENV_DOCS.DATABASE_URL!.example },
    };
    for (const v of envVariables()) {
      assert.ok(v.description.length > 10 && v.example.length > 0, `${v.name} has no description or example`);
      try {
        loadConfig({ DATA_DIR: dataDir(), ...companions[v.name], [v.name]: v.example });
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        // Others may object (credentials without a provider URL); this variable may not.
        const own = err.problems.filter((p) => p.startsWith(`${v.name}:`));
        assert.deepEqual(own, [], `the example ${v.name}=${v.example} is refused`);
      }
    }
  });
});

describe("LOG_FORMAT and METRICS_TOKEN", () => {
  it("LOG_FORMAT unset follows whether stdout is a terminal; set, it wins", () => {
    assert.equal(resolveLogFormat(undefined, true), "pretty");
    assert.equal(resolveLogFormat(undefined, false), "json");
    assert.equal(resolveLogFormat("json", true), "json");
    assert.equal(resolveLogFormat("pretty", false), "pretty");
    assert.equal(loadConfig({ DATA_DIR: dataDir() }, { stdoutIsTTY: true }).logFormat, "pretty");
    assert.equal(loadConfig({ DATA_DIR: dataDir() }, { stdoutIsTTY: false }).logFormat, "json");
    assert.equal(loadConfig({ DATA_DIR: dataDir(), LOG_FORMAT: "json" }, { stdoutIsTTY: true }).logFormat, "json");
    assert.match(lines({ LOG_FORMAT: "text" })[0]!, /^LOG_FORMAT: must be one of pretty, json \(found "text"\); e\.g\. LOG_FORMAT=json$/);
  });

  it("METRICS_TOKEN: unset by default, taken when long enough", () => {
    assert.equal(loadConfig({ DATA_DIR: dataDir() }).metricsToken, undefined);
    assert.equal(loadConfig({ DATA_DIR: dataDir(), METRICS_TOKEN: "m".repeat(20) }).metricsToken, "m".repeat(20));
    assert.match(lines({ METRICS_TOKEN: "short" })[0]!, /^METRICS_TOKEN: must be at least 16 characters; e\.g\. METRICS_TOKEN=/);
  });

  it("METRICS_PORT: an embedded PostgreSQL a worker starts never takes it (as a web process's never takes PORT)", () => {
    const config = loadConfig({ DATA_DIR: dataDir(), PORT: "3100", METRICS_PORT: "40123" });
    assert.deepEqual(listenPorts("worker", config), [40123]);
    assert.deepEqual(listenPorts("web", config), [3100]);
    assert.deepEqual(listenPorts("worker", { ...config, metricsPort: undefined }), []);
  });

  it("TRUSTED_PROXIES: unset trusts no one; a bad entry stops the start naming the variable and the entry", () => {
    assert.deepEqual(loadConfig({ DATA_DIR: dataDir() }).console.trustedProxies, []);
    assert.equal(loadConfig({ DATA_DIR: dataDir(), TRUSTED_PROXIES: "10.0.0.0/8, ::1" }).console.trustedProxies.length, 2);
    const [line, ...rest] = lines({ TRUSTED_PROXIES: "10.0.0.0/8,10.0.0.0/33" });
    assert.deepEqual(rest, []);
    assert.match(line!, /^TRUSTED_PROXIES: "10\.0\.0\.0\/33" is not an IP address or CIDR block .*; e\.g\. TRUSTED_PROXIES=10\.0\.0\.0\/8,127\.0\.0\.1$/);
  });

  it("METRICS_PORT: unset by default (a worker serves no HTTP), a port when set", () => {
    assert.equal(loadConfig({ DATA_DIR: dataDir() }).metricsPort, undefined);
    assert.equal(loadConfig({ DATA_DIR: dataDir(), METRICS_PORT: "9464" }).metricsPort, 9464);
    assert.match(lines({ METRICS_PORT: "70000" })[0]!, /^METRICS_PORT: /);
  });
});

describe("NOTIFY_* (outbound notifications)", () => {
  it("has the documented defaults", () => {
    assert.deepEqual(loadConfig({ DATA_DIR: dataDir() }).notify, {
      retryScheduleS: [0, 5, 300, 1800, 7200, 18000, 36000, 36000],
      timeoutMs: 10_000,
      allowPrivateUrls: false,
      locationIntervalS: 30,
      burstEventsS: 1000,
      burstMaxWaitS: 60,
    });
  });

  it("takes set values; spaces around the delays are fine, 0 turns rider locations off", () => {
    const c = loadConfig({
      DATA_DIR: dataDir(),
      NOTIFY_RETRY_SCHEDULE: "0, 10 ,60",
      NOTIFY_TIMEOUT_MS: "2500",
      NOTIFY_ALLOW_PRIVATE_URLS: "true",
      NOTIFY_LOCATION_INTERVAL_S: "0",
      NOTIFY_BURST_EVENTS_S: "0",
      NOTIFY_BURST_MAX_WAIT_S: "15",
    });
    assert.deepEqual(c.notify, {
      retryScheduleS: [0, 10, 60],
      timeoutMs: 2500,
      allowPrivateUrls: true,
      locationIntervalS: 0,
      burstEventsS: 0,
      burstMaxWaitS: 15,
    });
    assert.deepEqual(loadConfig({ DATA_DIR: dataDir(), NOTIFY_RETRY_SCHEDULE: "30" }).notify.retryScheduleS, [30]);
  });

  it("names the variable, what is wrong and a good value", () => {
    assert.deepEqual(lines({ NOTIFY_RETRY_SCHEDULE: "0,5,soon" }), [
      'NOTIFY_RETRY_SCHEDULE: must be whole seconds separated by commas (found "0,5,soon"); e.g. NOTIFY_RETRY_SCHEDULE=0,10,60,600,3600',
    ]);
    for (const bad of ["0,,5", "-5", "1.5", "0;5"]) {
      assert.match(problems({ NOTIFY_RETRY_SCHEDULE: bad })[0]!, /^NOTIFY_RETRY_SCHEDULE: must be whole seconds separated by commas/, bad);
    }
    assert.match(problems({ NOTIFY_RETRY_SCHEDULE: "0,700000" })[0]!, /^NOTIFY_RETRY_SCHEDULE: each delay must be at most 604800 seconds/);
    assert.match(problems({ NOTIFY_RETRY_SCHEDULE: Array(51).fill("1").join(",") })[0]!, /^NOTIFY_RETRY_SCHEDULE: must have at most 50 delays/);
    const found = lines({
      NOTIFY_TIMEOUT_MS: "50",
      NOTIFY_ALLOW_PRIVATE_URLS: "yes",
      NOTIFY_LOCATION_INTERVAL_S: "-1",
      NOTIFY_BURST_EVENTS_S: "lots",
      NOTIFY_BURST_MAX_WAIT_S: "3601",
    });
    assert.deepEqual(found.sort(), [
      'NOTIFY_ALLOW_PRIVATE_URLS: must be "true" or "false" (found "yes"); e.g. NOTIFY_ALLOW_PRIVATE_URLS=true',
      'NOTIFY_BURST_EVENTS_S: must be a number (found "lots"); e.g. NOTIFY_BURST_EVENTS_S=5000',
      'NOTIFY_BURST_MAX_WAIT_S: must be at most 3600 (found "3601"); e.g. NOTIFY_BURST_MAX_WAIT_S=30',
      'NOTIFY_LOCATION_INTERVAL_S: must be at least 0 (found "-1"); e.g. NOTIFY_LOCATION_INTERVAL_S=60',
      'NOTIFY_TIMEOUT_MS: must be at least 100 (found "50"); e.g. NOTIFY_TIMEOUT_MS=5000',
    ]);
    assert.match(problems({ NOTIFY_TIMEOUT_MS: "120001" })[0]!, /^NOTIFY_TIMEOUT_MS: must be at most 120000/);
  });
});

describe("settingsShown (the console's system page)", () => {
  it("shows what was set, hides every secret, masks the database password, and marks the rest as defaults", () => {
    const shown = settingsShown({
      API_TOKEN: "tok-0123456789abcdef-secret",
      CALLBACK_SECRET: "cb-0123456789abcdef-secret",
      DATABASE_URL: "postgres://tracklane:pa55word@db.internal:5432/tracklane?sslpassword=also-secret",
      DATABASE_READ_URL: "postgres://tracklane_ro:r3plica@db-replica.internal:5432/tracklane",
      PORT: "8080",
      STUCK_AFTER_MIN: "",
    });
    const byName = new Map(shown.map((s) => [s.name, s]));
    assert.equal(byName.get("API_TOKEN")!.value, "(hidden)");
    assert.equal(byName.get("CALLBACK_SECRET")!.value, "(hidden)");
    const rotating = new Map(settingsShown({ CALLBACK_SECRET_PREVIOUS: "old-0123456789abcdef", API_TOKEN_PREVIOUS: "old-token-0123456789" }).map((s) => [s.name, s]));
    assert.equal(rotating.get("CALLBACK_SECRET_PREVIOUS")!.value, "(hidden)");
    assert.equal(rotating.get("API_TOKEN_PREVIOUS")!.value, "(hidden)");
    assert.equal(byName.get("DATABASE_URL")!.value, "postgres://tracklane:***@db.internal:5432/tracklane");
    assert.equal(byName.get("DATABASE_READ_URL")!.value, "postgres://tracklane_ro:***@db-replica.internal:5432/tracklane");
    // A socket directory stays shown (src/db/url.ts); other settings go.
    const socket = settingsShown({ DATABASE_URL: "postgres://app:pw@/orders?host=/var/run/postgresql&sslkey=/k&port=5433" });
    assert.equal(socket.find((s) => s.name === "DATABASE_URL")!.value, "postgres://app:***@localhost/orders?host=%2Fvar%2Frun%2Fpostgresql&port=5433");
    assert.equal(byName.get("PORT")!.value, "8080");
    assert.equal(byName.get("STUCK_AFTER_MIN")!.value, null, "blank is unset");
    assert.equal(byName.get("STUCK_AFTER_MIN")!.default, "45");
    const text = JSON.stringify(shown);
    for (const secret of ["tok-0123456789abcdef-secret", "cb-0123456789abcdef-secret", "pa55word", "also-secret", "r3plica"]) assert.ok(!text.includes(secret), secret);
    assert.deepEqual(shown.map((s) => s.name), envVariables().map((v) => v.name), "every variable, in order");
  });
});
