/**
 * A strict reader of Prometheus text exposition (format 0.0.4), stricter than Prometheus
 * itself where tracklane promises more: every family has a `# TYPE` before its samples,
 * counters end in `_total`, no series twice, label values escaped, histograms with
 * ascending cumulative buckets up to `+Inf` equal to `_count`, and a `_sum`. It throws a
 * list of every problem found; it returns the samples.
 */

export type MetricType = "counter" | "gauge" | "histogram" | "summary" | "untyped";

export interface Sample {
  /** The sample's own name (`x_bucket`, `x_sum`, …). */
  name: string;
  /** The family it belongs to (`x`). */
  family: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: MetricType;
  help: string | undefined;
  samples: Sample[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES: ReadonlySet<string> = new Set(["counter", "gauge", "histogram", "summary", "untyped"]);

function parseValue(text: string): number | undefined {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  if (text === "NaN") return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text)) return undefined;
  return Number(text);
}

/** `{a="x",b="y\"z"}` from `i` (at `{`): the labels and the index after `}`; problems pushed. */
function parseLabels(line: string, i: number, problems: string[]): { labels: Record<string, string>; end: number } | undefined {
  const labels: Record<string, string> = {};
  i += 1;
  for (;;) {
    if (line[i] === "}") return { labels, end: i + 1 };
    const eq = line.indexOf("=", i);
    if (eq < 0) return void problems.push(`labels not closed: ${line}`);
    const name = line.slice(i, eq);
    if (!LABEL_NAME.test(name)) problems.push(`bad label name ${JSON.stringify(name)}: ${line}`);
    if (name in labels) problems.push(`label ${name} twice: ${line}`);
    if (line[eq + 1] !== '"') return void problems.push(`label value not quoted: ${line}`);
    let value = "";
    let j = eq + 2;
    for (;;) {
      const c = line[j];
      if (c === undefined) return void problems.push(`label value not closed: ${line}`);
      if (c === '"') break;
      if (c === "\\") {
        const next = line[j + 1];
        if (next === "\\") value += "\\";
        else if (next === '"') value += '"';
        else if (next === "n") value += "\n";
        else problems.push(`bad escape \\${next ?? ""} in a label value: ${line}`);
        j += 2;
        continue;
      }
      value += c;
      j += 1;
    }
    labels[name] = value;
    i = j + 1;
    if (line[i] === ",") i += 1;
    else if (line[i] !== "}") return void problems.push(`expected , or } after a label: ${line}`);
  }
}

/** The family a sample name belongs to, given the families typed so far. */
function familyOf(name: string, types: Map<string, MetricType>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const base = name.slice(0, -suffix.length);
    const type = types.get(base);
    if (type === "histogram" || (type === "summary" && suffix !== "_bucket")) return base;
  }
  return undefined;
}

