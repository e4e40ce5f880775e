import { Hono } from "hono";
import { resolvePaths } from "../provider/paths.ts";
import { PRODUCT_AUTH } from "../provider/products.ts";
import { createRequireAuth, registerOAuthRoutes } from "./auth.ts";
import { registerAwbRoutes } from "./awb.ts";
import { resolveBehaviour, sameBehaviour } from "./behaviour.ts";
import type { Behaviour } from "./behaviour.ts";
import { createCallbackDispatcher } from "./callbacks.ts";
import type { CallbackDispatcher } from "./callbacks.ts";
import { createClock } from "./clock.ts";
import type { Clock } from "./clock.ts";
import { controlOverview, createControlApp, resetEmulator } from "./control.ts";
import { createFaults } from "./faults.ts";
import type { Faults } from "./faults.ts";
import { createHangs } from "./hang.ts";
import { CONTROL_PREFIX, injectFaults, requestLog } from "./middleware.ts";
import { registerOrderRoutes } from "./orders.ts";
import { createSaver, emulatorStateFile, loadSavedState } from "./persist.ts";
import type { Saver } from "./persist.ts";
import { registerSandboxRoutes } from "./sandbox.ts";
import { createState, serialiseState } from "./state.ts";
import { registerStatusRoutes } from "./status.ts";
import type { EmulatorState } from "./state.ts";
import type { EmulatorApp, EmulatorContext, EmulatorOptions, ResolvedOptions } from "./types.ts";

export interface Emulator {
  /** The Hono app: provider endpoints, `/__emulator/*` control endpoints, `/track/:id`. */
  app: EmulatorApp;
  state: EmulatorState;
  clock: Clock;
  callbacks: CallbackDispatcher;
  faults: Faults;
  options: ResolvedOptions;
  /** The switches now in force (same object as GET /__emulator/behaviour shows). */
  behaviour: Behaviour;
  /** Where the state is kept (options.dataDir); undefined: in memory only. */
  stateFile: string | undefined;
  /** Same as POST /__emulator/reset. */
  reset(seed?: number): void;
  /** After changing `state` directly (e.g. callbackUrls): saves it soon. No-op in memory. */
  stateChanged(): void;
  /** Stops callback delivery, releases hanging requests and writes the state if it changed. */
  close(): void;
}

function resolveOptions(options: EmulatorOptions): ResolvedOptions {
  const product = options.product ?? "hyperlocal_dedicated_store";
  const suffix = options.awb?.suffix ?? "TST";
  if (!/^[A-Z]{3}$/.test(suffix)) throw new Error("awb.suffix must be three capital letters");
  return {
    tokens: options.tokens ?? [],
    clients: options.clients ?? [],
    product,
    env: options.env ?? "staging",
    oauth: {
      lifetimeSeconds: options.oauth?.lifetimeSeconds ?? PRODUCT_AUTH[product].oauthLifetimeSeconds,
      omitExpiresIn: options.oauth?.omitExpiresIn ?? false,
    },
    awb: {
      baseDelaySeconds: options.awb?.baseDelaySeconds ?? 2,
      secondsPerThousand: options.awb?.secondsPerThousand ?? 1,
      secondsPerPendingRequest: options.awb?.secondsPerPendingRequest ?? 2,
      suffix,
    },
    callbacks: {
      timeoutMs: options.callbacks?.timeoutMs ?? 5000,
      retryDelaysMs: options.callbacks?.retryDelaysMs ?? [500, 2000, 10_000],
      reorderHoldMs: options.callbacks?.reorderHoldMs ?? 2000,
    },
    seed: options.seed ?? 1,
    maxHangMs: options.maxHangMs ?? 120_000,
    behaviour: Object.freeze(resolveBehaviour(options.behaviour)),
  };
}

