/**
 * `npm run web` + `npm run worker` as separate processes: the worker's own counters (job
 * outcomes, projection lag), which the web process never sees, reach Prometheus on the
 * worker's METRICS_PORT (docs/operations.md, "Metrics").
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createTestDatabase } from "../helpers/db.ts";
import { cleanupsAfterAll, listeningUrl, startProcess } from "../helpers/process.ts";

const cleanups = cleanupsAfterAll();

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The value of one sample line of Prometheus text, or undefined. */
function sample(text: string, line: string): number | undefined {
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe("metrics of separate web and worker processes", () => {
  it("a worker serves its own job and projection counters on METRICS_PORT, behind METRICS_TOKEN", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-worker-metrics-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const env = {
      DATABASE_URL: db.url,
      HOST: "127.0.0.1",
      API_TOKEN: "worker-metrics-api-token-0123",
      CALLBACK_SECRET: "worker-metrics-secret-0123",
      METRICS_TOKEN: "worker-metrics-scrape-token-0123",
      // info: for the lines naming the ports the processes bound (PORT=0, METRICS_PORT=0: any
      // free port, never one picked here and released, which another test file's process
      // could take before these listen).
      LOG_LEVEL: "info",
      DATA_DIR: dataDir,
    };
    const web = startProcess("src/web.ts", { ...env, PORT: "0" });
    cleanups.push(async () => void (await web.kill("SIGKILL")));
    const worker = startProcess("src/worker.ts", { ...env, METRICS_PORT: "0" });
    cleanups.push(async () => void (await worker.kill("SIGKILL")));

    const [workerUrl, webUrl] = await Promise.all([listeningUrl(worker, "worker metrics listening"), listeningUrl(web, "web listening")]);
    await until("the worker's /readyz", async () => ((await fetch(`${workerUrl}/readyz`)).status === 200 ? true : undefined));
    await until("the web's /readyz", async () => ((await fetch(`${webUrl}/readyz`)).status === 200 ? true : undefined));
    assert.equal((await fetch(`${workerUrl}/healthz`)).status, 200);
    // The scrape token applies on the worker too; the API is not served there.
    const refused = await fetch(`${workerUrl}/metrics`);
    assert.equal(refused.status, 401);
    const notServed = await fetch(`${workerUrl}/v1/orders`, { headers: { authorization: `Bearer ${env.API_TOKEN}` } });
    assert.equal(notServed.status, 404);
    // Errors as everywhere: a request id to find the request by in the worker's log.
    for (const res of [refused, notServed]) {
      const { error } = (await res.json()) as { error: { code: string; request_id: string } };
      assert.match(error.request_id, /^[0-9a-f-]{36}$/, JSON.stringify(error));
      assert.equal(res.headers.get("x-request-id"), error.request_id);
    }

    const cb = await fetch(`${webUrl}/callbacks/${env.CALLBACK_SECRET}`, {
      method: "POST",
      body: JSON.stringify({ client_order_id: "WM-1", order_status: "ALLOTTED" }),
    });
    assert.equal(cb.status, 200);

    const scrape = async (url: string) => await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${env.METRICS_TOKEN}` } })).text();
    // The worker projected the callback: its drain job and the lag are counted where they ran.
    // Wait for both, not for a drain alone: the per-minute cron drain may succeed with nothing
    // queued before the callback's drain runs (a CI run once crossed a minute just then), and
    // the lag is observed a moment before its job is counted.
    await until("the worker to count the drain and observe the callback's projection lag", async () => {
      const text = await scrape(workerUrl);
      const drains = sample(text, 'tracklane_jobs_total{task="projection__drain",outcome="success"}') ?? 0;
      const lags = sample(text, "tracklane_projection_lag_seconds_count") ?? 0;
      return drains >= 1 && lags >= 1 ? text : undefined;
    });
    // The web process received the callback; it ran no job, so those counts are not its to show.
    const webText = await scrape(webUrl);
    assert.equal(sample(webText, 'tracklane_callbacks_total{result="stored"}'), 1);
    assert.equal(sample(webText, 'tracklane_jobs_total{task="projection__drain",outcome="success"}'), undefined);

    // A clean stop still: /metrics closes with the rest.
    assert.equal(await worker.kill("SIGTERM"), 0);
    await assert.rejects(fetch(`${workerUrl}/healthz`));
  });
});

describe("stopping a listener", () => {
  it("waits for a request in flight, not for its keep-alive connection to be let go", async () => {
    const { listen } = await import("../../src/http/server.ts");
    const { request, Agent } = await import("node:http");
    let arrived!: () => void;
    const inFlight = new Promise<void>((r) => (arrived = r));
    const server = await listen(
      {
        fetch: async () => {
          arrived();
          return await new Promise<Response>((r) => setTimeout(() => r(new Response("ok")), 300));
        },
      },
      0,
      "127.0.0.1",
    );
    const agent = new Agent({ keepAlive: true });
    cleanups.push(async () => agent.destroy());
    const answered = new Promise<number>((resolve, reject) => {
      request(`${server.url}/metrics`, { agent }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      })
        .on("error", reject)
        .end();
    });
    await inFlight; // not a fixed pause: on a loaded machine the request may not have arrived yet
    const started = Date.now();
    await server.close();
    assert.equal(await answered, 200);
    assert.ok(Date.now() - started < 3000, `close took ${Date.now() - started} ms`);
  });
});
