/** The API's JSON shapes, as tests read them: the app's own types, not copies. */
export type { OrderJson as Order } from "../../src/orders/json.ts";
export type { CommandListJson as Command } from "../../src/http/routes/commands.ts";
