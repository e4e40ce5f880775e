import { Hono } from "hono";
import { z } from "zod";
import { markAwbsUsed } from "./awb.ts";
import { applyBehaviour, BehaviourPatchSchema } from "./behaviour.ts";
import { MAX_AHEAD_MS } from "./clock.ts";
import type { Hangs } from "./hang.ts";
import { orderView } from "./lifecycle.ts";
import { failure, issuesToErrors, readBody } from "./respond.ts";
import { resetState } from "./state.ts";
import type { EmulatorContext, EmulatorEnv } from "./types.ts";

/**
 * Control endpoints under /__emulator/ (no auth): what tests and developers use to look
 * inside the emulator and steer it. Errors are `{message, errors}` like the provider's.
 */

const UrlList = z.object({ urls: z.array(z.url()) });
const OneUrl = z.object({ url: z.url() });
/** Beyond it a time could leave Date's range (clock.ts): refused naming the field. */
const AHEAD_LIMIT = "at most 100 years ahead";
const Reattempt = z.object({
  /** Seconds from the emulator's now; default 86400 (the next day). */
  in_seconds: z.number().nonnegative().max(MAX_AHEAD_MS / 1000, AHEAD_LIMIT).optional(),
  /** Absolute time instead (ISO-8601; four-digit years, so always a valid time). */
  at: z.iso.datetime({ offset: true }).optional(),
});
const Advance = z
  .object({
    seconds: z.number().nonnegative().max(MAX_AHEAD_MS / 1000, AHEAD_LIMIT).optional(),
    ms: z.number().nonnegative().max(MAX_AHEAD_MS, AHEAD_LIMIT).optional(),
  })
  .refine((v) => v.seconds !== undefined || v.ms !== undefined, { message: "give seconds or ms" });
const AwbUsed = z.object({ awb_numbers: z.array(z.string().min(1)).min(1) });
const Reset = z.object({ seed: z.number().int().optional() });

/** What `GET /__emulator` (and `/__emulator/`, the address `npm run emulator` prints) answers: the emulator at a glance. */
export function controlOverview(ctx: EmulatorContext) {
  return {
    now: ctx.clock.iso(),
    offset_ms: ctx.clock.offsetMs(),
    env: ctx.options.env,
    product: ctx.options.product,
    orders: ctx.state.orders.size,
    callback_urls: ctx.state.callbackUrls,
    behaviour: ctx.behaviour,
  };
}

