import assert from "node:assert/strict";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { createLogger } from "../../src/logger.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { listeningUrl, portOf, startOnFreePort, startProcess } from "../helpers/process.ts";

const cleanups: (() => Promise<void>)[] = [];

async function waitReady(url: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await fetch(url).then((r) => r.status === 200, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready after ${ms} ms`);
}
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe("npm start with no configuration", () => {
  it("starts embedded PostgreSQL, answers /readyz 200, prints the URLs, and stops cleanly on SIGINT", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-start-"));
    chmodSync(dataDir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    // The port named up front (the callback URL printed is made from PORT), started again on
    // a fresh one if another test file's process took it first (startOnFreePort).
    const { proc, port } = await startOnFreePort((port) => {
      const proc = startProcess("src/main.ts", { DATA_DIR: dataDir, PORT: String(port), EMULATOR_PORT: "0", HOST: "127.0.0.1" });
      cleanups.push(async () => void (await proc.kill("SIGKILL")));
      return proc;
    }, /callback URL:\s+(\S+)/);
    const [, callbackUrl] = proc.output().match(/callback URL:\s+(\S+)/) as unknown as [string, string];
    assert.match(callbackUrl, new RegExp(`^http://127\\.0\\.0\\.1:${port}/callbacks/[A-Za-z0-9_-]{20,}$`));
    assert.match(proc.output(), /API docs:\s+http:\/\/127\.0\.0\.1:\d+\/docs/);
    assert.match(proc.output(), new RegExp(`listening on:\\s+127\\.0\\.0\\.1 port ${port} only \\(HOST=127\\.0\\.0\\.1\\): http://127\\.0\\.0\\.1:${port}\n`));
    assert.match(proc.output(), /API token:\s+generated, stored in .*api-token/);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    assert.equal(ready.status, 200);
    const cb = await fetch(callbackUrl, { method: "POST", body: JSON.stringify({ client_order_id: "START-1", order_status: "CREATED" }) });
    assert.equal(cb.status, 200);
    assert.equal(await proc.kill("SIGINT"), 0);
    assert.match(proc.output(), /embedded PostgreSQL stopped/);
  });
});

