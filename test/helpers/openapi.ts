/**
 * A small check of real responses against the served OpenAPI 3.1 document: the operation a
 * request reached, whether the status it got is declared there, whether the Content-Type is
 * one the document names for it, and whether the body fits the declared JSON schema.
 *
 * The schema check covers the JSON Schema the document uses (type, enum, const,
 * properties, required, additionalProperties, items, anyOf/oneOf/allOf, $ref, string and
 * number bounds) and is stricter than JSON Schema in one way: a field an object schema
 * does not list (and that no `additionalProperties` allows) is an error, so an undocumented
 * response field is caught, not just a missing one.
 */

export type Schema = { [key: string]: unknown };

export interface OpenApiDoc {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas?: Record<string, Schema>; responses?: Record<string, ResponseObject> };
}

export interface ResponseObject {
  $ref?: string;
  description?: string;
  content?: Record<string, { schema?: Schema }>;
}

export interface Operation {
  responses: Record<string, ResponseObject>;
  requestBody?: unknown;
  parameters?: unknown[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function resolve(doc: OpenApiDoc, schema: Schema): Schema {
  let s = schema;
  for (let i = 0; i < 20 && typeof s.$ref === "string"; i++) {
    const name = /^#\/components\/schemas\/(.+)$/.exec(s.$ref)?.[1];
    const target = name === undefined ? undefined : doc.components.schemas?.[name];
    if (!target) throw new Error(`unresolvable $ref ${s.$ref}`);
    s = target;
  }
  return s;
}

/** Every way `value` departs from `schema`, as `path: problem` lines (none: it fits). */
export function schemaErrors(doc: OpenApiDoc, schema: Schema, value: unknown, path = "$", siblings: ReadonlySet<string> = new Set()): string[] {
  const s = resolve(doc, schema);
  const out: string[] = [];
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? (s.type as string[]) : [s.type as string];
    const actual = typeOf(value);
    const ok = types.some((t) => t === actual || (t === "number" && actual === "integer"));
    if (!ok) return [`${path}: is ${actual}, documented as ${types.join(" | ")}`];
  }
  if (Array.isArray(s.enum) && !s.enum.some((e) => e === value)) out.push(`${path}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  if ("const" in s && s.const !== value) out.push(`${path}: ${JSON.stringify(value)} is not ${JSON.stringify(s.const)}`);
  if (typeof value === "string") {
    if (typeof s.minLength === "number" && value.length < s.minLength) out.push(`${path}: shorter than ${s.minLength}`);
    if (typeof s.maxLength === "number" && value.length > s.maxLength) out.push(`${path}: longer than ${s.maxLength}`);
  }
  if (typeof value === "number") {
    if (typeof s.minimum === "number" && value < s.minimum) out.push(`${path}: below ${s.minimum}`);
    if (typeof s.maximum === "number" && value > s.maximum) out.push(`${path}: above ${s.maximum}`);
  }
  if (Array.isArray(s.allOf)) {
    // The members of an allOf together document an object: a field one of them lists is documented.
    const all = new Set([...siblings, ...(s.allOf as Schema[]).flatMap((sub) => propertyNames(doc, sub))]);
    for (const sub of s.allOf as Schema[]) out.push(...schemaErrors(doc, sub, value, path, all));
  }
  for (const key of ["anyOf", "oneOf"] as const) {
    const options = s[key];
    if (!Array.isArray(options)) continue;
    const results = (options as Schema[]).map((sub) => schemaErrors(doc, sub, value, path));
    const fits = results.filter((r) => r.length === 0).length;
    if (fits === 0) out.push(`${path}: fits none of ${key}: ${results.map((r) => r.join(", ")).join(" / ")}`);
  }
  if (isObject(value) && (s.properties !== undefined || s.additionalProperties !== undefined || s.type === "object" || (Array.isArray(s.type) && s.type.includes("object")))) {
    const props = (isObject(s.properties) ? s.properties : {}) as Record<string, Schema>;
    for (const req of (s.required as string[] | undefined) ?? []) if (!(req in value)) out.push(`${path}.${req}: documented as required, missing`);
    for (const [k, v] of Object.entries(value)) {
      if (k in props) out.push(...schemaErrors(doc, props[k]!, v, `${path}.${k}`));
      else if (isObject(s.additionalProperties)) out.push(...schemaErrors(doc, s.additionalProperties as Schema, v, `${path}.${k}`));
      else if (s.additionalProperties !== true && !siblings.has(k) && !Array.isArray(s.anyOf) && !Array.isArray(s.oneOf) && !Array.isArray(s.allOf)) out.push(`${path}.${k}: not documented`);
    }
  }
  if (Array.isArray(value) && s.items !== undefined) value.forEach((item, i) => out.push(...schemaErrors(doc, s.items as Schema, item, `${path}[${i}]`)));
  return out;
}

function propertyNames(doc: OpenApiDoc, schema: Schema): string[] {
  const s = resolve(doc, schema);
  const own = isObject(s.properties) ? Object.keys(s.properties) : [];
  return [...own, ...(Array.isArray(s.allOf) ? (s.allOf as Schema[]).flatMap((sub) => propertyNames(doc, sub)) : [])];
}

/** The document's operation for a concrete request path: the template with the most literal segments wins. */
export function findOperation(doc: OpenApiDoc, method: string, path: string): { template: string; op: Operation } | undefined {
  const pathname = path.split("?")[0]!;
  const segments = pathname.split("/");
  let best: { template: string; op: Operation; score: number } | undefined;
  for (const [template, ops] of Object.entries(doc.paths)) {
    const parts = template.split("/");
    if (parts.length !== segments.length) continue;
    let score = 0;
    let fits = true;
    for (let i = 0; i < parts.length; i++) {
      if (/^\{.+\}$/.test(parts[i]!)) continue;
      if (parts[i] !== segments[i]) {
        fits = false;
        break;
      }
      score++;
    }
    const op = ops[method.toLowerCase()];
    if (fits && op && (!best || score > best.score)) best = { template, op, score };
  }
  return best && { template: best.template, op: best.op };
}

/** The response object declared for a status, its `$ref` to components.responses followed. */
export function declaredResponse(doc: OpenApiDoc, op: Operation, status: number): ResponseObject | undefined {
  const declared = op.responses[String(status)] ?? op.responses[`${String(status)[0]}XX`] ?? op.responses.default;
  if (!declared?.$ref) return declared;
  const name = /^#\/components\/responses\/(.+)$/.exec(declared.$ref)?.[1];
  return name === undefined ? undefined : doc.components.responses?.[name];
}

/** The media type of a Content-Type header, without parameters. */
export const mediaType = (header: string | null) => (header ?? "").split(";")[0]!.trim().toLowerCase();
