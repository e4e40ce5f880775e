/** The worker's load meter (src/worker/load.ts): events projected per second over the last two seconds. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createLoadMeter } from "../../src/worker/load.ts";

describe("the load meter", () => {
  it("averages what was noted over the last two seconds and forgets what is older", () => {
    let now = 1_000_000;
    const meter = createLoadMeter(() => now);
    assert.equal(meter.perSecond(), 0);
    meter.note(500);
    now += 600;
    meter.note(1500);
    assert.equal(meter.perSecond(), 1000, "2,000 events within two seconds");
    now += 1500; // the first note is now 2.1 s old
    assert.equal(meter.perSecond(), 750);
    now += 10_000; // a long quiet spell clears every bucket
    assert.equal(meter.perSecond(), 0);
    meter.note(10);
    assert.equal(meter.perSecond(), 5);
  });

  it("a clock that steps back neither throws nor loses what was noted", () => {
    let now = 5_000_000;
    const meter = createLoadMeter(() => now);
    meter.note(100);
    now -= 3000;
    meter.note(100);
    assert.equal(meter.perSecond(), 100);
  });
});
