import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, it } from "node:test";

const configModule = resolve(import.meta.dirname, "../../src/config.ts");

/**
 * loadConfig() in a fresh process whose working directory holds `dotenv` as `.env`: the
 * settings read, or the problems printed. The environment is only PATH and `env`.
 */
function withDotEnv(dotenv: string | Buffer, env: Record<string, string> = {}): { config?: Record<string, unknown>; problems?: string[]; output: string } {
  const cwd = mkdtempSync(join(tmpdir(), "tracklane-dotenv-"));
  writeFileSync(join(cwd, ".env"), dotenv);
  const script = `
    const { loadConfig, ConfigError } = await import(${JSON.stringify(configModule)});
    try {
      const c = loadConfig();
      console.log(JSON.stringify({ config: { apiToken: c.apiToken, apiTokenSource: c.secretSources.apiToken, callbackSecret: c.callbackSecret, databaseUrl: c.databaseUrl, awbMode: c.awb.mode, port: c.port, providerToken: c.provider.auth?.token } }));
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.log(JSON.stringify({ problems: err.problems }));
    }`;
  const out = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd,
    env: { PATH: process.env.PATH ?? "", DATA_DIR: join(cwd, "data"), ...env },
    encoding: "utf8",
  });
  assert.equal(out.status, 0, out.stderr);
  return { ...(JSON.parse(out.stdout) as { config?: Record<string, unknown>; problems?: string[] }), output: out.stdout + out.stderr };
}

const TOKEN = "dotenv-api-token-0123456789";
const SECRET = "dotenv-callback-secret-0123456789";

describe(".env as merchants write it", () => {
  it("a file saved on Windows (byte-order mark, CRLF) is read whole: the first variable is not lost, no value keeps a \\r", () => {
    const { config } = withDotEnv(`\uFEFFAPI_TOKEN=${TOKEN}\r\nCALLBACK_SECRET=${SECRET}\r\nAWB_MODE=fresh\r\n`);
    assert.deepEqual(
      { apiToken: config?.apiToken, source: config?.apiTokenSource, secret: config?.callbackSecret, awbMode: config?.awbMode },
      { apiToken: TOKEN, source: "environment (API_TOKEN)", secret: SECRET, awbMode: "fresh" },
    );
  });

  it("export prefixes, quotes, comments, spacing, blank values, duplicates and = in values read as dotenv reads them", () => {
    const { config } = withDotEnv(
      [
        "# whole-line comment",
        `export API_TOKEN = '${TOKEN}' # inline comment`,
        `CALLBACK_SECRET="${SECRET}"`,
        "AWB_MODE=pool",
        "AWB_MODE=fresh   # the last one wins",
        "PORT=",
        "PROVIDER_BASE_URL=http://127.0.0.1:4010",
        "PROVIDER_TOKEN=dG9rZW4=",
        "DATABASE_URL='postgres://u:p%23ss@127.0.0.1:5432/db?sslmode=disable'",
      ].join("\r\n"),
    );
    assert.deepEqual(config, {
      apiToken: TOKEN,
      apiTokenSource: "environment (API_TOKEN)",
      callbackSecret: SECRET,
      databaseUrl: "postgres://u:p%23ss@127.0.0.1:5432/db?sslmode=disable",
      awbMode: "fresh",
      port: 3000,
      providerToken: "dG9rZW4=",
    });
  });

  it("an unquoted value with a # inside (a comment there) stops the start naming the variable, never echoing it, instead of cutting it short", () => {
    const { problems, output } = withDotEnv(`API_TOKEN=${TOKEN}#tail\nCALLBACK_SECRET=${SECRET}\nPROVIDER_CLIENT_SECRET=cs-part-one#cs-part-two # comment\n`);
    assert.deepEqual(problems?.map((p) => p.split(":")[0]), ["API_TOKEN", "PROVIDER_CLIENT_SECRET"]);
    assert.match(problems![0]!, /# inside the value starts a comment/);
    for (const secret of [TOKEN, "cs-part-one", "cs-part-two"]) assert.ok(!output.includes(secret), `${secret} echoed`);
    // Right after `=` it would make the value empty (a generated token instead of this one).
    assert.deepEqual(withDotEnv(`API_TOKEN=#${TOKEN}\n`).problems?.map((p) => p.split(":")[0]), ["API_TOKEN"]);
    // Another program's line in a shared file is read as Node reads it, and stops nothing.
    assert.equal(withDotEnv(`API_TOKEN=${TOKEN}\nTHEME_COLOR=#fff\nOTHER_KEY=abc#def\n`).problems, undefined);
    // Quoted, the # is part of the value; after a space it starts a comment, as everywhere.
    const quoted = withDotEnv(`API_TOKEN='${TOKEN}#tail'\nAWB_MODE=fresh #comment\nPORT= # the default\n`).config;
    assert.deepEqual([quoted?.apiToken, quoted?.awbMode, quoted?.port], [`${TOKEN}#tail`, "fresh", 3000]);
  });

  it("a quote left open swallowing the lines after it stops the start naming the variable", () => {
    const { problems, output } = withDotEnv(`CALLBACK_SECRET="${SECRET}\nAWB_MODE=fresh\nAPI_TOKEN=${TOKEN}"\n`);
    assert.equal(problems?.length, 1);
    assert.match(problems![0]!, /^CALLBACK_SECRET: in \.env, its value opens a quote that is not closed/);
    assert.ok(!output.includes(SECRET) && !output.includes(TOKEN));
    // Another program's multi-line value is left alone, lines like NAME=value in it too (base64 padding).
    const pem = `JWT_KEY="-----BEGIN PRIVATE KEY-----\nMIIBVQIBADANBgkqhkiG9w0B==\n-----END PRIVATE KEY-----"\nAWB_MODE=fresh\n`;
    assert.equal(withDotEnv(pem).config?.awbMode, "fresh");
    // ...unless it swallowed a setting of ours.
    assert.match(withDotEnv(`JWT_KEY="-----BEGIN\nAWB_MODE=fresh\nPORT=8080"\n`).problems?.[0] ?? "", /^JWT_KEY: in \.env, its value opens a quote that is not closed/);
  });

  it("the environment wins over .env, also over a line of .env that would be refused", () => {
    const { config } = withDotEnv(`API_TOKEN=${TOKEN}#tail\nAWB_MODE=fresh\n`, { API_TOKEN: "from-the-environment-0123", AWB_MODE: "pool" });
    assert.equal(config?.apiToken, "from-the-environment-0123");
    assert.equal(config?.awbMode, "pool");
  });

  it("a file saved as UTF-16 stops the start saying so", () => {
    const { problems } = withDotEnv(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from("AWB_MODE=fresh\r\n", "utf16le")]));
    assert.equal(problems?.length, 1);
    assert.match(problems![0]!, /^\.env: .* is saved as UTF-16; save it as UTF-8$/);
  });
});