const seriesKey = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.keys(labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`)
    .join(",")}}`;

export function parsePrometheus(text: string): Map<string, Family> {
  const problems: string[] = [];
  const families = new Map<string, Family>();
  const types = new Map<string, MetricType>();
  const seen = new Set<string>();
  const closed = new Set<string>();
  let current: string | undefined;
  if (text.length > 0 && !text.endsWith("\n")) problems.push("the text does not end with a line feed");
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(line);
      if (!m) continue; // a plain comment
      const [, keyword, name, rest] = m as unknown as [string, "HELP" | "TYPE", string, string | undefined];
      if (!NAME.test(name)) problems.push(`bad metric name ${name}`);
      let family = families.get(name);
      if (family === undefined) {
        family = { name, type: "untyped", help: undefined, samples: [] };
        families.set(name, family);
      } else if (family.samples.length > 0) {
        problems.push(`# ${keyword} ${name} after its samples`);
      }
      if (current !== name && current !== undefined) closed.add(current);
      if (closed.has(name)) problems.push(`family ${name} is not contiguous`);
      current = name;
      if (keyword === "HELP") {
        if (family.help !== undefined) problems.push(`# HELP ${name} twice`);
        family.help = rest ?? "";
      } else {
        if (types.has(name)) problems.push(`# TYPE ${name} twice`);
        if (rest === undefined || !TYPES.has(rest)) problems.push(`# TYPE ${name} has an unknown type ${rest}`);
        family.type = (rest ?? "untyped") as MetricType;
        types.set(name, family.type);
        if (family.type === "counter" && !name.endsWith("_total")) problems.push(`counter ${name} does not end in _total`);
      }
      continue;
    }
    const nameEnd = line.search(/[{ ]/);
    if (nameEnd < 0) {
      problems.push(`not a sample: ${line}`);
      continue;
    }
    const name = line.slice(0, nameEnd);
    if (!NAME.test(name)) problems.push(`bad sample name ${name}`);
    let labels: Record<string, string> = {};
    let rest = line.slice(nameEnd);
    if (rest.startsWith("{")) {
      const parsed = parseLabels(line, nameEnd, problems);
      if (!parsed) continue;
      labels = parsed.labels;
      rest = line.slice(parsed.end);
    }
    const fields = rest.trim().split(/ +/);
    if (!rest.startsWith(" ") || fields.length < 1 || fields.length > 2) {
      problems.push(`bad value part: ${line}`);
      continue;
    }
    const value = parseValue(fields[0]!);
    if (value === undefined) problems.push(`bad value ${fields[0]}: ${line}`);
    const familyName = familyOf(name, types);
    if (familyName === undefined) {
      problems.push(`sample ${name} without a # TYPE before it`);
      continue;
    }
    if (current !== familyName) {
      if (current !== undefined) closed.add(current);
      if (closed.has(familyName)) problems.push(`family ${familyName} is not contiguous`);
      current = familyName;
    }
    const key = seriesKey(name, labels);
    if (seen.has(key)) problems.push(`series twice: ${key}`);
    seen.add(key);
    const family = families.get(familyName)!;
    if (family.type === "counter" && !(value !== undefined && value >= 0)) problems.push(`counter below 0 or NaN: ${line}`);
    family.samples.push({ name, family: familyName, labels, value: value ?? NaN });
  }
  for (const family of families.values()) {
    if (family.type === "histogram") checkHistogram(family, problems);
    if (family.samples.length > 0 && family.help === undefined) problems.push(`${family.name} has no # HELP`);
  }
  if (problems.length > 0) throw new Error(`invalid Prometheus text:\n  ${problems.join("\n  ")}`);
  return families;
}

function checkHistogram(family: Family, problems: string[]): void {
  const groups = new Map<string, { buckets: { le: number; value: number }[]; sum?: number; count?: number }>();
  for (const s of family.samples) {
    const { le, ...rest } = s.labels;
    const key = seriesKey("", rest);
    const group = groups.get(key) ?? { buckets: [] };
    groups.set(key, group);
    if (s.name === `${family.name}_bucket`) {
      const bound = le === undefined ? undefined : parseValue(le);
      if (bound === undefined) problems.push(`${family.name} bucket without a valid le`);
      else group.buckets.push({ le: bound, value: s.value });
    } else if (s.name === `${family.name}_sum`) group.sum = s.value;
    else if (s.name === `${family.name}_count`) group.count = s.value;
    else problems.push(`${s.name} in histogram ${family.name}`);
  }
  for (const [key, g] of groups) {
    const where = `${family.name}${key}`;
    for (let i = 1; i < g.buckets.length; i++) {
      if (!(g.buckets[i]!.le > g.buckets[i - 1]!.le)) problems.push(`${where}: buckets not in ascending le`);
      if (g.buckets[i]!.value < g.buckets[i - 1]!.value) problems.push(`${where}: buckets not cumulative`);
    }
    const last = g.buckets.at(-1);
    if (last?.le !== Infinity) problems.push(`${where}: no +Inf bucket last`);
    if (g.count === undefined) problems.push(`${where}: no _count`);
    if (g.sum === undefined) problems.push(`${where}: no _sum`);
    if (last !== undefined && g.count !== undefined && last.value !== g.count) problems.push(`${where}: +Inf bucket ${last.value} is not _count ${g.count}`);
  }
}

/** The value of the one sample `name` with exactly these labels (among others: `labels` is a subset), or undefined. */
export function valueOf(families: Map<string, Family>, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const family of families.values()) {
    for (const s of family.samples) {
      if (s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v)) return s.value;
    }
  }
  return undefined;
}
