/**
 * src/db/timestamps.ts: PostgreSQL's timestamp text read digit by digit must give the
 * instant `new Date` gives (what postgres.js did before), and leave every other shape to it;
 * except a timestamp without a zone (UTC) and a year below 100 (that year, not 19xx).
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseTimestamp } from "../../src/db/timestamps.ts";

const same = (text: string) => assert.ok(Object.is(parseTimestamp(text).getTime(), new Date(text).getTime()), `${text}: ${parseTimestamp(text).getTime()} vs ${new Date(text).getTime()}`);

describe("parseTimestamp", () => {
  it("reads PostgreSQL's ISO output, in any zone and with 0 to 6 fraction digits, as new Date does", () => {
    const zones = ["+00", "+05:30", "-03", "-09:30", "+14", "+00:00"];
    for (let i = 0; i < 2000; i++) {
      const at = new Date(Date.UTC(1970 + (i % 90), i % 12, 1 + (i % 28), i % 24, (i * 7) % 60, (i * 13) % 60));
      const [date, time] = at.toISOString().slice(0, 19).split("T");
      const fraction = i % 7 === 0 ? "" : `.${String(i * 7919).padStart(6, "0").slice(0, i % 7)}`;
      same(`${date} ${time}${fraction}${zones[i % zones.length]}`);
    }
    same("2026-11-23 18:42:59.999999+00");
    same("2026-12-31 23:59:59.9995-00:30");
  });

  it("keeps milliseconds and drops the microseconds, like new Date", () => {
    assert.equal(parseTimestamp("2026-11-23 10:00:00.123987+00").toISOString(), "2026-11-23T10:00:00.123Z");
    assert.equal(parseTimestamp("2026-11-23 10:00:00.5+05:30").toISOString(), "2026-11-23T04:30:00.500Z");
  });

  it("leaves other shapes to new Date: a date, infinity, BC, another DateStyle", () => {
    for (const text of ["2026-11-23", "infinity", "-infinity", "0044-03-15 12:00:00+00 BC", "Mon Nov 23 10:00:00 2026 UTC", "2026-11-23T10:00:00Z", "2026-1x-23 10:00:00+00"]) {
      same(text);
    }
  });

  it("reads a timestamp without a zone (orders.updated_hour) as UTC, whatever the host's zone", () => {
    const zone = process.env.TZ;
    try {
      for (const tz of ["Asia/Kolkata", "America/St_Johns", "UTC"]) {
        process.env.TZ = tz;
        assert.equal(parseTimestamp("2026-11-23 10:00:00").toISOString(), "2026-11-23T10:00:00.000Z", tz);
        assert.equal(parseTimestamp("2026-11-23 10:00:00.250999").toISOString(), "2026-11-23T10:00:00.250Z", tz);
        assert.equal(parseTimestamp("0044-03-15 12:00:00").toISOString(), "0044-03-15T12:00:00.000Z", tz);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("reads a year below 100 with its zone as that year, not 19xx (new Date reads 0050-01-01 00:00:00+00 as 1950), as it does one without a zone", () => {
    assert.equal(new Date("0050-01-01 00:00:00+00").getUTCFullYear(), 1950, "what new Date does");
    assert.equal(parseTimestamp("0050-01-01 00:00:00+00").toISOString(), "0050-01-01T00:00:00.000Z");
    assert.equal(parseTimestamp("0001-01-01 05:30:00.25+05:30").toISOString(), "0001-01-01T00:00:00.250Z");
    assert.equal(parseTimestamp("0099-12-31 23:59:59-00:00:30").toISOString(), "0100-01-01T00:00:29.000Z");
    assert.equal(parseTimestamp("0004-02-29 00:00:00+00").toISOString(), "0004-02-29T00:00:00.000Z");
    assert.equal(parseTimestamp("0050-01-01 00:00:00").toISOString(), parseTimestamp("0050-01-01 00:00:00+00").toISOString());
  });

  it("reads a zone offset with seconds (historical local mean time), which new Date cannot", () => {
    assert.equal(parseTimestamp("1900-01-01 00:00:00+05:53:28").toISOString(), "1899-12-31T18:06:32.000Z");
  });
});
