import { z } from "zod";

/**
 * Fault injection (PRODUCT.md §9). Request faults act on provider endpoints (never on
 * `/__emulator/`): answer with a status (and any body and content type), delay, hang or
 * close the connection before or after processing, or answer 200 with a body that is not
 * JSON. Callback faults drop, duplicate or reorder outgoing callbacks. Probabilities draw
 * from a seeded RNG, so a test run is repeatable.
 *
 * A rule matches a request when `method` (if given) equals it and the path contains `path`
 * or matches `path_regex`. `path` is a plain substring: every provider path already starts
 * and ends with "/", so "/regex/" spelling would be ambiguous; use `path_regex` instead.
 * Rules are tried in the order added; the first that matches and wins its draw applies.
 */

/**
 * What Node will write as a header (its own checks, `checkIsHttpToken` and
 * `checkInvalidHeaderChar`): a rule outside them would be accepted and then fail every
 * request it matches, so it is refused when added.
 */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const headerValue = z.string().regex(HEADER_VALUE, { error: "must not contain CR, LF or other control characters" });

const common = {
  probability: z.number().min(0).max(1).default(1),
  /** Apply at most this many times; then the rule stays listed but inert. */
  times: z.number().int().positive().optional(),
};

const requestMatch = {
  method: z.string().min(1).optional(),
  path: z.string().optional(),
  path_regex: z.string().optional(),
};

const RequestFaultSchemas = [
  z.object({
    ...common,
    ...requestMatch,
    action: z.literal("status"),
    status: z.number().int().min(200).max(599),
    body: z.unknown().optional(),
    /** Default: text/plain for a string body, else application/json. e.g. text/html for a proxy's 502 page. */
    content_type: headerValue.min(1).optional(),
    headers: z
      .record(z.string(), headerValue)
      // Checked here rather than as the key's schema: a bad key there would reach the client
      // as the union's "Invalid input", naming no field.
      .superRefine((headers, ctx) => {
        for (const name of Object.keys(headers)) {
          if (!HEADER_NAME.test(name)) {
            ctx.addIssue({ code: "custom", path: [name], message: "a header name is a token: letters, digits and !#$%&'*+-.^_`|~" });
          }
        }
      })
      .optional(),
    /** Run the real handler first, then replace its answer (e.g. a 500 after the order was created). */
    process: z.boolean().default(false),
  }),
  z.object({ ...common, ...requestMatch, action: z.literal("delay"), delay_ms: z.number().int().min(0).max(600_000) }),
  /** Hang without processing until the client gives up. */
  z.object({ ...common, ...requestMatch, action: z.literal("timeout_before") }),
  /** Process the request (the order really exists), then never answer: the lost answer. */
  z.object({ ...common, ...requestMatch, action: z.literal("timeout_after") }),
  /** Close the connection at once, without processing: the client sees a reset, nothing happened. */
  z.object({ ...common, ...requestMatch, action: z.literal("close_before") }),
  /** Process the request (the order really exists), then close the connection without answering. */
  z.object({ ...common, ...requestMatch, action: z.literal("close_after") }),
  /** A 2xx whose body is not JSON, as a misbehaving proxy would send. */
  z.object({
    ...common,
    ...requestMatch,
    action: z.literal("malformed"),
    status: z.number().int().min(200).max(299).default(200),
    process: z.boolean().default(false),
  }),
] as const;

const CallbackFaultSchemas = [
  z.object({
    ...common,
    action: z.enum(["drop", "duplicate", "reorder"]),
    /** Only callbacks of this kind. */
    kind: z.enum(["status", "location"]).optional(),
    /** Only status callbacks with this order_status. */
    order_status: z.string().optional(),
  }),
] as const;

const FaultRuleInputSchema = z
  .union([z.discriminatedUnion("action", RequestFaultSchemas), ...CallbackFaultSchemas])
  .refine((r) => isValidRegex("path_regex" in r ? r.path_regex : undefined), {
    message: "path_regex is not a valid regular expression",
    path: ["path_regex"],
  });

type ParsedRule = z.output<typeof FaultRuleInputSchema>;
type CallbackAction = "drop" | "duplicate" | "reorder";
export type RequestFaultRule = Exclude<ParsedRule, { action: CallbackAction }> & { id: number; applied: number };
export type CallbackFaultRule = Extract<ParsedRule, { action: CallbackAction }> & { id: number; applied: number };
export type FaultRule = RequestFaultRule | CallbackFaultRule;

function isValidRegex(source: string | undefined): boolean {
  if (source === undefined) return true;
  try {
    new RegExp(source);
    return true;
  } catch {
    return false;
  }
}

/** mulberry32: tiny, fast, good enough for deciding coin flips repeatably. */
function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Faults {
  add(input: unknown): { ok: true; rule: FaultRule } | { ok: false; issues: z.core.$ZodIssue[] };
  list(): FaultRule[];
  clear(): void;
  reseed(seed: number): void;
  forRequest(method: string, path: string): RequestFaultRule | null;
  forCallback(kind: "status" | "location", orderStatus: string | undefined): CallbackFaultRule | null;
}

function isRequestRule(rule: FaultRule): rule is RequestFaultRule {
  return rule.action !== "drop" && rule.action !== "duplicate" && rule.action !== "reorder";
}

export function createFaults(seed: number): Faults {
  let rng = createRng(seed);
  let nextId = 1;
  let rules: FaultRule[] = [];

  /** Consumes a draw only for probabilities strictly between 0 and 1. */
  function fires(rule: FaultRule): boolean {
    if (rule.times !== undefined && rule.applied >= rule.times) return false;
    if (rule.probability <= 0) return false;
    if (rule.probability < 1 && rng() >= rule.probability) return false;
    rule.applied += 1;
    return true;
  }

  return {
    add(input) {
      const parsed = FaultRuleInputSchema.safeParse(input);
      if (!parsed.success) return { ok: false, issues: parsed.error.issues };
      const rule = { ...parsed.data, id: nextId++, applied: 0 } as FaultRule;
      rules.push(rule);
      return { ok: true, rule };
    },
    list: () => rules.map((r) => ({ ...r })),
    clear() {
      rules = [];
    },
    reseed(value) {
      rng = createRng(value);
    },
    forRequest(method, path) {
      for (const rule of rules) {
        if (!isRequestRule(rule)) continue;
        if (rule.method && rule.method.toUpperCase() !== method.toUpperCase()) continue;
        if (rule.path !== undefined && !path.includes(rule.path)) continue;
        if (rule.path_regex !== undefined && !new RegExp(rule.path_regex).test(path)) continue;
        if (fires(rule)) return rule;
      }
      return null;
    },
    forCallback(kind, orderStatus) {
      for (const rule of rules) {
        if (isRequestRule(rule)) continue;
        if (rule.kind && rule.kind !== kind) continue;
        if (rule.order_status !== undefined && rule.order_status !== orderStatus) continue;
        if (fires(rule)) return rule;
      }
      return null;
    },
  };
}
