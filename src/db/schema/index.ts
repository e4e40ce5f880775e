export * from "./events.ts";
export * from "./orders.ts";
