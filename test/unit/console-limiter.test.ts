/** The console's limit on failed sign-ins (src/http/console/auth.ts), on a clock of the test's own. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createSignInLimiter } from "../../src/http/console/auth.ts";

describe("the sign-in limiter", () => {
  it("lets five failures through per address, then refuses until the oldest is five minutes old", () => {
    let now = 1_000_000;
    const limiter = createSignInLimiter(5, 300_000, () => now);
    for (let i = 0; i < 5; i++) {
      assert.equal(limiter.retryAfterS("a"), 0);
      limiter.failed("a");
      now += 10_000;
    }
    // Failures at 0, 10, 20, 30, 40 s; now 50 s: the first leaves the window at 300 s.
    assert.equal(limiter.retryAfterS("a"), 250);
    assert.equal(limiter.retryAfterS("b"), 0, "another address is not held back");
    now += 250_000;
    assert.equal(limiter.retryAfterS("a"), 0);
  });

  it("a success forgets the address's failures", () => {
    const limiter = createSignInLimiter(2, 60_000, () => 0);
    limiter.failed("a");
    limiter.failed("a");
    assert.ok(limiter.retryAfterS("a") > 0);
    limiter.succeeded("a");
    assert.equal(limiter.retryAfterS("a"), 0);
  });
});