export function createControlApp(ctx: EmulatorContext, hangs: Hangs): Hono<EmulatorEnv> {
  const { state, clock, callbacks, faults } = ctx;
  const control = new Hono<EmulatorEnv>();

  control.get("/", (c) => c.json(controlOverview(ctx)));

  // ------------------------------------------------------------ behaviour switches (behaviour.ts)
  control.get("/behaviour", (c) => c.json(ctx.behaviour));
  control.put("/behaviour", async (c) => {
    const p = await readBody(c, BehaviourPatchSchema);
    if (!p.ok) return p.response;
    // In place: every route module holds this same object.
    Object.assign(ctx.behaviour, applyBehaviour(ctx.behaviour, p.data));
    return c.json(ctx.behaviour);
  });

  // ------------------------------------------------------------ callback URLs and deliveries
  control.get("/callback-urls", (c) => c.json({ urls: state.callbackUrls }));
  control.put("/callback-urls", async (c) => {
    const p = await readBody(c, UrlList);
    if (!p.ok) return p.response;
    state.callbackUrls = [...new Set(p.data.urls)];
    return c.json({ urls: state.callbackUrls });
  });
  control.post("/callback-urls", async (c) => {
    const p = await readBody(c, OneUrl);
    if (!p.ok) return p.response;
    if (!state.callbackUrls.includes(p.data.url)) state.callbackUrls.push(p.data.url);
    return c.json({ urls: state.callbackUrls });
  });
  control.delete("/callback-urls", (c) => {
    state.callbackUrls = [];
    return c.json({ urls: [] });
  });
  control.get("/callbacks", (c) =>
    c.json({ pending: callbacks.pending(), held: callbacks.held(), deliveries: callbacks.deliveries() }),
  );
  control.post("/callbacks/flush", (c) => c.json({ released: callbacks.releaseHeld() }));

  // ------------------------------------------------------------ orders
  control.get("/orders", (c) => {
    const coid = c.req.query("client_order_id");
    const store = c.req.query("store_code");
    const items = [...state.orders.values()]
      .filter((o) => (coid === undefined || o.clientOrderId === coid) && (store === undefined || o.storeCode === store))
      .map((o) => orderView(ctx, o));
    return c.json({ items });
  });
  control.get("/orders/:svc_order_id", (c) => {
    const order = state.orders.get(c.req.param("svc_order_id"));
    return order ? c.json(orderView(ctx, order)) : c.json({ detail: "Order not found." }, 404);
  });
  control.post("/orders/:svc_order_id/reattempt", async (c) => {
    const order = state.orders.get(c.req.param("svc_order_id"));
    if (!order) return c.json({ detail: "Order not found." }, 404);
    const p = await readBody(c, Reattempt, { emptyAsObject: true });
    if (!p.ok) return p.response;
    const scheduledAt = p.data.at ? Date.parse(p.data.at) : clock.now() + (p.data.in_seconds ?? 86_400) * 1000;
    order.reattempt = { scheduledAt, enabled: true };
    order.updatedAt = clock.now();
    return c.json(orderView(ctx, order));
  });

  // ------------------------------------------------------------ clock, AWBs, logs
  control.get("/clock", (c) => c.json({ now: clock.iso(), offset_ms: clock.offsetMs() }));
  control.post("/clock/advance", async (c) => {
    const p = await readBody(c, Advance);
    if (!p.ok) return p.response;
    try {
      clock.advance((p.data.seconds ?? 0) * 1000 + (p.data.ms ?? 0));
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      // Past the clock's limit: named on the fields that asked for it.
      const why = `would move the clock more than 100 years ahead of real time (offset now ${clock.offsetMs()} ms)`;
      const fields = (["seconds", "ms"] as const).filter((f) => p.data[f] !== undefined);
      return failure(c, Object.fromEntries(fields.map((f) => [f, [why]])));
    }
    return c.json({ now: clock.iso(), offset_ms: clock.offsetMs() });
  });
  control.get("/awb", (c) =>
    c.json({
      pools: Object.fromEntries([...state.awbPools].map(([id, p]) => [id, { unused: [...p.unused], used: p.used.size }])),
      requests: [...state.awbRequests.values()].map((r) => ({
        request_id: r.requestId,
        principal: r.principalId,
        count: r.count,
        request_type: r.requestType,
        delay_time: r.delaySeconds,
        ready_at: clock.iso(r.readyAt),
        minted: r.numbers !== null,
      })),
    }),
  );
  control.post("/awb/used", async (c) => {
    const p = await readBody(c, AwbUsed);
    if (!p.ok) return p.response;
    return c.json(markAwbsUsed(state, p.data.awb_numbers));
  });
  control.get("/requests", (c) => c.json({ items: state.requestLog }));

  // ------------------------------------------------------------ faults and reset
  control.get("/faults", (c) => c.json({ rules: faults.list() }));
  control.post("/faults", async (c) => {
    const body: unknown = await c.req.json().catch(() => undefined);
    const added = faults.add(body);
    if (!added.ok) return c.json({ message: "Failure", errors: issuesToErrors(added.issues) }, 400);
    return c.json(added.rule, 201);
  });
  control.delete("/faults", (c) => {
    faults.clear();
    return c.json({ rules: [] });
  });
  control.post("/reset", async (c) => {
    const p = await readBody(c, Reset, { emptyAsObject: true });
    if (!p.ok) return p.response;
    resetEmulator(ctx, hangs, p.data.seed);
    return c.json({ ok: true, now: clock.iso() });
  });

  return control;
}

/**
 * Back to a fresh start: see resetState for what survives (callback URLs, id counters).
 * Behaviour goes back to the start options, not to the defaults.
 */
export function resetEmulator(ctx: EmulatorContext, hangs: Hangs, seed?: number): void {
  hangs.releaseAll();
  Object.assign(ctx.behaviour, ctx.options.behaviour);
  resetState(ctx.state);
  ctx.callbacks.reset();
  ctx.faults.clear();
  ctx.faults.reseed(seed ?? ctx.options.seed);
  ctx.clock.reset();
}
