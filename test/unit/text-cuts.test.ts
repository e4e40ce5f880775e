/**
 * Text cut short anywhere (log fields, provider excerpts and messages, errors, console
 * cells, rejected bodies) never splits a surrogate pair: the half left over is not a
 * character, UTF-8 cannot carry it (it turns into U+FFFD) and strict JSON readers refuse
 * its `\ud83d` escape.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { screenAwbNumbers } from "../../src/awb/topup.ts";
import { ERROR_FIELD_MAX_CHARS } from "../../src/logger.ts";
import { excerpt, ProviderError } from "../../src/provider/errors.ts";
import { clipText, headOf } from "../../src/domain/text.ts";
import { captureLog } from "../helpers/log.ts";

const EMOJI = "😀"; // two UTF-16 code units
const whole = (s: string) => assert.ok(s.isWellFormed(), `ends in half a character: ${JSON.stringify(s.slice(-3))}`);

describe("headOf and clipText", () => {
  it("never end on half a surrogate pair, and keep what fits", () => {
    assert.equal(headOf(`ab${EMOJI}`, 3), "ab");
    assert.equal(headOf(`ab${EMOJI}`, 4), `ab${EMOJI}`);
    assert.equal(headOf("कखग", 2), "कख");
    assert.equal(clipText(`${"a".repeat(8)}${EMOJI}x`, 10), `${"a".repeat(8)}…`);
    assert.equal(clipText("short", 10), "short");
    for (let n = 0; n < 12; n++) {
      whole(headOf(EMOJI.repeat(5), n));
      whole(clipText(`a${EMOJI.repeat(5)}`, Math.max(1, n)));
    }
  });
});

describe("cuts at the boundary of an astral character", () => {
  it("a provider's HTML excerpt", () => {
    for (let pad = 195; pad < 200; pad++) whole(excerpt(`<p>${"a".repeat(pad)}${EMOJI.repeat(10)}</p>`));
  });

  it("a provider's message on its error", () => {
    for (let pad = 495; pad < 500; pad++) {
      const err = new ProviderError({ kind: "client", operation: "POST /x", status: 400, providerMessage: `${"a".repeat(pad)}${EMOJI.repeat(10)}` });
      whole(err.providerMessage);
      whole(err.message);
    }
  });

  it("a malformed AWB number named on its top-up request", () => {
    const { problem } = screenAwbNumbers([`${"A".repeat(39)}${EMOJI}${"B".repeat(5)}`]);
    assert.ok(problem !== null);
    whole(problem);
    // JSON.stringify writes a lone surrogate as its escape.
    assert.ok(!/\\ud8/i.test(problem), problem);
    assert.match(problem, /"A{39}…"/);
  });

  it("a logged error field cut to ERROR_FIELD_MAX_CHARS", async () => {
    const note = `${"a".repeat(ERROR_FIELD_MAX_CHARS - 1)}${EMOJI.repeat(10)}`;
    const lines = await captureLog("json", (log) => log.error({ err: Object.assign(new Error("boom"), { note }) }, "failed"));
    const logged = String((JSON.parse(lines[0]!) as { err: { note: string } }).err.note);
    assert.ok(!logged.includes("\uFFFD"), "half a character written as U+FFFD");
    assert.match(logged, /^a+… \(\d+ characters in all\)$/);
  });
});
