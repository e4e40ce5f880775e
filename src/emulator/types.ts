import type { IncomingMessage, ServerResponse } from "node:http";
import type { Hono, MiddlewareHandler } from "hono";
import type { Logger } from "../logger.ts";
import type { Paths } from "../provider/paths.ts";
import type { Product } from "../provider/products.ts";
import type { Behaviour, BehaviourInput } from "./behaviour.ts";
import type { CallbackDispatcher } from "./callbacks.ts";
import type { Clock } from "./clock.ts";
import type { Faults } from "./faults.ts";
import type { EmulatorState, Principal } from "./state.ts";

export interface EmulatorOptions {
  /** Accepted static tokens (`Authorization: Token <t>`). */
  tokens?: string[];
  /** Accepted OAuth2 client credentials. */
  clients?: { clientId: string; clientSecret: string }[];
  /** Drives the auth matrix and OAuth token lifetime (products.ts). Default hyperlocal_dedicated_store. */
  product?: Product;
  /** Sandbox endpoints exist in staging only. Default staging. */
  env?: "staging" | "production";
  callbackUrls?: string[];
  oauth?: {
    /** Overrides the product's lifetime. */
    lifetimeSeconds?: number;
    /** Answer without `expires_in`, so the client must fall back to the product default. */
    omitExpiresIn?: boolean;
  };
  awb?: {
    /** Fresh-request delay_time = baseDelaySeconds + secondsPerThousand * ceil(count/1000) + secondsPerPendingRequest * pending requests. */
    baseDelaySeconds?: number;
    secondsPerThousand?: number;
    secondsPerPendingRequest?: number;
    /** The 3-letter client suffix of AWB numbers. Default "TST". */
    suffix?: string;
  };
  callbacks?: {
    /** Per delivery attempt. Default 5000. */
    timeoutMs?: number;
    /** Delays before re-sending a callback that got no 2xx; its length is the retry count. Default [500, 2000, 10000]. */
    retryDelaysMs?: number[];
    /** A held-back ("reorder") callback is released by the next one or after this long. Default 2000. */
    reorderHoldMs?: number;
  };
  /** Seed of the fault-injection RNG. Default 1. */
  seed?: number;
  /** A hanging fault (timeout_before/after) destroys the socket after this long if the client has not given up. Default 120000. */
  maxHangMs?: number;
  logger?: Logger;
  /**
   * Spec ("strict", the default) or real-provider behaviour (behaviour.ts); `realistic: true`
   * is the preset, fields beside it win. Also at GET/PUT /__emulator/behaviour.
   */
  behaviour?: BehaviourInput;
  /**
   * Keep the state in `<dataDir>/emulator/state.json` (persist.ts): loaded at start, saved
   * shortly after each change and on close. Unset: in memory only (tests).
   */
  dataDir?: string;
  /** With dataDir: forget the saved state and start empty (`npm run emulator -- --reset`). */
  resetSavedState?: boolean;
  /** Paths served instead of the defaults (EMULATOR_PATHS, or tracklane's PROVIDER_PATHS for the built-in emulator). */
  paths?: Partial<Paths>;
}

export interface ResolvedOptions {
  tokens: string[];
  clients: { clientId: string; clientSecret: string }[];
  product: Product;
  env: "staging" | "production";
  oauth: { lifetimeSeconds: number; omitExpiresIn: boolean };
  awb: { baseDelaySeconds: number; secondsPerThousand: number; secondsPerPendingRequest: number; suffix: string };
  callbacks: { timeoutMs: number; retryDelaysMs: number[]; reorderHoldMs: number };
  seed: number;
  maxHangMs: number;
  /** The start values, which a reset goes back to. */
  behaviour: Readonly<Behaviour>;
}

/** Node bindings from @hono/node-server; absent under `app.request()`. */
export interface NodeBindings {
  incoming?: IncomingMessage;
  outgoing?: ServerResponse;
}

export interface EmulatorEnv {
  Bindings: NodeBindings;
  Variables: { principal: Principal; fault: string | undefined };
}

export type EmulatorApp = Hono<EmulatorEnv>;
export type EmulatorMiddleware = MiddlewareHandler<EmulatorEnv>;

/** What every route module gets. */
export interface EmulatorContext {
  options: ResolvedOptions;
  state: EmulatorState;
  clock: Clock;
  paths: Paths;
  callbacks: CallbackDispatcher;
  faults: Faults;
  /** The switches now in force: changed in place by PUT /__emulator/behaviour and reset. */
  behaviour: Behaviour;
  requireAuth: EmulatorMiddleware;
  /**
   * For a change to saved state that no POST/PUT/DELETE made (those are noticed by a
   * middleware), e.g. AWB numbers minted on a poll. No-op without a data dir.
   */
  stateChanged(): void;
}
