/**
 * The command line of every npm script's program. Each takes only the flags it names:
 * `--help` (or `-h`) prints its usage and exits 0, and anything else it does not take is
 * refused with the usage (exit 2) before it does anything. Without this, `npm run migrate --
 * --help` applied the migrations and `npm start -- --halp` started the service.
 */
import { parseArgs } from "node:util";
import type { ParseArgsOptionsConfig } from "node:util";

/** A command line that could not be read (the tradition of getopt programs: 2, not 78 or 1). */
export const EX_USAGE = 2;

type Values<O extends ParseArgsOptionsConfig> = {
  [K in keyof O]?: O[K]["type"] extends "boolean" ? boolean : string;
};

/** What the arguments ask for: the usage, the values of the flags, or a sentence saying what is wrong. */
export type CommandLine<O extends ParseArgsOptionsConfig> = { help: true } | { help: false; values: Values<O> } | { error: string };

export function parseCommandLine<O extends ParseArgsOptionsConfig>(argv: readonly string[], options: O, env: Readonly<Record<string, string | undefined>> = {}): CommandLine<O> {
  // npm takes a flag written before `--` for its own configuration (only warning of it) and
  // hands it over as npm_config_<name>: `npm run migrate --after-restore` migrated without
  // marking the restored commands.
  const eaten = Object.keys(options).filter((name) => env[`npm_config_${name.replaceAll("-", "_")}`] !== undefined);
  if (eaten.length > 0) {
    const flags = eaten.map((n) => `--${n}`);
    return { error: `npm took ${flags.join(" and ")} for itself (a program's flags go after \`--\`), so nothing was done: write e.g. npm run <script> -- ${flags[0]}` };
  }
  try {
    const { values, tokens } = parseArgs({
      args: [...argv],
      options: { ...options, help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: false,
      tokens: true,
    });
    // A value given twice (`--orders 1-5 --orders 6-9`): parseArgs keeps the last one silently.
    const given = new Map<string, string[]>();
    for (const t of tokens) if (t.kind === "option" && t.value !== undefined) given.set(t.name, [...(given.get(t.name) ?? []), t.value]);
    for (const [name, vals] of given) if (vals.length > 1) return { error: `--${name} given ${vals.length} times (${vals.join(", ")}): give it once` };
    // parseArgs types its values by the options object, which here is a spread of a generic.
    const { help, ...rest } = values as Record<string, string | boolean | undefined>;
    if (help === true) return { help: true };
    return { help: false, values: rest as Values<O> };
  } catch (err) {
    return { error: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * A flag's value that the program itself found wrong after parsing (a number that is not
 * one, a range backwards): the same as a flag parseArgs refused, one line naming it, the
 * usage, exit 2, on stderr.
 */
export function refuseCommandLine(message: string, usage: string): never {
  process.stderr.write(`${message}\n${usage}\n`);
  process.exit(EX_USAGE);
}

/**
 * For an entry point, before it reads its configuration: the values of its flags, or the
 * usage printed and the process ended (stdout and 0 for `--help`, stderr and 2 otherwise).
 */
export function commandLine<O extends ParseArgsOptionsConfig>(usage: string, options: O = {} as O, argv: readonly string[] = process.argv.slice(2), env: Readonly<Record<string, string | undefined>> = process.env): Values<O> {
  const line = parseCommandLine(argv, options, env);
  if ("error" in line) refuseCommandLine(line.error, usage);
  if (line.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  return line.values;
}
