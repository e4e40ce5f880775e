/** `npm run lint`: ESLint over the project, then the import-cycle check of src/ (scripts/check-cycles.ts). */
import { spawnSync } from "node:child_process";
import { relative, resolve } from "node:path";
import { findCycles, importGraph } from "./check-cycles.ts";

const eslint = spawnSync("eslint", ["."], { stdio: "inherit", shell: false });
const cycles = findCycles(importGraph(resolve("src")));
for (const cycle of cycles) console.error(`import cycle: ${[...cycle, cycle[0]!].map((f) => relative(process.cwd(), f)).join(" -> ")}`);
process.exit(eslint.status !== 0 || eslint.error !== undefined ? 1 : cycles.length > 0 ? 1 : 0);
