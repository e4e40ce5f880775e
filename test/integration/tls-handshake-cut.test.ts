/**
 * A TLS handshake cut short at start-up (the server answered yes to TLS's request, then
 * closed the connection: a server or proxy restarting) is a failure to connect, exit 1,
 * and a start again may work; a server that answers no to TLS's request, with
 * DATABASE_URL asking for it, stays a configuration error, exit 78. postgres.js words both
 * the same; the server, asked again, tells which (runtime/startup-errors.ts). Loopback
 * servers that speak only the first byte of PostgreSQL's protocol.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo, Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { runMigrations } from "../../src/db/migrate.ts";
import { createLogger } from "../../src/logger.ts";
import { describeStartupError, withTlsAnswer } from "../../src/runtime/startup-errors.ts";

const ROOT = resolve(import.meta.dirname, "../..");
const silent = createLogger({ level: "silent" });
const dataDir = mkdtempSync(join(tmpdir(), "tracklane-tls-cut-"));

/** Answers every SSLRequest with `answer` ('S' yes, 'N' no), then closes the connection at the client's next bytes (a ClientHello). */
async function firstByteServer(answer: "S" | "N"): Promise<{ server: Server; url: string }> {
  const server = createServer((socket) => {
    socket.on("error", () => {});
    socket.once("data", () => {
      socket.write(answer);
      socket.once("data", () => socket.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `postgres://tracklane@127.0.0.1:${(server.address() as AddressInfo).port}/tracklane?sslmode=require` };
}

function migrate(databaseUrl: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ["src/migrate.ts"], { cwd: ROOT, env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dataDir, LOG_LEVEL: "warn" } });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.on("exit", (code) => done({ code, stderr }));
  });
}

let cut: { server: Server; url: string };
let refused: { server: Server; url: string };
before(async () => {
  cut = await firstByteServer("S");
  refused = await firstByteServer("N");
});
after(() => {
  cut.server.close();
  refused.server.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("TLS at start-up: a handshake cut short, or a server without TLS", () => {
  it("postgres.js says the same of both; asked again, the server tells the cut (exit 1) from the refusal (exit 78)", async () => {
    for (const [at, exitCode, line] of [
      [cut.url, 1, /: the server accepts TLS but closed the connection during the handshake \(restarting\?\); check that PostgreSQL runs there, then start again$/],
      [refused.url, 78, /: the server does not accept TLS, and DATABASE_URL asks for it \(sslmode=require\)/],
    ] as const) {
      const err = await runMigrations(at, silent).then(
        () => assert.fail("connected"),
        (e: unknown) => e,
      );
      assert.match(String((err as Error).message), /before secure TLS connection was established/);
      const said = describeStartupError(err, await withTlsAnswer(err, { databaseUrl: at }));
      assert.equal(said.exitCode, exitCode, said.lines.join("\n"));
      assert.match(said.lines[0]!, line);
    }
  });

  it("npm run migrate against a server that cuts the handshake exits 1, saying so; against one without TLS, 78", async () => {
    const first = await migrate(cut.url);
    assert.equal(first.code, 1, first.stderr);
    assert.match(first.stderr, /the server accepts TLS but closed the connection during the handshake/);
    const second = await migrate(refused.url);
    assert.equal(second.code, 78, second.stderr);
    assert.match(second.stderr, /the server does not accept TLS/);
  });
});
