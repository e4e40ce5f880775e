/**
 * A webhook receiver on loopback (127.0.0.1 only) for the notification tests: it records
 * every request (headers and raw body), counts TCP connections, and answers as told: a
 * queue of answers (a status code, a delayed answer, or "hang": never answer), then the
 * default. `verify` checks a received request with the `standardwebhooks` package, the
 * specification's reference implementation.
 */
import { createServer } from "node:http";
import type { IncomingHttpHeaders, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** When the request's body had arrived (ms since the epoch). */
  at: number;
}

/** A status code; or an answer after `delayMs`; or "hang": keep the request open, never answer. */
export type Answer = number | { status: number; delayMs?: number; body?: string } | "hang";

export interface ReceiverOptions {
  /** The answer once `answers` is used up (200 "thanks" unless given). */
  otherwise?: () => Answer;
}

export interface Receiver {
  url: string;
  received: Received[];
  /** What the next answers are, in order; `otherwise` once they are used up. */
  answers: Answer[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** Requests received and not answered yet. */
  readonly holding: number;
  /** Those requests. */
  held(): Received[];
  /** Resolves once `count` requests were received; rejects after `ms`. */
  waitFor(count: number, ms?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(options: ReceiverOptions = {}): Promise<Receiver> {
  const received: Received[] = [];
  const answers: Answer[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let connections = 0;
  const pending = new Set<Received>();

  const reply = (res: ServerResponse, request: Received, status: number, body = "thanks") => {
    pending.delete(request);
    if (!res.destroyed) res.writeHead(status, { "content-type": "text/plain" }).end(body);
  };

  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString("utf8")));
    req.on("end", () => {
      const request = { headers: req.headers, body, at: Date.now() };
      received.push(request);
      pending.add(request);
      const answer = answers.shift() ?? options.otherwise?.() ?? 200;
      if (answer === "hang") return;
      if (typeof answer === "number") return reply(res, request, answer);
      if (!answer.delayMs) return reply(res, request, answer.status, answer.body);
      const timer = setTimeout(() => {
        timers.delete(timer);
        reply(res, request, answer.status, answer.body);
      }, answer.delayMs);
      timers.add(timer);
    });
  });
  server.on("connection", () => connections++);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}/hooks`,
    received,
    answers,
    get connections() {
      return connections;
    },
    get holding() {
      return pending.size;
    },
    held: () => [...pending],
    async waitFor(count, ms = 10_000) {
      const deadline = Date.now() + ms;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} requests at the receiver, got ${received.length}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return received;
    },
    close() {
      for (const timer of timers) clearTimeout(timer);
      return new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}

/** A message's body as the notification tests read it. */
export interface Message {
  type: string;
  timestamp: string;
  data: {
    sequence?: number;
    previous_status?: string | null;
    previous_state?: string | null;
    order?: { client_order_id: string | null; svc_order_id?: string | null; status: string | null; placement?: { state: string; error: string | null }; rider?: { id?: string | null; name: string | null } | null };
    command?: { id: string; kind: string; state: string; last_error: string | null };
    pool?: { available: number; low_watermark: number };
  };
}

/** The received request verified with `secret` by standardwebhooks (throws when it does not verify). */
export function verify(secret: string, r: Received): Message {
  const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, String(v)]));
  return new Webhook(secret).verify(r.body, headers) as Message;
}
