/** Procfile `web`: the HTTP server only (callbacks and API). Run any number of them. */
import { commandLine } from "./runtime/cli.ts";
import { runRole } from "./runtime/role.ts";

commandLine(`usage: npm run web
  The HTTP server only (callbacks, API, console): Procfile \`web\`. Run \`npm run migrate\`
  first. It takes no arguments: settings come from the environment and .env (.env.example
  lists them; docs/operations.md).`);
runRole("web");
