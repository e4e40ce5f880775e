/**
 * Baseline (b): a bare Hono JSON echo endpoint on the same @hono/node-server as
 * tracklane, in its own process. It parses each body and sends it back: HTTP and JSON
 * cost with no validation, no hashing and no database.
 */
import { serve } from "@hono/node-server";
import { Hono } from "hono";

const app = new Hono();
app.on(["POST", "PUT"], "/callbacks/*", async (c) => c.json(await c.req.json()));

serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, (info) => {
  process.send!({ url: `http://127.0.0.1:${info.port}` });
});
process.on("SIGTERM", () => process.exit(0));
