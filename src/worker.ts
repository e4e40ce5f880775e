/** Procfile `worker`: graphile-worker jobs only. Run any number of them. */
import { commandLine } from "./runtime/cli.ts";
import { runRole } from "./runtime/role.ts";

commandLine(`usage: npm run worker
  The jobs only (projections, provider commands, AWB top-ups, notifications, retention):
  Procfile \`worker\`. Run \`npm run migrate\` first. It takes no arguments: settings come
  from the environment and .env (.env.example lists them; docs/operations.md).`);
runRole("worker");
