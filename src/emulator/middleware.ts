import type { Faults } from "./faults.ts";
import { dropConnection, sleep } from "./hang.ts";
import type { Hangs } from "./hang.ts";
import { appendRequestLog } from "./state.ts";
import type { EmulatorState } from "./state.ts";
import type { Clock } from "./clock.ts";
import type { Logger } from "../logger.ts";
import type { EmulatorMiddleware } from "./types.ts";

export const CONTROL_PREFIX = "/__emulator";

function isProviderPath(path: string): boolean {
  return !(path === CONTROL_PREFIX || path.startsWith(`${CONTROL_PREFIX}/`) || path.startsWith("/track/"));
}

/** Faults after which no answer reaches the client: logged with status null. */
const UNANSWERED: ReadonlySet<string> = new Set(["timeout_before", "timeout_after", "close_before", "close_after"]);

/** Logs every provider request (method, path, status, time); control calls are not logged. */
export function requestLog(state: EmulatorState, clock: Clock, logger: Logger | undefined): EmulatorMiddleware {
  return async (c, next) => {
    if (!isProviderPath(c.req.path)) return next();
    const at = clock.iso();
    const started = performance.now();
    let answered = true;
    try {
      await next();
    } finally {
      const fault = c.get("fault");
      if (fault !== undefined && UNANSWERED.has(fault)) answered = false;
      const entry = {
        method: c.req.method,
        path: c.req.path,
        status: answered ? c.res.status : null,
        at,
        duration_ms: Math.round(performance.now() - started),
        ...(fault ? { fault } : {}),
      };
      appendRequestLog(state, entry);
      logger?.debug(entry, "emulator request");
    }
  };
}

/** Applies the first matching request fault (faults.ts) to provider endpoints. */
export function injectFaults(faults: Faults, hangs: Hangs): EmulatorMiddleware {
  return async (c, next) => {
    if (!isProviderPath(c.req.path)) return next();
    const rule = faults.forRequest(c.req.method, c.req.path);
    if (!rule) return next();
    c.set("fault", rule.action);
    switch (rule.action) {
      case "delay":
        await sleep(rule.delay_ms);
        return next();
      case "timeout_before":
        await hangs.hang(c);
        return c.body(null, 504);
      case "timeout_after":
        await next();
        await hangs.hang(c);
        return;
      case "close_before":
        dropConnection(c);
        // Never written (the socket is gone); Hono needs an answer all the same.
        return c.body(null, 502);
      case "close_after":
        await next();
        dropConnection(c);
        return;
      case "status": {
        if (rule.process) await next();
        const body = rule.body === undefined ? { detail: `injected ${rule.status}` } : rule.body;
        const text = typeof body === "string" ? body : JSON.stringify(body);
        const type = rule.content_type ?? (typeof body === "string" ? "text/plain; charset=utf-8" : "application/json");
        const nullBody = rule.status === 204 || rule.status === 205 || rule.status === 304;
        c.res = new Response(nullBody ? null : text, { status: rule.status, headers: { "content-type": type, ...rule.headers } });
        return;
      }
      case "malformed":
        if (rule.process) await next();
        c.res = new Response('{"message": "Success", "data": {"svc_order_id": <html>Bad Gateway', {
          status: rule.status,
          headers: { "content-type": "application/json" },
        });
        return;
    }
  };
}