describe("npm start twice at the same moment on one fresh DATA_DIR", () => {
  it("both start: one starts the embedded PostgreSQL, the other shares it; both stop cleanly", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-twice-"));
    chmodSync(dataDir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    // Started together: neither finds a server running, nor a data directory. Each on a port
    // it binds itself (PORT=0), read back from its "service:" line: ports picked here and
    // released could be taken by another test file's process before these listen.
    const procs = [0, 1].map(() => startProcess("src/main.ts", { DATA_DIR: dataDir, PORT: "0", EMULATOR_PORT: "0", HOST: "127.0.0.1", LOG_FORMAT: "json" }));
    for (const p of procs) cleanups.push(async () => void (await p.kill("SIGKILL")));
    const exited = (p: (typeof procs)[number]) =>
      new Promise<never>((_, reject) => p.child.once("exit", (code) => reject(new Error(`exited with ${code}`))));
    const started = await Promise.allSettled(procs.map((p) => Promise.race([p.waitFor(/callback URL:\s+(\S+)/, 100_000), exited(p)])));
    const failed = started.flatMap((r, i) => (r.status === "rejected" ? [`process ${i}: ${procs[i]!.output().slice(-1500)}`] : []));
    assert.deepEqual(failed, [], "both started");
    const ports = procs.map((p) => portOf(/service:\s+(http:\/\/\S+)/.exec(p.output())![1]!));
    for (const port of ports) assert.equal((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 200);
    const shared = procs.map((p) => /database:\s+embedded PostgreSQL in \S+ \(shared\)/.test(p.output()));
    assert.deepEqual([...shared].sort(), [false, true], "one started the server, the other shares it");
    assert.ok(procs.every((p) => !/adopting an embedded PostgreSQL/.test(p.output())), "neither took the other's server for one left behind");
    // The same secrets (the first stored wins), so a callback carrying the printed URL is taken by either.
    const urls = procs.map((p) => p.output().match(/callback URL:\s+http:\/\/[^/]+(\/\S+)/)![1]);
    assert.equal(urls[0], urls[1]);
    // The one sharing stops first: the owner's server outlives it.
    const [owner, sharer] = shared[0] ? [procs[1]!, procs[0]!] : [procs[0]!, procs[1]!];
    assert.equal(await sharer.kill("SIGINT"), 0, sharer.output().slice(-1500));
    assert.equal(await owner.kill("SIGINT"), 0, owner.output().slice(-1500));
    assert.match(owner.output(), /embedded PostgreSQL stopped/);
  });
});

describe("processes sharing the embedded PostgreSQL, restarted one at a time (a rolling deploy)", () => {
  /**
   * A migrated DATA_DIR with no DATABASE_URL, `web` starting a web process on it (on a free
   * port it binds itself, none of `avoid`), and the lines of its server's postmaster.pid
   * (null: none).
   */
  const sharedDataDir = async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-rolling-"));
    chmodSync(dataDir, 0o755); // reachable by the postgres system user when run as root
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const env = { DATA_DIR: dataDir, HOST: "127.0.0.1", LOG_FORMAT: "json" };
    const migrate = startProcess("src/migrate.ts", env);
    cleanups.push(async () => void (await migrate.kill("SIGKILL")));
    assert.equal(await new Promise((r) => migrate.child.once("exit", r)), 0, migrate.output().slice(-1500));
    // PORT=0, the port read back from the "web listening" line: one picked here and
    // released could be taken by another test file's process before the web listens.
    const web = async (avoid: number[] = []): Promise<{ proc: ReturnType<typeof startProcess>; base: string }> => {
      const proc = startProcess("src/web.ts", { ...env, PORT: "0" });
      cleanups.push(async () => void (await proc.kill("SIGKILL")));
      const base = await listeningUrl(proc, "web listening", 60_000);
      if (avoid.includes(portOf(base))) {
        await proc.kill("SIGTERM");
        return await web(avoid);
      }
      await waitReady(`${base}/readyz`, 60_000);
      return { proc, base };
    };
    const pidFile = join(dataDir, "pg", "postmaster.pid");
    const postmasterLines = () => (existsSync(pidFile) ? readFileSync(pidFile, "utf8").split("\n") : null);
    return { dataDir, web, postmasterLines };
  };

  it("the one that started it stops and the others keep it; a new one adopts it; the last to stop stops it", async () => {
    const { dataDir, web, postmasterLines } = await sharedDataDir();
    const secret = () => readFileSync(join(dataDir, "callback-secret"), "utf8").trim();
    const stores = async (base: string, coid: string) =>
      (await fetch(`${base}/callbacks/${secret()}`, { method: "POST", body: JSON.stringify({ client_order_id: coid, order_status: "CREATED" }) })).status;
    const postmaster = () => {
      const lines = postmasterLines();
      return lines === null ? null : Number(lines[0]);
    };

    const first = await web(); // starts the server
    const second = await web(); // shares it
    const server = postmaster();
    assert.notEqual(server, null);
    assert.equal(await first.proc.kill("SIGTERM"), 0, first.proc.output().slice(-1500));
    assert.equal(postmaster(), server, "the server runs on");
    assert.equal((await fetch(`${second.base}/readyz`)).status, 200, "the process sharing it is still ready");
    assert.equal(await stores(second.base, "ROLL-1"), 200, "and stores callbacks");
    assert.match(first.proc.output(), /left running for the other tracklane processes/);

    const third = await web(); // the deploy's new process: adopts the server left running
    assert.equal(postmaster(), server, "adopted, not started anew on another port");
    assert.equal(await second.proc.kill("SIGTERM"), 0, second.proc.output().slice(-1500));
    assert.equal(await stores(third.base, "ROLL-2"), 200);
    assert.equal(await third.proc.kill("SIGTERM"), 0, third.proc.output().slice(-1500));
    assert.equal(postmaster(), null, "the last process to stop stopped the server");
  });

  it("a server left running that dies is started again by the next process on its port, where the processes still using it look", async () => {
    const { web, postmasterLines } = await sharedDataDir();
    const recorded = () => {
      const lines = postmasterLines();
      assert.ok(lines, "a postmaster.pid");
      return lines;
    };
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };

    const first = await web(); // starts the server
    const second = await web(); // shares it
    assert.equal(await first.proc.kill("SIGTERM"), 0, first.proc.output().slice(-1500));
    const [pid, , , port] = recorded();
    // The server left running dies; nobody watches it now.
    process.kill(Number(pid), "SIGKILL");
    for (let i = 0; i < 100 && alive(Number(pid)); i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await fetch(`${second.base}/readyz`)).status, 503, "the process using it has no database");

    const third = await web([Number(port)]); // the deploy's next process starts it again
    assert.notEqual(recorded()[0], pid, "a new server");
    assert.equal(recorded()[3], port, "on the port the processes using it look at");
    await waitReady(`${second.base}/readyz`, 30_000);
    assert.equal(await second.proc.kill("SIGTERM"), 0, second.proc.output().slice(-1500));
    assert.equal(await third.proc.kill("SIGTERM"), 0, third.proc.output().slice(-1500));
  });
});

