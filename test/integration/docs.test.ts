import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

/** /docs must work with no internet: everything it loads comes from tracklane itself. */

const ORIGIN = "http://tracklane.test";

function attributeUrls(html: string): string[] {
  return [...html.matchAll(/\b(?:src|href)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]!);
}

describe("GET /docs (offline API reference)", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(() => t.close());

  it("is an HTML page whose every src/href is same-origin, loading our copy of Scalar and /openapi.json", async () => {
    const res = await t.request(`${ORIGIN}/docs`, { token: null });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
    const html = await res.text();
    const urls = attributeUrls(html);
    assert.ok(urls.length > 0, "the page references its script");
    for (const u of urls) {
      assert.doesNotMatch(u, /^\s*\/\//, `protocol-relative URL ${u}`);
      assert.equal(new URL(u, `${ORIGIN}/docs`).origin, ORIGIN, `${u} is not same-origin`);
    }
    // Nor any other absolute URL (module imports, CSS @import, font links).
    assert.doesNotMatch(html, /https?:\/\//i);
    assert.doesNotMatch(html, /import\s*\{[^}]*\}\s*from/, "no ESM build, which would import chunks by URL");
    assert.match(html, /"url":\s*"\/openapi\.json"/);
    assert.match(html, /"withDefaultFonts":\s*false/, "default fonts come from fonts.scalar.com");
    assert.equal((await t.request("/openapi.json", { token: null })).status, 200);
  });

  it("serves the referenced script as JavaScript, cacheable for long, gzipped when asked", async () => {
    const html = await (await t.request("/docs", { token: null })).text();
    const scripts = [...html.matchAll(/<script\b[^>]*\bsrc\s*=\s*["']([^"']+)["']/gi)].map((m) => m[1]!);
    assert.equal(scripts.length, 1, scripts.join(", "));
    const src = scripts[0]!;
    assert.match(src, /^\/docs\/assets\/scalar\.js\?v=\d+\.\d+\.\d+/);

    const res = await t.request(src, { token: null });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^(text|application)\/javascript\b/);
    const maxAge = Number(/max-age=(\d+)/.exec(res.headers.get("cache-control") ?? "")?.[1] ?? 0);
    assert.ok(maxAge >= 86_400 * 30, `cache-control: ${res.headers.get("cache-control")}`);
    const body = Buffer.from(await res.arrayBuffer());
    assert.ok(body.length > 500_000, `only ${body.length} bytes`);
    assert.match(body.subarray(0, 200_000).toString("utf8") + body.subarray(-200_000).toString("utf8"), /createApiReference/);

    const zipped = await t.request(src, { token: null, headers: { "accept-encoding": "gzip, deflate, br" } });
    assert.equal(zipped.status, 200);
    assert.equal(zipped.headers.get("content-encoding"), "gzip");
    const compressed = Buffer.from(await zipped.arrayBuffer());
    assert.ok(compressed.length < body.length / 2);
    assert.ok(gunzipSync(compressed).equals(body));
  });

  it("works through a real socket too (what a browser does)", async () => {
    const server = await t.listen();
    try {
      const page = await fetch(`${server.url}/docs`);
      assert.equal(page.status, 200);
      const src = attributeUrls(await page.text())[0]!;
      const script = await fetch(new URL(src, server.url));
      assert.equal(script.status, 200);
      assert.match(script.headers.get("content-type") ?? "", /javascript/);
      assert.ok((await script.arrayBuffer()).byteLength > 500_000);
    } finally {
      await server.close();
    }
  });
});

describe("no CDN anywhere under src/", () => {
  it("names no jsDelivr, unpkg, cdnjs or Google Fonts", () => {
    const root = resolve(import.meta.dirname, "../../src");
    const files = readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name));
    assert.ok(files.length > 20);
    const hits = files.flatMap((f) => {
      const text = readFileSync(f, "utf8");
      return ["cdn.jsdelivr", "unpkg.com", "cdnjs.", "fonts.googleapis"].filter((s) => text.includes(s)).map((s) => `${f}: ${s}`);
    });
    assert.deepEqual(hits, []);
  });
});

describe("README.md and docs/*.md", () => {
  it("link nothing outside the repository, and every link inside it names a file that exists", () => {
    const root = resolve(import.meta.dirname, "../..");
    const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
    assert.ok(docs.length >= 8);
    const problems = docs.flatMap((doc) => {
      const text = readFileSync(join(root, doc), "utf8");
      const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
      return targets.flatMap((target) => {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return [`${doc}: ${target} is outside the repository`];
        const file = target.split("#")[0]!;
        if (file === "") return [];
        return existsSync(resolve(root, dirname(doc), file)) ? [] : [`${doc}: ${target} names no file`];
      });
    });
    assert.deepEqual(problems, []);
  });

  it("name no document from outside the repository: they stand alone", () => {
    const root = resolve(import.meta.dirname, "../..");
    const docs = ["README.md", ...readdirSync(join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
    const hits = docs.flatMap((doc) =>
      readFileSync(join(root, doc), "utf8")
        .split("\n")
        .flatMap((line, i) => (/\.\.\/shared|PRODUCT\.md|provider-api\.md|STYLE\.md/.test(line) ? [`${doc}:${i + 1}`] : [])),
    );
    assert.deepEqual(hits, []);
  });
});

describe("docs/api.md's list of error codes", () => {
  it("names every code src/http/errors.ts can answer with, in its status-codes paragraph", () => {
    const root = resolve(import.meta.dirname, "../..");
    const source = readFileSync(join(root, "src/http/errors.ts"), "utf8");
    const union = /export type ErrorCode =([^;]+);/.exec(source)?.[1] ?? "";
    const codes = [...union.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]!);
    assert.ok(codes.length >= 20, `found ${codes.length} codes`);
    const doc = readFileSync(join(root, "docs/api.md"), "utf8");
    const paragraph = /- \*\*Validation status codes\.\*\*[\s\S]*?(?=\n- \*\*)/.exec(doc)?.[0] ?? "";
    // invalid_json was documented only for callbacks, though every /v1 body answers it.
    for (const code of codes) assert.ok(paragraph.includes(`\`${code}\``), `${code} is not in the list`);
  });
});

describe("GET /openapi.json", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(() => t.close());

  it("is generated once and then served as it is: anyone may ask for it, and building it costs milliseconds of CPU", async () => {
    let built = 0;
    const generate = t.app.getOpenAPI31Document.bind(t.app);
    t.app.getOpenAPI31Document = (...args: Parameters<typeof generate>) => {
      built++;
      return generate(...args);
    };
    const bodies: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.request("/openapi.json", { token: null });
      assert.equal(res.status, 200);
      assert.match(res.headers.get("content-type") ?? "", /^application\/json/);
      bodies.push(await res.text());
    }
    assert.equal(built, 1);
    assert.equal(new Set(bodies).size, 1);
    const doc = JSON.parse(bodies[0]!) as { openapi: string; info: { title: string }; paths: Record<string, unknown> };
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(doc.info.title, "tracklane");
    assert.ok("/v1/orders/{order}" in doc.paths);
  });
});
