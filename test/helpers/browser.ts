/**
 * Tests in a real browser: the system's Chromium, driven by playwright-core (which brings
 * no browser of its own). Where Chromium is: CHROMIUM_PATH, else /usr/bin/chromium, else
 * `chromium` on PATH. Without it the browser tests fail with a sentence saying how to
 * install it; they never skip silently.
 *
 * Also: signing in through the console's real form, a recorder of every request pages
 * make (to show none leaves tracklane's origin), and axe-core's accessibility check.
 */
import { accessSync, constants } from "node:fs";
import { createRequire } from "node:module";
import { delimiter, join } from "node:path";
import { after, before } from "node:test";
import { chromium } from "playwright-core";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { createTestApp } from "./app.ts";
import type { TestApp } from "./app.ts";

const require = createRequire(import.meta.url);

export const CHROMIUM_MISSING =
  "the browser tests need Chromium: install it (Debian/Ubuntu: `apt-get install -y chromium`) or set CHROMIUM_PATH to a Chromium or Chrome executable";

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

/** The Chromium to drive, or an error saying how to get one. */
export function chromiumPath(env: NodeJS.ProcessEnv = process.env): string {
  const given = env.CHROMIUM_PATH?.trim();
  if (given) {
    if (executable(given)) return given;
    throw new Error(`CHROMIUM_PATH is ${given}, which is not an executable file; ${CHROMIUM_MISSING}`);
  }
  const candidates = ["/usr/bin/chromium", ...(env.PATH ?? "").split(delimiter).filter(Boolean).map((dir) => join(dir, "chromium"))];
  const found = candidates.find(executable);
  if (found) return found;
  throw new Error(`no Chromium at /usr/bin/chromium or on PATH; ${CHROMIUM_MISSING}`);
}

/** True when no Chromium is to be had here: console.test.ts fails for it; smaller browser tests skip. */
export function chromiumMissing(): boolean {
  try {
    chromiumPath();
    return false;
  } catch {
    return true;
  }
}

/** What a file of browser tests drives: Chromium, and a test app listening on loopback. */
export interface BrowserApp {
  browser: Browser;
  t: TestApp;
  url: string;
}

/**
 * Registers the file's before/after hooks that start (unless Chromium is missing) and stop
 * a browser and a listening test app; the returned object is filled in before the tests run.
 */
export function useBrowserApp(missing: boolean): BrowserApp {
  const ctx = {} as BrowserApp;
  let server: { url: string; close(): Promise<void> } | undefined;
  before(async () => {
    if (missing) return;
    ctx.browser = await launchBrowser();
    ctx.t = await createTestApp();
    server = await ctx.t.listen();
    ctx.url = server.url;
  });
  after(async () => {
    await ctx.browser?.close();
    await server?.close();
    await ctx.t?.close();
  });
  return ctx;
}

/** Headless Chromium; --no-sandbox only as root (Chromium refuses to start a sandbox as root). */
export async function launchBrowser(): Promise<Browser> {
  const executablePath = chromiumPath();
  const asRoot = process.getuid?.() === 0;
  try {
    return await chromium.launch({ executablePath, headless: true, args: asRoot ? ["--no-sandbox"] : [], timeout: 30_000 });
  } catch (err) {
    throw new Error(`could not start Chromium at ${executablePath} (${(err as Error).message.split("\n")[0]}); ${CHROMIUM_MISSING}`, { cause: err });
  }
}

/** Signs in through the console's sign-in form, as a person would; ends on the page signed in to. */
export async function signIn(page: Page, baseUrl: string, token: string, next = "/"): Promise<void> {
  await page.goto(`${baseUrl}/sign-in?next=${encodeURIComponent(next)}`);
  await page.getByLabel("API token").fill(token);
  await Promise.all([page.waitForURL((u) => u.pathname !== "/sign-in"), page.getByRole("button", { name: "Sign in" }).click()]);
}

export interface RequestRecorder {
  /** Every URL requested, in order (data: and blob: URLs are not requests over the network and are left out). */
  readonly urls: string[];
  /** The requested URLs whose origin is not `origin`. */
  foreign(origin: string): string[];
}

