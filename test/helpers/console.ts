/** The console over plain HTTP (no browser): signing in through its form. */
import assert from "node:assert/strict";
import { API_TOKEN } from "./app.ts";

/**
 * Signs in through the form at `base` and opens `next` (the sign-in's redirect target);
 * the session cookie ("name=value") and the CSRF token of its pages.
 */
export async function consoleSignIn(base: string, next = "/"): Promise<{ cookie: string; csrf: string }> {
  const res = await fetch(`${base}/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", origin: base },
    body: new URLSearchParams({ token: API_TOKEN, next }),
  });
  assert.equal(res.status, 303);
  const cookie = res.headers.get("set-cookie")!.split(";")[0]!;
  const page = await (await fetch(`${base}${next}`, { headers: { cookie } })).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
  assert.ok(csrf, "signed in: the page carries a CSRF token");
  return { cookie, csrf };
}
