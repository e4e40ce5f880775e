/**
 * The load generator, in its own process (forked by bench/run.ts) so that it never shares
 * an event loop with the server it measures. Sends the scenario's callbacks with
 * autocannon over `connections` keep-alive connections, either for `durationS` seconds
 * or exactly `amount` requests, and reports autocannon's summary plus, when `record` is
 * set, every acknowledgement (event id, whether a duplicate, when it arrived).
 */
import autocannon from "autocannon";
import { RequestSequence, scenarioEvent } from "./lib/scenario.ts";
import type { Scenario } from "./lib/scenario.ts";

export interface LoadConfig {
  url: string;
  /** Prepended to every event's path, e.g. `/callbacks/<secret>`. */
  pathPrefix: string;
  connections: number;
  durationS?: number;
  amount?: number;
  scenario: Scenario;
  /** Keep each acknowledgement (for projection lag and the loss check). */
  record: boolean;
}

export interface Ack {
  u: number;
  eventId: string;
  duplicate: boolean;
  /** Epoch milliseconds (sub-millisecond precision) when the 200 arrived. */
  at: number;
}

export interface LoadResult {
  requests: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statuses: Record<string, number>;
  /** Wall time from the first request to the last response (s). */
  elapsedS: number;
  /** Epoch ms of the first request and of the last response. */
  startedAt: number;
  endedAt: number;
  latency: { p50: number; p90: number; p99: number; max: number; mean: number };
  acks: Ack[];
  /** CPU seconds the load generator itself used. */
  cpuS: number;
}

const now = () => performance.timeOrigin + performance.now();

function runLoad(config: LoadConfig): Promise<LoadResult> {
  let sequence = new RequestSequence(config.scenario);
  const acks: Ack[] = [];
  const statuses: Record<string, number> = {};
  let lastResponse = 0;
  const startedAt = now();
  return new Promise((resolve, reject) => {
    autocannon(
      {
        url: config.url,
        connections: config.connections,
        pipelining: 1,
        timeout: 30,
        ...(config.amount !== undefined ? { amount: config.amount } : { duration: config.durationS ?? 10 }),
        requests: [
          {
            method: "POST",
            setupRequest(req, context) {
              let next = sequence.next();
              if (next === null) {
                // Duration mode outlived the scenario: start over (bodies repeat; only the
                // echo baseline runs this long).
                sequence = new RequestSequence(config.scenario);
                next = sequence.next()!;
              }
              const event = scenarioEvent(config.scenario, next.u);
              context["u"] = next.u;
              return {
                ...req,
                path: `${config.pathPrefix}${event.path}`,
                headers: { "content-type": "application/json" },
                body: JSON.stringify(event.body),
              };
            },
            onResponse(status, body, context) {
              const at = now();
              lastResponse = at;
              statuses[status] = (statuses[status] ?? 0) + 1;
              if (!config.record || status !== 200) return;
              const parsed = JSON.parse(body) as { event_id: string; duplicate: boolean };
              acks.push({ u: context["u"] as number, eventId: parsed.event_id, duplicate: parsed.duplicate, at });
            },
          },
        ],
      },
      (err, result) => {
        if (err) return reject(err);
        resolve({
          requests: result.requests.sent,
          ok: result["2xx"],
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          statuses,
          elapsedS: ((lastResponse || now()) - startedAt) / 1000,
          startedAt,
          endedAt: lastResponse,
          latency: {
            p50: result.latency.p50,
            p90: result.latency.p90,
            p99: result.latency.p99,
            max: result.latency.max,
            mean: result.latency.mean,
          },
          acks,
          cpuS: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
        });
      },
    );
  });
}

const config = JSON.parse(process.argv[2] ?? "{}") as LoadConfig;
runLoad(config).then(
  (result) => process.send!(result, () => process.exit(0)),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
