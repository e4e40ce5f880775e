/** Procfile `worker`: graphile-worker jobs only. Run any number of them. */
import { runRole } from "./runtime/role.ts";

runRole("worker");
