/** The event log's partition calendar (src/domain/periods.ts). */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { addDays, nextBoundary, pastRetention, rangesToAdd, spanStart } from "../../src/domain/periods.ts";
import type { DayRange, PartitionSpan } from "../../src/domain/periods.ts";
import { SPANS_AHEAD } from "../../src/events/partitions.ts";

describe("partition periods", () => {
  it("spans start on the day, the ISO week's Monday, and the month's first", () => {
    assert.equal(spanStart("2026-11-23", "day"), "2026-11-23");
    assert.equal(spanStart("2026-11-29", "week"), "2026-11-23", "a Sunday belongs to the week from Monday");
    assert.equal(spanStart("2026-11-23", "week"), "2026-11-23");
    assert.equal(spanStart("2026-11-23", "month"), "2026-11-01");
    assert.equal(nextBoundary("2026-12-31", "day"), "2027-01-01");
    assert.equal(nextBoundary("2026-12-30", "week"), "2027-01-04");
    assert.equal(nextBoundary("2027-01-31", "month"), "2027-02-01");
    assert.equal(nextBoundary("2028-02-10", "month"), "2028-03-01");
    assert.equal(addDays("2028-02-28", 1), "2028-02-29");
  });

  it("adds ranges from the last end through the spans ahead, without a gap, ending on boundaries", () => {
    assert.deepEqual(rangesToAdd(null, "2026-11-23", "month", 2), [
      { starts: "2026-11-01", ends: "2026-12-01" },
      { starts: "2026-12-01", ends: "2027-01-01" },
      { starts: "2027-01-01", ends: "2027-02-01" },
    ]);
    assert.deepEqual(rangesToAdd("2027-02-01", "2026-11-23", "month", 2), [], "already far enough");
    // A worker away since September: the months in between come too.
    assert.equal(rangesToAdd("2026-09-01", "2026-11-23", "month", 2).length, 5);
    // Month to week: a short first range to the next Monday, then weeks.
    assert.deepEqual(rangesToAdd("2026-12-01", "2026-11-30", "week", 1), [
      { starts: "2026-12-01", ends: "2026-12-07" },
      { starts: "2026-12-07", ends: "2026-12-14" },
    ]);
  });

  it("a range is past retention once its last day's orders are that many days old; 0 keeps forever", () => {
    const november = { starts: "2026-11-01", ends: "2026-12-01" };
    assert.equal(pastRetention(november, "2026-12-30", 30), false, "Nov 30's orders are 30 days old on Dec 30 only");
    assert.equal(pastRetention(november, "2026-12-31", 30), true);
    assert.equal(pastRetention(november, "2099-01-01", 0), false);
  });

  it("run daily for five years (two leap days), with the span changed each month: no gap, no overlap, today and tomorrow always made, nothing dropped early", () => {
    const spans: PartitionSpan[] = ["month", "day", "week"];
    const made: DayRange[] = [];
    let span: PartitionSpan = "month";
    for (let today = "2026-11-20"; today < "2031-12-01"; today = addDays(today, 1)) {
      if (today.endsWith("-15")) span = spans[(spans.indexOf(span) + 1) % spans.length]!;
      made.push(...rangesToAdd(made.at(-1)?.ends ?? null, today, span, SPANS_AHEAD[span]));
      for (const day of [today, addDays(today, 1)]) assert.ok(made.some((r) => r.starts <= day && day < r.ends), `${day} has a partition on ${today} (${span})`);
      for (const days of [1, 2, 29, 30, 31, 365]) {
        for (const r of made) {
          if (!pastRetention(r, today, days)) continue;
          // Its last day's last orders, at the start of today: at least `days` whole days old.
          assert.ok(Date.parse(`${today}T00:00:00Z`) - Date.parse(`${r.ends}T00:00:00Z`) >= days * 86_400_000, `${r.starts} dropped early on ${today} (${days} days)`);
        }
      }
    }
    made.forEach((r, i) => {
      assert.ok(r.starts < r.ends);
      if (i > 0) assert.equal(r.starts, made[i - 1]!.ends);
    });
    assert.ok(made.some((r) => r.starts <= "2028-02-29" && "2028-02-29" < r.ends));
  });
});
