/**
 * Markup for the console: Hono's JSX runtime (escaping, components, SVG) written as
 * tagged templates through htm, because Node runs tracklane's TypeScript by stripping
 * types, and that cannot read TSX syntax. `html\`<p>${text}</p>\`` escapes `text` as JSX
 * would; a component is `<${Table} rows=${rows} />`.
 */
import { createRequire } from "node:module";
import { Fragment, jsx } from "hono/jsx";
import type { Child, JSXNode } from "hono/jsx";

export type { Child, JSXNode };

type Tag = (strings: TemplateStringsArray, ...values: unknown[]) => JSXNode | JSXNode[];
interface Htm {
  bind(h: typeof jsx): Tag;
}
// htm's types describe its CommonJS build as an ES module's default export; require() gets
// the function both agree on.
const htm = createRequire(import.meta.url)("htm") as Htm;
const bound = htm.bind(jsx);

/** One node: several top-level elements become a fragment. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): JSXNode {
  const out = bound(strings, ...values);
  return Array.isArray(out) ? jsx(Fragment, null, ...out) : out;
}
