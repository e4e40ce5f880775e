/**
 * The console's stylesheet, script and icon, served by tracklane itself (nothing from
 * outside; the icon's link also keeps browsers from asking for /favicon.ico, a 404).
 * Read once; their URLs carry a hash of the content, so browsers keep them for a year and
 * fetch again only after an upgrade changed them.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Hono } from "hono";

interface Asset {
  path: string;
  type: string;
  body: string;
  version: string;
}

function load(name: string, type: string): Asset {
  const body = readFileSync(new URL(`./assets/${name}`, import.meta.url), "utf8");
  const version = createHash("sha256").update(body).digest("hex").slice(0, 12);
  return { path: `/assets/${name}`, type, body, version };
}

const ASSETS = [load("console.css", "text/css; charset=utf-8"), load("console.js", "text/javascript; charset=utf-8"), load("icon.svg", "image/svg+xml")] as const;

/** Where the page finds each asset (with its version). */
export const assetUrl = {
  css: `${ASSETS[0].path}?v=${ASSETS[0].version}`,
  js: `${ASSETS[1].path}?v=${ASSETS[1].version}`,
  icon: `${ASSETS[2].path}?v=${ASSETS[2].version}`,
};

export function assetRoutes() {
  const app = new Hono();
  for (const asset of ASSETS) {
    app.get(asset.path, (c) => {
      const current = c.req.query("v") === asset.version;
      c.header("content-type", asset.type);
      c.header("cache-control", current ? "public, max-age=31536000, immutable" : "no-cache");
      c.header("x-content-type-options", "nosniff");
      return c.body(asset.body);
    });
  }
  return app;
}