describe("kill -9 right after acknowledgements", () => {
  it("loses no acknowledged event", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const env = {
      DATABASE_URL: db.url,
      // Any free port, bound by the process itself and read back from its "web listening"
      // line (so at info): one picked here and released could be taken by another test
      // file's process before this one listens.
      PORT: "0",
      HOST: "127.0.0.1",
      API_TOKEN: "kill-test-token-0123456789",
      CALLBACK_SECRET: "kill-test-secret-0123456789",
      LOG_LEVEL: "info",
      DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-kill-")),
    };
    await runMigrations(db.url, createLogger({ level: "silent" }));
    const acked = new Map<string, string>(); // event_id -> order id
    for (let round = 0; round < 3; round++) {
      const proc = startProcess("src/web.ts", env);
      const port = portOf(await listeningUrl(proc, "web listening"));
      await waitReady(`http://127.0.0.1:${port}/readyz`);
      let stop = false;
      let sent = 0;
      // 32 concurrent senders; the process is killed mid-stream.
      const senders = Array.from({ length: 32 }, async (_, s) => {
        while (!stop) {
          const id = `K${round}-${s}-${sent++}`;
          try {
            const res = await fetch(`http://127.0.0.1:${port}/callbacks/${env.CALLBACK_SECRET}`, {
              method: "POST",
              body: JSON.stringify({ client_order_id: id, order_status: "ALLOTTED" }),
            });
            if (res.status === 200) acked.set(((await res.json()) as { event_id: string }).event_id, id);
          } catch {
            return; // connection refused or reset: the process is gone
          }
        }
      });
      // Kill mid-stream once this round has had some acknowledgements (bounded in time,
      // so a slow, shared machine changes how many, not whether the test can run).
      const target = acked.size + 60 + round * 40;
      const deadline = Date.now() + 15_000;
      while (acked.size < target && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      await proc.kill("SIGKILL");
      stop = true;
      await Promise.all(senders);
    }
    assert.ok(acked.size >= 150, `only ${acked.size} acknowledged`);
    const sql = driverSql(db.url, { max: 1 });
    const rows = await sql<{ id: string; client_order_id: string }[]>`
      select id::text, client_order_id from order_events where id = any(${[...acked.keys()]}::bigint[])`;
    await sql.end();
    const stored = new Map(rows.map((r) => [r.id, r.client_order_id]));
    const missing = [...acked].filter(([id, coid]) => stored.get(id) !== coid);
    assert.deepEqual(missing, [], `${missing.length} of ${acked.size} acknowledged events lost`);
    console.log(`kill -9 x3: ${acked.size} acknowledged, ${stored.size} stored`);
  });
});
