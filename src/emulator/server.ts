import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { createEmulator } from "./app.ts";
import type { Emulator } from "./app.ts";
import type { EmulatorOptions } from "./types.ts";

export interface StartEmulatorOptions extends EmulatorOptions {
  /** 0 picks a free port. Default 0. */
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

/** Creates an emulator and serves it over HTTP; resolves once it is listening. */
export async function startEmulator(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  const emulator = createEmulator(options);
  const host = options.host ?? "127.0.0.1";
  const { server, port } = await new Promise<{ server: Server; port: number }>((resolve, reject) => {
    const s = serve({ fetch: emulator.app.fetch, port: options.port ?? 0, hostname: host }, (info: AddressInfo) =>
      resolve({ server: s as Server, port: info.port }),
    );
    s.once("error", reject);
  });
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  let closing: Promise<void> | null = null;
  return {
    url: `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${port}`,
    emulator,
    close() {
      closing ??= new Promise<void>((resolve) => {
        emulator.close();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
