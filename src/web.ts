/** Procfile `web`: the HTTP server only (callbacks and API). Run any number of them. */
import { runRole } from "./runtime/role.ts";

runRole("web");
