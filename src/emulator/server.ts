import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { createEmulator } from "./app.ts";
import type { Emulator } from "./app.ts";
import type { EmulatorOptions } from "./types.ts";

export interface StartEmulatorOptions extends EmulatorOptions {
  /** 0 picks a free port (tests). Default 0. A given port is used as is: busy means EmulatorPortInUseError. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
}

export interface RunningEmulator {
  /** e.g. http://127.0.0.1:4010 (no trailing slash): use as both base_url and gateway_url. */
  url: string;
  emulator: Emulator;
  close(): Promise<void>;
}

/**
 * The emulator's port is taken. Never answered by moving to another port: saved orders'
 * track_urls and every configured base_url name this one.
 */
export class EmulatorPortInUseError extends Error {
  readonly code = "EADDRINUSE";
  readonly port: number;
  readonly host: string;
  constructor(port: number, host: string, cause: unknown) {
    super(
      `EMULATOR_PORT: port ${port} on ${host} is already in use (another emulator or \`npm start\`?); ` +
        `stop what listens there or set EMULATOR_PORT to a free port`,
      { cause },
    );
    this.name = "EmulatorPortInUseError";
    this.port = port;
    this.host = host;
  }
}

function listen(fetch: Parameters<typeof serve>[0]["fetch"], port: number, host: string): Promise<{ server: Server; port: number }> {
  return new Promise((resolve, reject) => {
    const s = serve({ fetch, port, hostname: host }, (info: AddressInfo) => resolve({ server: s as Server, port: info.port }));
    s.once("error", (err: NodeJS.ErrnoException) => reject(err.code === "EADDRINUSE" ? new EmulatorPortInUseError(port, host, err) : err));
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

/** Creates an emulator and serves it over HTTP; resolves once it is listening. */
export async function startEmulator(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  const host = options.host ?? "127.0.0.1";
  // The port first, the emulator second: a busy port must fail before the saved state is
  // touched (loading may set a bad file aside, --reset deletes it) while another emulator
  // still owns that file.
  let emulator: Emulator | undefined;
  const { server, port } = await listen(
    (request, env) => (emulator ? emulator.app.fetch(request, env) : new Response(null, { status: 503 })),
    options.port ?? 0,
    host,
  );
  try {
    emulator = createEmulator(options);
  } catch (err) {
    await closeServer(server);
    throw err;
  }
  const started = emulator;
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${port}`,
    emulator: started,
    close() {
      if (!closing) {
        // First: releases hanging requests (so the server can finish closing) and writes the state.
        started.close();
        closing = closeServer(server);
      }
      return closing;
    },
  };
}
