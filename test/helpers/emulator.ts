import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { startEmulator } from "../../src/emulator/server.ts";
import type { RunningEmulator, StartEmulatorOptions } from "../../src/emulator/server.ts";
import { createProviderClient } from "../../src/provider/client.ts";
import type { ProviderClient, ProviderClientOptions } from "../../src/provider/client.ts";
import type { Product } from "../../src/provider/products.ts";
import type { PlaceOrderBody } from "../../src/provider/schemas.ts";
import type { RequestLogEntry } from "../../src/emulator/state.ts";

/**
 * Test support: a real emulator on a random port, a provider client pointed at it, a
 * small callback receiver, and typed access to the control endpoints. Each test creates
 * its own (no shared mutable fixtures across files).
 */

export const TEST_TOKEN = "test-token";
export const TEST_CLIENT = { clientId: "test-client", clientSecret: "test-secret" } as const;

/**
 * Timeouts, in proportion. A loaded CI machine can take hundreds of milliseconds, even
 * seconds, to schedule a loopback round trip, so a call that is answered (and a callback
 * that tracklane answers) is given ANSWERED_TIMEOUT_MS, the pair's default. A case about a
 * timeout uses a client with HANG_TIMEOUT_MS against a hang or delay of HANG_MS (the
 * emulator's maxHangMs here): a timeout that did not fire ends in another outcome long
 * before the test runner's own timeout.
 */
export const ANSWERED_TIMEOUT_MS = 10_000;
export const HANG_TIMEOUT_MS = 1_000;
export const HANG_MS = 15_000;

export interface EmulatorPair extends RunningEmulator {
  client: ProviderClient;
  control: ControlClient;
  /** The client's clock; move it with `advanceClientClock`. */
  clientNow(): number;
  advanceClientClock(ms: number): void;
}

export interface PairOptions {
  /** Which credentials the client uses. Default: token, or oauth for quick_commerce. */
  auth?: "token" | "oauth";
  product?: Product;
  emulator?: StartEmulatorOptions;
  client?: Partial<ProviderClientOptions>;
}

export async function startEmulatorPair(options: PairOptions = {}): Promise<EmulatorPair> {
  const product = options.product ?? options.emulator?.product ?? "hyperlocal_dedicated_store";
  const running = await startEmulator({
    tokens: [TEST_TOKEN],
    clients: [TEST_CLIENT],
    callbacks: { retryDelaysMs: [], timeoutMs: ANSWERED_TIMEOUT_MS },
    awb: { baseDelaySeconds: 2, secondsPerThousand: 1, secondsPerPendingRequest: 2 },
    maxHangMs: HANG_MS,
    ...options.emulator,
    product,
  });
  let offset = 0;
  const clientNow = () => Date.now() + offset;
  const method = options.auth ?? (product === "quick_commerce" ? "oauth" : "token");
  const client = createProviderClient({
    baseUrl: running.url,
    gatewayUrl: running.url,
    auth: method === "token" ? { method: "token", token: TEST_TOKEN } : { method: "oauth", ...TEST_CLIENT, product },
    timeoutMs: ANSWERED_TIMEOUT_MS,
    now: clientNow,
    ...options.client,
  });
  return {
    ...running,
    client,
    control: controlClient(running.url),
    clientNow,
    advanceClientClock(ms) {
      offset += ms;
    },
  };
}

/** A valid place-order body; every call gets a distinct client_order_id unless given. */
let orderCounter = 0;
export function placeOrderBody(overrides: { clientOrderId?: string; storeCode?: string; pickupOtp?: string } = {}): PlaceOrderBody {
  orderCounter += 1;
  return {
    store_code: overrides.storeCode ?? "STORE-1",
    order_details: {
      client_order_id: overrides.clientOrderId ?? `ORD-${process.pid}-${Date.now()}-${orderCounter}`,
      order_value: 250,
      paid: false,
      payment_mode: "COD",
    },
    customer_details: {
      name: "Asha Rao",
      contact_number: "9876543210",
      address_line_1: "12 MG Road",
      address_line_2: "Flat 4",
      city: "Bengaluru",
      latitude: 12.9716,
      longitude: 77.5946,
    },
    product_details: [{ id: "SKU-1", name: "Masala tea", price: 125, quantity: 2 }],
    pickup_contact_number: "9000000000",
    ...(overrides.pickupOtp ? { misc: { pickup_otp: overrides.pickupOtp } } : {}),
  };
}

// ---------------------------------------------------------------- control endpoints

export interface ControlResponse<T = Record<string, unknown>> {
  status: number;
  body: T;
}

export interface ControlClient {
  get<T = Record<string, unknown>>(path: string): Promise<ControlResponse<T>>;
  send<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<ControlResponse<T>>;
  orders(clientOrderId?: string): Promise<Record<string, unknown>[]>;
  order(svcOrderId: string): Promise<Record<string, unknown>>;
  requests(): Promise<RequestLogEntry[]>;
  addFault(rule: Record<string, unknown>): Promise<Record<string, unknown>>;
  advanceClock(seconds: number): Promise<void>;
}

export function controlClient(baseUrl: string): ControlClient {
  async function send<T>(method: string, path: string, body?: unknown): Promise<ControlResponse<T>> {
    const res = await fetch(`${baseUrl}/__emulator${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as T };
  }
  return {
    get: (path) => send("GET", path),
    send,
    async orders(clientOrderId) {
      const q = clientOrderId === undefined ? "" : `?client_order_id=${encodeURIComponent(clientOrderId)}`;
      return (await send<{ items: Record<string, unknown>[] }>("GET", `/orders${q}`)).body.items;
    },
    async order(svcOrderId) {
      const res = await send<Record<string, unknown>>("GET", `/orders/${svcOrderId}`);
      if (res.status !== 200) throw new Error(`order ${svcOrderId}: ${res.status}`);
      return res.body;
    },
    async requests() {
      return (await send<{ items: RequestLogEntry[] }>("GET", "/requests")).body.items;
    },
    async addFault(rule) {
      const res = await send<Record<string, unknown>>("POST", "/faults", rule);
      if (res.status !== 201) throw new Error(`fault rejected: ${JSON.stringify(res.body)}`);
      return res.body;
    },
    async advanceClock(seconds) {
      const res = await send("POST", "/clock/advance", { seconds });
      if (res.status !== 200) throw new Error(`clock: ${res.status}`);
    },
  };
}

// ---------------------------------------------------------------- callback receiver

export interface ReceivedCallback {
  method: string;
  path: string;
  body: Record<string, unknown>;
}

export interface CallbackReceiver {
  url: string;
  received: ReceivedCallback[];
  /** Status the receiver answers with (default 200). */
  respondWith(status: number): void;
  waitFor(count: number, timeoutMs?: number): Promise<ReceivedCallback[]>;
  close(): Promise<void>;
}

export async function startCallbackReceiver(): Promise<CallbackReceiver> {
  const received: ReceivedCallback[] = [];
  let status = 200;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      received.push({
        method: req.method ?? "",
        path: req.url ?? "",
        body: JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>,
      });
      res.writeHead(status, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callbacks/secret`,
    received,
    respondWith(s) {
      status = s;
    },
    async waitFor(count, timeoutMs = ANSWERED_TIMEOUT_MS) {
      const deadline = Date.now() + timeoutMs;
      while (received.length < count) {
        if (Date.now() > deadline) throw new Error(`expected ${count} callbacks, got ${received.length}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      return received;
    },
    close() {
      return new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}
