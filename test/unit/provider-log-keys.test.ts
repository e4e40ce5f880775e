/** A provider call's log line names its component once: a key written twice is one JSON object with two values, which log collectors read differently. */
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, it } from "node:test";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { configuredProvider } from "../../src/runtime/provider.ts";

describe("the configured provider's log lines", () => {
  it("carry component once", async () => {
    const server = createServer((_req, res) => res.writeHead(503, { "content-type": "application/json" }).end('{"detail":"down"}'));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const raw: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        raw.push(...chunk.toString("utf8").split("\n").filter(Boolean));
        done();
      },
    });
    try {
      const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-test-")), PROVIDER_BASE_URL: url, PROVIDER_TOKEN: "provider-token-0123" });
      const client = configuredProvider(config, createLogger({ level: "info", destination: sink }));
      assert.ok(client);
      await assert.rejects(client.generatePoolAwbs(10));
      const refused = raw.filter((l) => l.includes("provider refused call"));
      assert.equal(refused.length, 1, raw.join("\n"));
      assert.equal(refused[0]!.match(/"component":/g)?.length, 1, refused[0]);
    } finally {
      server.close();
    }
  });
});
