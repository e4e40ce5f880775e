/**
 * How an order row stores its FoldState (orders.projection_state): compact, deterministic
 * JSON text (each winning event stored once, winners pointing at it by index), read back
 * through zod. A state that does not parse reads as null, and the order is re-derived
 * from the log. Format: see encodeState.
 */
import { z } from "zod";
import type { FoldState, RiderWinner, Stamp, Winner } from "../domain/projection.ts";
import { CANONICAL_STATUSES } from "../domain/statuses.ts";

const VERSION = 1;

const ref = z.number().int().nonnegative();
const riderTag = z.string().nullable();
const stored = z.object({
  v: z.literal(VERSION),
  n: z.number().int().nonnegative(),
  t: z.number().nullable(),
  e: z.array(z.tuple([z.string(), z.number()])),
  s: z.tuple([z.enum(CANONICAL_STATUSES), z.string(), ref]).optional(),
  i: z.tuple([z.string(), ref]).optional(),
  c: z.tuple([z.string(), ref]).optional(),
  r: z.tuple([z.string(), ref]).optional(),
  // The rider id follows as a last element (a rest, not a union: this parse runs per visit).
  m: z.tuple([z.string(), ref], riderTag).optional(),
  p: z.tuple([z.string(), ref], riderTag).optional(),
  l: z.tuple([z.number(), z.number(), ref], riderTag).optional(),
  u: z.tuple([z.string(), ref]).optional(),
  a: z.array(z.string()).optional(),
});
type Stored = z.infer<typeof stored>;

const TEXT_PARTS = [
  ["i", "svcOrderId"],
  ["c", "clientOrderId"],
  ["r", "riderId"],
  ["u", "trackUrl"],
] as const;
/** Rider details: their winning event's rider id follows (null: it named none). */
const RIDER_PARTS = [
  ["m", "riderName"],
  ["p", "riderContact"],
] as const;

/**
 * `{"v":1,"n":count,"t":lastEventAt,"e":[[key,at],…],"s":[status,raw,e],"i":[svc,e],
 * "c":[coid,e],"r":[riderId,e],"m":[riderName,e,rider],"p":[riderContact,e,rider],
 * "l":[latitude,longitude,e,rider],"u":[trackUrl,e],"a":[svc,…]}`: absent parts are null;
 * "a" only with several provider ids; `rider` (the rider id the detail's event named) is
 * missing from states stored before it was recorded, which decodeState reads as no state. Rewritten with every event, so its size is paid in
 * every update's WAL (about 300 bytes instead of eight 64-character keys).
 */
export function encodeState(state: FoldState): string {
  const events: [string, number][] = [];
  const index = new Map<string, number>();
  const ref = (s: Stamp) => {
    let i = index.get(s.key);
    if (i === undefined) {
      index.set(s.key, (i = events.length));
      events.push([s.key, s.at]);
    }
    return i;
  };
  const out: Record<string, unknown> = { v: VERSION, n: state.eventCount, t: state.lastEventAt, e: events };
  if (state.status) out.s = [state.status.status, state.status.raw, ref(state.status)];
  for (const [short, name] of TEXT_PARTS) {
    const w = state[name];
    if (w) out[short] = [w.value, ref(w)];
  }
  for (const [short, name] of RIDER_PARTS) {
    const w = state[name];
    if (w) out[short] = w.rider === undefined ? [w.value, ref(w)] : [w.value, ref(w), w.rider];
  }
  if (state.svcOrderIds.length > 1) out.a = state.svcOrderIds;
  const l = state.location;
  if (l) out.l = l.rider === undefined ? [l.value.latitude, l.value.longitude, ref(l)] : [l.value.latitude, l.value.longitude, ref(l), l.rider];
  return JSON.stringify(out);
}

export function decodeState(encoded: string | null): FoldState | null {
  if (encoded === null) return null;
  let json: unknown;
  try {
    json = JSON.parse(encoded);
  } catch {
    return null;
  }
  const parsed = stored.safeParse(json);
  if (!parsed.success) return null;
  const s: Stored = parsed.data;
  // Stored before a detail kept the rider id its event named (a release before migration
  // 0016): merged as it is, a new rider's first event would show the last rider's name,
  // phone and position under the new one's id. Read as no state, so the order's next event
  // derives it again from its log (or its row's columns), once, with every rider id.
  if ((s.m !== undefined && s.m.length < 3) || (s.p !== undefined && s.p.length < 3) || (s.l !== undefined && s.l.length < 4)) return null;
  const stamps = s.e.map(([key, at]) => ({ key, at }));
  if ([s.s?.[2], s.i?.[1], s.c?.[1], s.r?.[1], s.m?.[1], s.p?.[1], s.l?.[2], s.u?.[1]].some((i) => i !== undefined && i >= stamps.length)) return null;
  const at = (i: number) => stamps[i]!;
  const winner = <T>(part: [T, number] | undefined): Winner<T> | null => (part === undefined ? null : { value: part[0], ...at(part[1]) });
  const riderWinner = (part: [string, number, ...(string | null)[]] | undefined): RiderWinner<string> | null =>
    part === undefined ? null : { value: part[0], ...at(part[1]), rider: part[2] ?? null };
  return {
    status: s.s === undefined ? null : { status: s.s[0], raw: s.s[1], ...at(s.s[2]) },
    svcOrderId: winner(s.i),
    svcOrderIds: s.a ?? (s.i === undefined ? [] : [s.i[0]]),
    clientOrderId: winner(s.c),
    riderId: winner(s.r),
    riderName: riderWinner(s.m),
    riderContact: riderWinner(s.p),
    location: s.l === undefined ? null : { value: { latitude: s.l[0], longitude: s.l[1] }, ...at(s.l[2]), rider: s.l[3] ?? null },
    trackUrl: winner(s.u),
    lastEventAt: s.t,
    eventCount: s.n,
  };
}
