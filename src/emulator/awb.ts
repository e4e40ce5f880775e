import { randomUUID } from "node:crypto";
import { FreshAwbBodySchema, PoolAwbBodySchema } from "../provider/schemas.ts";
import { notFound, readBody } from "./respond.ts";
import type { AwbPool, AwbRequest, EmulatorState } from "./state.ts";
import type { EmulatorApp, EmulatorContext } from "./types.ts";

/**
 * AWB endpoints (provider-api.md §4.3) on {gateway_url}.
 *
 * Pool replenishment returns the caller's issued-but-unused numbers first (the same numbers
 * again, until marked used through the control API) and mints only the remainder. Fresh
 * requests always mint new numbers, asynchronously: ready `delay_time` seconds later on
 * the emulator clock. Fresh numbers do not join the pool's unused set.
 */

function mintAwb(state: EmulatorState, suffix: string): string {
  return `SF${state.ids.awbDigits()}${suffix}`;
}

function poolOf(state: EmulatorState, principalId: string): AwbPool {
  let pool = state.awbPools.get(principalId);
  if (!pool) {
    pool = { unused: new Set(), used: new Set() };
    state.awbPools.set(principalId, pool);
  }
  return pool;
}

/** Marks numbers used (whoever holds them); returns those the emulator never issued by pool. */
export function markAwbsUsed(state: EmulatorState, numbers: string[]): { marked: number; unknown: string[] } {
  let marked = 0;
  const unknown: string[] = [];
  for (const n of numbers) {
    const pool = [...state.awbPools.values()].find((p) => p.unused.has(n) || p.used.has(n));
    if (!pool) {
      unknown.push(n);
      continue;
    }
    if (pool.unused.delete(n)) marked += 1;
    pool.used.add(n);
  }
  return { marked, unknown };
}

function pendingRequests(state: EmulatorState, now: number): number {
  let n = 0;
  for (const r of state.awbRequests.values()) if (r.readyAt > now) n += 1;
  return n;
}

export function registerAwbRoutes(app: EmulatorApp, ctx: EmulatorContext): void {
  const { paths, state, clock, requireAuth } = ctx;
  const awb = ctx.options.awb;

  app.post(paths.awbPool, requireAuth, async (c) => {
    const parsed = await readBody(c, PoolAwbBodySchema, { emptyAsObject: true });
    if (!parsed.ok) return parsed.response;
    const pool = poolOf(state, c.get("principal").id);
    const numbers: string[] = [];
    for (const n of pool.unused) {
      if (numbers.length >= parsed.data.count) break;
      numbers.push(n);
    }
    const reused = numbers.length;
    while (numbers.length < parsed.data.count) {
      const n = mintAwb(state, awb.suffix);
      pool.unused.add(n);
      numbers.push(n);
    }
    return c.json({ message: `${numbers.length} AWBs generated (${reused} from unused pool)`, awb_numbers: numbers });
  });

  app.post(paths.awbFresh, requireAuth, async (c) => {
    const parsed = await readBody(c, FreshAwbBodySchema, { emptyAsObject: true });
    if (!parsed.ok) return parsed.response;
    const now = clock.now();
    // Grows with the batch size and with the queue of requests still generating.
    const delaySeconds =
      awb.baseDelaySeconds +
      awb.secondsPerThousand * Math.ceil(parsed.data.awb_count / 1000) +
      awb.secondsPerPendingRequest * pendingRequests(state, now);
    const request: AwbRequest = {
      requestId: randomUUID(),
      principalId: c.get("principal").id,
      count: parsed.data.awb_count,
      requestType: parsed.data.request_type,
      createdAt: now,
      readyAt: now + delaySeconds * 1000,
      delaySeconds,
      numbers: null,
    };
    state.awbRequests.set(request.requestId, request);
    return c.json({
      status: "PENDING",
      request_id: request.requestId,
      message: "AWB generation request accepted",
      delay_time: delaySeconds,
    });
  });

  app.get(paths.awbFreshPoll, requireAuth, (c) => {
    const request = state.awbRequests.get(c.req.param("request_id") ?? "");
    if (!request || request.principalId !== c.get("principal").id) return notFound(c, "AWB request not found.");
    const now = clock.now();
    if (now < request.readyAt) {
      return c.json({
        status: "PENDING",
        retry_flag: true,
        awb_numbers: [],
        delay_time: Math.ceil((request.readyAt - now) / 1000),
      });
    }
    if (request.numbers === null) {
      request.numbers = Array.from({ length: request.count }, () => mintAwb(state, awb.suffix));
      // Minted on a GET: the request middleware only saves after writes.
      ctx.stateChanged();
    }
    return c.json({ status: "SUCCESS", retry_flag: false, awb_numbers: request.numbers });
  });
}
