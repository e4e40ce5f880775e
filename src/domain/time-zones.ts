/**
 * IANA time zones with Intl alone: whether a name is one, an instant's wall clock in a
 * zone, and the instant a zone's wall clock shows (what provider times without an offset
 * mean, PROVIDER_TIMEZONE).
 */

/** Whether Intl knows this IANA zone name (`Asia/Kolkata`, `UTC`): the only zones tracklane takes. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** A zone's wall clock at an instant, and the offsets already worked out for it. */
interface Zone {
  format: Intl.DateTimeFormat;
  /** Offset (ms) to subtract from a wall-clock minute (ms since epoch, as if UTC). */
  offsets: Map<number, number>;
}

/**
 * One Intl.DateTimeFormat per zone (building one costs far more than using it). Zones
 * come from the configuration, so the map stays tiny.
 */
const zones = new Map<string, Zone>();
/** Wall-clock minutes remembered per zone; callback times cluster around now. */
const MAX_REMEMBERED_MINUTES = 4096;

function zoneNamed(timeZone: string): Zone {
  let zone = zones.get(timeZone);
  if (zone === undefined) {
    // Throws RangeError for an unknown zone: the configuration checks the name at start.
    const format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric",
    });
    zone = { format, offsets: new Map() };
    zones.set(timeZone, zone);
  }
  return zone;
}

/** en-US with hourCycle h23: "11/23/2026, 15:35:00". */
const EN_US_WALL_CLOCK = /^(\d{1,2})\/(\d{1,2})\/(\d{4}), (\d{2}):(\d{2}):(\d{2})$/;

/** The zone's wall clock at instant `t`, as ms since epoch read as if UTC (whole seconds). */
function wallClockAt(format: Intl.DateTimeFormat, t: number): number {
  // format() and one match cost a third of formatToParts(); the parts remain the
  // fallback should a future ICU write the date differently.
  const m = EN_US_WALL_CLOCK.exec(format.format(t));
  if (m !== null) return Date.UTC(Number(m[3]), Number(m[1]) - 1, Number(m[2]), Number(m[4]), Number(m[5]), Number(m[6]));
  const p: Partial<Record<Intl.DateTimeFormatPartTypes, number>> = {};
  for (const part of format.formatToParts(t)) p[part.type] = Number(part.value);
  return Date.UTC(p.year ?? 0, (p.month ?? 1) - 1, p.day ?? 1, p.hour ?? 0, p.minute ?? 0, p.second ?? 0);
}

/** The wall clock of `timeZone` at instant `t`, as ms since epoch read as if UTC (whole seconds). */
export function wallClock(t: number, timeZone: string): number {
  return wallClockAt(zoneNamed(timeZone).format, t);
}

/** The zone's offset from UTC at instant `t` (ms). */
function offsetAt(format: Intl.DateTimeFormat, t: number): number {
  return wallClockAt(format, t) - Math.floor(t / 1000) * 1000;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * The instant at which the zone's clocks show `wall` (a wall-clock time written as if it
 * were UTC, in ms). Intl only converts instants to wall clocks, so the offsets in force a
 * day before and a day after are tried (zones change offset at most once within two
 * days); a candidate is right when the zone's clock at it shows `wall`. Across a change
 * of offset, as java.time and Temporal ("compatible") do: a time that happens twice (the
 * hour repeated when clocks go back) is the earlier one; a time that never happens (the
 * hour skipped when clocks go forward) is read with the offset before the change, which
 * lands as far past the gap as it was into it (02:30 on a day New York skips 02:00-03:00
 * is 03:30 EDT). Offsets and changes of offset fall on whole minutes (in every zone for
 * decades before 2000, the earliest time accepted), so the answer for one wall-clock
 * minute holds for all of it and is remembered.
 */
export function zonedInstant(wall: number, timeZone: string): number {
  const zone = zoneNamed(timeZone);
  const minute = Math.floor(wall / MINUTE_MS) * MINUTE_MS;
  let offset = zone.offsets.get(minute);
  if (offset === undefined) {
    offset = offsetFor(zone.format, minute);
    if (zone.offsets.size >= MAX_REMEMBERED_MINUTES) zone.offsets.clear();
    zone.offsets.set(minute, offset);
  }
  return wall - offset;
}

function offsetFor(format: Intl.DateTimeFormat, wall: number): number {
  const before = offsetAt(format, wall - DAY_MS);
  const after = offsetAt(format, wall + DAY_MS);
  // The larger offset gives the earlier instant: try it first.
  const candidates = before === after ? [before] : before > after ? [before, after] : [after, before];
  for (const offset of candidates) {
    if (offsetAt(format, wall - offset) === offset) return offset;
  }
  return before;
}