/** Records every request of a page, or of all pages of a context. */
export function recordRequests(target: Page | BrowserContext): RequestRecorder {
  const urls: string[] = [];
  target.on("request", (req) => {
    const url = req.url();
    if (!url.startsWith("data:") && !url.startsWith("blob:")) urls.push(url);
  });
  return {
    urls,
    foreign: (origin) => urls.filter((u) => new URL(u).origin !== origin),
  };
}

export type AxeImpact = "minor" | "moderate" | "serious" | "critical";

export interface AxeViolation {
  id: string;
  impact: AxeImpact;
  help: string;
  /** CSS selectors of the offending elements (the first few). */
  targets: string[];
}

const AXE_PATH = require.resolve("axe-core");

/**
 * A context for axe: addScriptTag puts axe-core into the page as an inline script, which
 * the console's Content-Security-Policy (script-src 'self') rightly refuses, so axe runs
 * in a context that bypasses the CSP; the console's own checks run in ordinary contexts.
 */
export async function newAxeContext(browser: Browser, viewport = { width: 1280, height: 900 }): Promise<BrowserContext> {
  return await browser.newContext({ bypassCSP: true, viewport });
}

/** The violations that fail a page: serious and critical ones. */
export const failsPage = (v: AxeViolation) => v.impact === "serious" || v.impact === "critical";

/** Runs axe-core on the page as it is now (its context made by newAxeContext); its serious and critical violations. */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  return (await axeRun(page)).filter(failsPage);
}

/** Runs axe-core on the page as it is now (its context made by newAxeContext); every violation, whatever its impact. */
export async function axeRun(page: Page): Promise<AxeViolation[]> {
  const loaded = await page.evaluate(() => typeof (globalThis as { axe?: unknown }).axe === "object");
  if (!loaded) {
    try {
      await page.addScriptTag({ path: AXE_PATH });
    } catch (err) {
      throw new Error(`axe-core could not be put into ${page.url()} (a page with a CSP needs a context from newAxeContext): ${(err as Error).message.split("\n")[0]}`, { cause: err });
    }
  }
  return await page.evaluate(async () => {
    interface Result {
      id: string;
      impact?: string | null;
      help: string;
      nodes: { target: unknown[] }[];
    }
    const g = globalThis as unknown as { axe: { run(context: unknown, options: unknown): Promise<{ violations: Result[] }> }; document: unknown };
    const results = await g.axe.run(g.document, { resultTypes: ["violations"] });
    return results.violations.map((v) => ({ id: v.id, impact: (v.impact ?? "minor") as AxeImpact, help: v.help, targets: v.nodes.slice(0, 5).map((n) => n.target.map(String).join(" ")) }));
  });
}

/** How wide the document is against the viewport: it scrolls sideways when scrollWidth > innerWidth. */
export async function pageWidth(page: Page): Promise<{ scrollWidth: number; innerWidth: number }> {
  return await page.evaluate(() => {
    const g = globalThis as unknown as { document: { documentElement: { scrollWidth: number } }; innerWidth: number };
    return { scrollWidth: g.document.documentElement.scrollWidth, innerWidth: g.innerWidth };
  });
}

/** The elements wider than the viewport (what makes a page scroll sideways), to name in a failure. */
export async function overflowingElements(page: Page): Promise<string[]> {
  return await page.evaluate(() => {
    interface El {
      tagName: string;
      className: unknown;
      getBoundingClientRect(): { right: number };
    }
    const g = globalThis as unknown as { document: { querySelectorAll(s: string): Iterable<El> }; innerWidth: number };
    const out: string[] = [];
    for (const el of g.document.querySelectorAll("body *")) {
      const right = el.getBoundingClientRect().right;
      if (right > g.innerWidth + 0.5) out.push(`${el.tagName.toLowerCase()}${typeof el.className === "string" && el.className ? `.${el.className.split(" ").join(".")}` : ""} (right edge ${Math.round(right)})`);
    }
    return out.slice(0, 8);
  });
}
