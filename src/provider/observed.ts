/**
 * The provider client with every call counted and timed for /metrics
 * (tracklane_provider_requests_total, tracklane_provider_request_duration_seconds). A
 * provider that is down, answers 5xx or is slow shows there at once: order commands retry
 * for up to hours before one ends failed, AWB top-ups and status polls retry quietly, and
 * none of them fails a job, so neither the job counters nor the commands' outcomes would
 * say so until long after it started. Each OAuth token exchange is counted too, as
 * operation `token`: a command asks for its token before its call (authorize), so an
 * exchange that fails is the only request it makes, and an early renewal that fails is
 * otherwise only a warning.
 */
import type { Metrics } from "../metrics.ts";
import type { ProviderClient } from "./client.ts";
import { ProviderError } from "./errors.ts";

/**
 * The client's methods that call the provider: the `operation` label takes these names
 * only, so its values are bounded (never a path, which carries an order's id). `authorize`
 * is left out: it calls the provider only when an OAuth token is due, and that exchange is
 * counted as `token`, whichever method needed it (a call's time includes it too).
 */
const OBSERVED_OPERATIONS = [
  "placeOrder",
  "editOrder",
  "cancelOrder",
  "dispatchReady",
  "stopReattempt",
  "orderStatus",
  "allot",
  "riderArrival",
  "collect",
  "doorstepArrival",
  "deliver",
  "customerReturn",
  "sellerReturn",
  "riderLocation",
  "sandbox",
  "generatePoolAwbs",
  "requestFreshAwbs",
  "pollFreshAwbs",
  "exchangeToken",
] as const satisfies readonly (keyof ProviderClient)[];

type Operation = (typeof OBSERVED_OPERATIONS)[number];
const OBSERVED: ReadonlySet<string> = new Set(OBSERVED_OPERATIONS);

/** `ok`, or the ProviderError's kind; anything else thrown (a bug) is `error`. */
function outcomeOf(err: unknown): string {
  return err instanceof ProviderError ? err.kind : "error";
}

export function observedProvider(client: ProviderClient, metrics: Pick<Metrics, "providerRequests" | "providerDuration">): ProviderClient {
  const timed = (operation: Operation, run: () => Promise<unknown>) => async () => {
    const started = performance.now();
    const done = (outcome: string) => {
      metrics.providerRequests.inc({ operation, outcome });
      metrics.providerDuration.observe({ operation }, (performance.now() - started) / 1000);
    };
    try {
      const result = await run();
      done("ok");
      return result;
    } catch (err) {
      done(outcomeOf(err));
      throw err;
    }
  };
  client.observeTokenExchanges(({ seconds, error }) => {
    metrics.providerRequests.inc({ operation: "token", outcome: error === undefined ? "ok" : outcomeOf(error) });
    metrics.providerDuration.observe({ operation: "token" }, seconds);
  });
  return new Proxy(client, {
    get(target, name, receiver) {
      const value: unknown = Reflect.get(target, name, receiver);
      if (typeof name !== "string" || !OBSERVED.has(name) || typeof value !== "function") return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      return (...args: unknown[]) => timed(name as Operation, () => method.apply(target, args))();
    },
  });
}