/** A stateful stand-in for the provider (PRODUCT.md §9) as a Hono app; serve it with startEmulator. */
export function createEmulator(options: EmulatorOptions = {}): Emulator {
  const resolved = resolveOptions(options);
  const logger = options.logger?.child({ component: "emulator" });
  const clock = createClock();
  const stateFile = options.dataDir === undefined ? undefined : emulatorStateFile(options.dataDir);
  const restored = stateFile === undefined ? undefined : loadSavedState(stateFile, { reset: options.resetSavedState, logger });
  const state = restored?.state ?? createState(options.callbackUrls);
  if (restored) clock.advance(restored.extras.clockOffsetMs);
  const faults = createFaults(resolved.seed);
  // Read when a delivery fails, long after ctx exists.
  const callbacks = createCallbackDispatcher(state, clock, faults, resolved.callbacks, logger, () => ctx.behaviour.callback_retries);
  const hangs = createHangs(resolved.maxHangMs);
  const ctx: EmulatorContext = {
    options: resolved,
    state,
    clock,
    paths: resolvePaths(options.paths),
    callbacks,
    faults,
    behaviour: { ...resolved.behaviour },
    requireAuth: createRequireAuth(resolved, state, clock),
    stateChanged: () => saver?.changed(),
  };
  if (restored) {
    // Switches changed at run time come back, unless the start options changed meanwhile
    // (e.g. EMULATOR_REALISTIC flipped): then what the operator asked for now wins.
    if (sameBehaviour(restored.extras.startBehaviour, resolved.behaviour)) Object.assign(ctx.behaviour, restored.extras.behaviour);
    else logger?.info({ saved: restored.extras.behaviour, now: resolved.behaviour }, "start behaviour changed since the state was saved; using the new one");
    logger?.info({ file: stateFile, orders: state.orders.size }, "emulator state restored");
  }
  const saver: Saver | undefined =
    stateFile === undefined
      ? undefined
      : createSaver(
          stateFile,
          () => serialiseState(state, { behaviour: ctx.behaviour, startBehaviour: resolved.behaviour, clockOffsetMs: clock.offsetMs() }),
          // Ids are reserved on disk ahead of use (persist.ts): an answer outruns the snapshot.
          { logger, ids: state.ids },
        );

  const app: EmulatorApp = new Hono();
  if (saver) {
    // Every state change but AWB minting on a poll (awb.ts) comes from a POST, PUT or DELETE
    // (provider or control endpoint); a refused one costs a needless write at most.
    app.use("*", async (c, next) => {
      try {
        await next();
      } finally {
        if (c.req.method !== "GET" && c.req.method !== "HEAD") saver.changed();
      }
    });
  }
  app.use("*", requestLog(state, clock, logger));
  app.use("*", injectFaults(faults, hangs));
  app.route(CONTROL_PREFIX, createControlApp(ctx, hangs));
  // Mounted at the prefix, the overview answers "/__emulator" only.
  app.get(`${CONTROL_PREFIX}/`, (c) => c.json(controlOverview(ctx)));
  registerOAuthRoutes(app, ctx);
  registerOrderRoutes(app, ctx);
  registerStatusRoutes(app, ctx);
  registerSandboxRoutes(app, ctx);
  registerAwbRoutes(app, ctx);
  app.get("/track/:svc_order_id", (c) => {
    const order = state.orders.get(c.req.param("svc_order_id"));
    if (!order) return c.json({ detail: "Not found." }, 404);
    return c.json({ svc_order_id: order.svcOrderId, status: order.status, rider: order.rider, location: order.lastLocation });
  });
  app.notFound((c) => c.json({ detail: "Not found." }, 404));
  app.onError((err, c) => {
    logger?.error({ err, method: c.req.method, path: c.req.path }, "emulator error");
    return c.json({ detail: "Internal server error." }, 500);
  });

  return {
    app,
    state,
    clock,
    callbacks,
    faults,
    options: resolved,
    behaviour: ctx.behaviour,
    stateFile,
    reset(seed) {
      resetEmulator(ctx, hangs, seed);
      ctx.stateChanged();
    },
    stateChanged: ctx.stateChanged,
    close() {
      callbacks.close();
      hangs.releaseAll();
      saver?.close();
    },
  };
}
