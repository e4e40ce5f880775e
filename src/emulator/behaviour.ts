import { z } from "zod";
import { isTimeZone, wallClock } from "../domain/time-zones.ts";

/**
 * Behaviour switches: the emulator follows the written interface ("strict", the defaults)
 * unless told to behave like the real provider is reported to (docs/provider.md). Set at
 * start (`behaviour` option), read and changed at GET/PUT /__emulator/behaviour; a reset
 * goes back to the start values. Changes apply to what happens next: a callback already
 * queued keeps the shape it was built with.
 */

export const PLACE_ANSWERS = ["spec", "sfx", "echo"] as const;
export const EDIT_ANSWERS = ["spec", "sfx"] as const;
export const CALLBACK_SHAPES = ["spec", "nested", "unified", "sparse"] as const;

export interface Behaviour {
  /** false: a repeated (store_code, client_order_id) is refused naming the first order. true: another order is created. */
  accept_duplicate_orders: boolean;
  /**
   * spec: `{message, data: {svc_order_id, track_url, ...}}`. sfx: `{message: "Success", data: {sfx_order_id}}` only.
   * echo: sfx's, with the order as the provider stored it, the customer's details included (orders.ts).
   */
  place_answer: (typeof PLACE_ANSWERS)[number];
  /** spec: `{store_code, status, svc_order_id, track_url, order_details}`. sfx: `{message: "Success", data: {sfx_order_id}}` only. */
  edit_answer: (typeof EDIT_ANSWERS)[number];
  /** Field layout of callbacks (payloads.ts). */
  callback_shape: (typeof CALLBACK_SHAPES)[number];
  /** null: times as ISO-8601 with zone. An IANA name: zone-less wall-clock times in that zone. */
  callback_timezone: string | null;
  /** false: GET …/status/ is a route the server does not have (HTML 404). */
  status_endpoint: boolean;
  /** true: a callback not answered 2xx is sent again (retryDelaysMs). false: dropped after the first attempt, logged. */
  callback_retries: boolean;
}

const DEFAULT_BEHAVIOUR: Readonly<Behaviour> = Object.freeze({
  accept_duplicate_orders: false,
  place_answer: "spec",
  edit_answer: "spec",
  callback_shape: "spec",
  callback_timezone: null,
  status_endpoint: true,
  callback_retries: true,
});

/** What the real provider is reported to do (docs/provider.md). */
const REALISTIC_BEHAVIOUR: Readonly<Behaviour> = Object.freeze({
  ...DEFAULT_BEHAVIOUR,
  accept_duplicate_orders: true,
  place_answer: "sfx",
  edit_answer: "sfx",
  callback_shape: "nested",
  callback_timezone: "Asia/Kolkata",
  // PRODUCT.md §10: the real provider is reported not to retry a callback that failed.
  callback_retries: false,
});

/**
 * A partial update. Strict, so a misspelt switch is refused rather than silently ignored.
 * `realistic` picks the base (the preset or the defaults); fields given beside it win.
 */
export const BehaviourPatchSchema = z.strictObject({
  realistic: z.boolean().optional(),
  accept_duplicate_orders: z.boolean().optional(),
  place_answer: z.enum(PLACE_ANSWERS).optional(),
  edit_answer: z.enum(EDIT_ANSWERS).optional(),
  callback_shape: z.enum(CALLBACK_SHAPES).optional(),
  callback_timezone: z
    .string()
    .refine(isTimeZone, { error: "must be an IANA time zone name, e.g. Asia/Kolkata or UTC" })
    .nullable()
    .optional(),
  status_endpoint: z.boolean().optional(),
  callback_retries: z.boolean().optional(),
});
export type BehaviourInput = z.input<typeof BehaviourPatchSchema>;
export type BehaviourPatch = z.output<typeof BehaviourPatchSchema>;

export function applyBehaviour(current: Readonly<Behaviour>, patch: BehaviourPatch): Behaviour {
  const { realistic, ...fields } = patch;
  const base = realistic === undefined ? current : realistic ? REALISTIC_BEHAVIOUR : DEFAULT_BEHAVIOUR;
  const given = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Partial<Behaviour>;
  return { ...base, ...given };
}

export function sameBehaviour(a: Readonly<Behaviour>, b: Readonly<Behaviour>): boolean {
  return (Object.keys(DEFAULT_BEHAVIOUR) as (keyof Behaviour)[]).every((k) => a[k] === b[k]);
}

/** The start option, validated: a bad value stops the start like any other bad option. */
export function resolveBehaviour(input: BehaviourInput | undefined): Behaviour {
  const parsed = BehaviourPatchSchema.safeParse(input ?? {});
  if (!parsed.success) {
    throw new Error(`behaviour: ${parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ")}`);
  }
  return applyBehaviour(DEFAULT_BEHAVIOUR, parsed.data);
}

/** `YYYY-MM-DD HH:MM:SS` as a wall clock in `timeZone` shows the instant (seconds truncated). */
function wallClockText(at: number, timeZone: string): string {
  return new Date(wallClock(at, timeZone)).toISOString().slice(0, 19).replace("T", " ");
}

/** A time as the provider writes it into callbacks and the status answer. */
export function providerTime(behaviour: Readonly<Behaviour>, at: number): string {
  return behaviour.callback_timezone === null ? new Date(at).toISOString() : wallClockText(at, behaviour.callback_timezone);
}
