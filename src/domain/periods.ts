/**
 * Calendar arithmetic of the event log's partitions, on UTC days written YYYY-MM-DD (the
 * way PostgreSQL writes a date). Pure: src/events/partitions.ts decides with these what to
 * create and what retention may drop.
 */

/** How many days one partition spans: a day, an ISO week (from Monday), or a calendar month. */
export type PartitionSpan = "day" | "week" | "month";

/** A UTC day, YYYY-MM-DD. */
export type Day = string;

export interface DayRange {
  /** First day in the range, and the day after its last. */
  starts: Day;
  ends: Day;
}

const toDate = (day: Day) => new Date(`${day}T00:00:00Z`);

/** The UTC day of an instant. */
export function dayOf(at: Date): Day {
  return at.toISOString().slice(0, 10);
}

export function addDays(day: Day, n: number): Day {
  const d = toDate(day);
  d.setUTCDate(d.getUTCDate() + n);
  return dayOf(d);
}

/** The first day of the span holding `day`. */
export function spanStart(day: Day, span: PartitionSpan): Day {
  const d = toDate(day);
  if (span === "month") return `${day.slice(0, 7)}-01`;
  if (span === "week") return addDays(day, -((d.getUTCDay() + 6) % 7));
  return day;
}

/** The first span boundary after `day` (the day after the end of its span). */
export function nextBoundary(day: Day, span: PartitionSpan): Day {
  if (span === "day") return addDays(day, 1);
  if (span === "week") return addDays(spanStart(day, "week"), 7);
  const d = toDate(spanStart(day, "month"));
  d.setUTCMonth(d.getUTCMonth() + 1);
  return dayOf(d);
}

/**
 * The ranges to add after the last partition (ending `lastEnds`, null: none yet) so that
 * partitions reach `ahead` whole spans past the one holding `today`. They start where the
 * last one ends (no gap, whatever happened in between) and end on span boundaries, so a
 * change of span takes effect from the next boundary.
 */
export function rangesToAdd(lastEnds: Day | null, today: Day, span: PartitionSpan, ahead: number): DayRange[] {
  let target = spanStart(today, span);
  for (let i = 0; i <= ahead; i++) target = nextBoundary(target, span);
  const ranges: DayRange[] = [];
  for (let starts = lastEnds ?? spanStart(today, span); starts < target; ) {
    const ends = nextBoundary(starts, span);
    ranges.push({ starts, ends });
    starts = ends;
  }
  return ranges;
}

/**
 * Whether a partition may go under a retention of `days` (0: keep forever): every order
 * in it was first seen at least that many whole days before `today` began (its last day
 * ended `days` days ago or earlier).
 */
export function pastRetention(range: DayRange, today: Day, days: number): boolean {
  return days > 0 && range.ends <= addDays(today, -days);
}
