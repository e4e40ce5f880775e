/** The provider emulator's public surface (PRODUCT.md §9). */
export { createEmulator } from "./app.ts";
export type { Emulator } from "./app.ts";
export { EmulatorPortInUseError, startEmulator } from "./server.ts";
export type { RunningEmulator, StartEmulatorOptions } from "./server.ts";
export type { EmulatorOptions } from "./types.ts";
export type { DeliveryLogEntry } from "./callbacks.ts";
export type { FaultRuleInput } from "./faults.ts";
export { CONTROL_PREFIX } from "./middleware.ts";
