/**
 * GET /docs: the Scalar API reference for /openapi.json, with everything it loads served
 * from here, so it works with no internet access (an air-gapped install, a laptop on a
 * train). The page is Scalar's own Hono template pointed at our copy of the standalone
 * browser bundle of @scalar/api-reference (a single file: no lazy chunks) instead of a CDN.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzip } from "node:zlib";
import { Scalar } from "@scalar/hono-api-reference";
import { Hono } from "hono";
import { assetUrl } from "../console/assets.ts";
import type { AppEnv } from "../types.ts";

const DOCS_SCRIPT_PATH = "/docs/assets/scalar.js";

interface ScalarBundle {
  version: string;
  file: string;
}

let located: ScalarBundle | undefined;

/** Its exports list no dist/browser/, so the file is found from the package's main entry. */
function scalarBundle(): ScalarBundle {
  if (located) return located;
  const root = dirname(dirname(fileURLToPath(import.meta.resolve("@scalar/api-reference"))));
  const pkg: unknown = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const version = typeof pkg === "object" && pkg !== null && "version" in pkg && typeof pkg.version === "string" ? pkg.version : "0";
  located = { version, file: join(root, "dist", "browser", "standalone.js") };
  return located;
}

let raw: Uint8Array<ArrayBuffer> | undefined;
let gzipped: Promise<Uint8Array<ArrayBuffer>> | undefined;

/** Read (4 MB) and compressed (to about 1 MB) on first use only, then kept for the process. */
function bundleBytes(): Uint8Array<ArrayBuffer> {
  raw ??= new Uint8Array(readFileSync(scalarBundle().file));
  return raw;
}

function bundleGzipped(): Promise<Uint8Array<ArrayBuffer>> {
  gzipped ??= promisify(gzip)(bundleBytes()).then((b) => new Uint8Array(b));
  return gzipped;
}

export function docsRoutes() {
  const app = new Hono<AppEnv>();

  app.get(
    "/docs",
    Scalar(() => ({
      url: "/openapi.json",
      pageTitle: "tracklane API",
      // The version in the URL lets the script be cached for a year and still change with an upgrade.
      cdn: `${DOCS_SCRIPT_PATH}?v=${encodeURIComponent(scalarBundle().version)}`,
      // The single-file (UMD) build: the ESM one imports further chunks by URL.
      bundle: false,
      // Both default to reaching Scalar's servers (fonts.scalar.com, telemetry).
      withDefaultFonts: false,
      telemetry: false,
      // On localhost, 127.0.0.1 and *.test/*.localhost hosts (the URL a newcomer opens)
      // Scalar shows "Ask AI" (it sends the OpenAPI document to api.scalar.com), MCP
      // buttons (VS Code, Cursor) and developer tools (Configure, Share, Deploy, on
      // Scalar's servers): none works offline, and each would hand our API's description
      // to a third party.
      agent: { disabled: true },
      mcp: { disabled: true },
      showDeveloperTools: "never",
      // Else the browser asks for /favicon.ico, a 404 reported as an error.
      favicon: assetUrl.icon,
    })),
  );

  app.get(DOCS_SCRIPT_PATH, async (c) => {
    const useGzip = /\bgzip\b/.test(c.req.header("accept-encoding") ?? "");
    const body = useGzip ? await bundleGzipped() : bundleBytes();
    return c.body(body, 200, {
      "content-type": "text/javascript; charset=utf-8",
      "cache-control": "public, max-age=31536000, immutable",
      vary: "accept-encoding",
      ...(useGzip ? { "content-encoding": "gzip" } : {}),
    });
  });

  return app;
}
