export * from "./events.ts";
export * from "./orders.ts";
export * from "./commands.ts";
export * from "./awb.ts";
export * from "./notifications.ts";
export * from "./console.ts";
