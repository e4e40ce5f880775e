/** The console's limit on failed sign-ins (src/http/console/auth.ts), on a clock of the test's own. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createSignInLimiter, limitKey } from "../../src/http/console/auth.ts";

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

describe("the sign-in limiter's addresses", () => {
  it("an IPv6 address counts with its /64: another address in it is refused too, the next /64 is not", () => {
    const limiter = createSignInLimiter(5, 300_000, () => 0);
    // One host picks a new address in its /64 for every try (privacy addresses, or on purpose).
    for (let i = 1; i <= 5; i++) limiter.failed(`2001:db8:1:2::${i.toString(16)}`);
    assert.ok(limiter.retryAfterS("2001:db8:1:2:ffff:ffff:ffff:ffff") > 0);
    assert.ok(limiter.retryAfterS("2001:0db8:0001:0002:0:0:0:abcd") > 0, "written out in full, the same /64");
    assert.equal(limiter.retryAfterS("2001:db8:1:3::1"), 0);
    assert.equal(limitKey("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  });

  it("an IPv4 address is itself, also as a dual-stack socket writes it (::ffff:a.b.c.d)", () => {
    const limiter = createSignInLimiter(5, 300_000, () => 0);
    for (let i = 0; i < 5; i++) limiter.failed(i % 2 === 0 ? "::ffff:203.0.113.9" : "203.0.113.9");
    assert.ok(limiter.retryAfterS("203.0.113.9") > 0);
    assert.ok(limiter.retryAfterS("::ffff:cb00:7109") > 0);
    assert.equal(limiter.retryAfterS("203.0.113.10"), 0);
  });

  it("a flood of other addresses cannot wipe a refused address's failures", () => {
    let now = 0;
    const limiter = createSignInLimiter(5, 300_000, () => now);
    for (let i = 0; i < 5; i++) limiter.failed("198.51.100.7");
    assert.ok(limiter.retryAfterS("198.51.100.7") > 0);
    // Earlier failures whose window has passed are what goes first when room is needed.
    now += 1000;
    for (let i = 0; i < 10_050; i++) limiter.failed(`2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`);
    assert.ok(limiter.retryAfterS("198.51.100.7") > 0, "still refused after 10,050 other addresses failed");
  });
});
