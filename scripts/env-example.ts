/**
 * `npm run env:example`: writes `.env.example` from the configuration schema (src/config.ts:
 * every envSchema variable, its default, its meaning and an example). A unit test fails
 * when the committed file differs from what this writes, so the two cannot drift apart.
 */
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { envVariables } from "../src/config.ts";
import { commandLine } from "../src/runtime/cli.ts";

export const ENV_EXAMPLE_PATH = resolve(import.meta.dirname, "../.env.example");

export function renderEnvExample(): string {
  const header = [
    "# tracklane configuration: every variable, its meaning, an example, and its default.",
    "# Written by `npm run env:example` from src/config.ts; do not edit by hand.",
    "#",
    "# Copy to .env and uncomment what you change. Every setting below is commented out, so a",
    "# copy alone changes nothing. Variables set in the environment win over .env.",
  ];
  const blocks = envVariables().map((v) =>
    [`# ${v.description}`, `#   e.g. ${v.name}=${v.example}`, `# ${v.name}=${v.default ?? ""}`].join("\n"),
  );
  return `${[header.join("\n"), ...blocks].join("\n\n")}\n`;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  commandLine(`usage: npm run env:example
  Writes .env.example from the configuration schema (src/config.ts). It takes no arguments.`);
  writeFileSync(ENV_EXAMPLE_PATH, renderEnvExample());
  process.stdout.write(`wrote ${ENV_EXAMPLE_PATH}\n`);
}
