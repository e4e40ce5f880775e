/**
 * Reading timestamps off the wire. postgres.js turns every timestamp into a Date with
 * `new Date(text)`, which costs about a third of a microsecond; a rebuild reads two per
 * event. PostgreSQL's ISO output of a timestamptz is one fixed shape, read here digit by
 * digit, and so is the same without a zone (a `timestamp`), as UTC; any other text (another
 * DateStyle, BC, infinity, a date) is left to `new Date`, as before.
 */

const digit = (s: string, i: number): number => {
  const d = s.charCodeAt(i) - 48;
  return d >= 0 && d <= 9 ? d : Number.NaN;
};
const two = (s: string, i: number): number => digit(s, i) * 10 + digit(s, i + 1);

/** 400 Gregorian years (146,097 days): Date.UTC reads a year below 100 as 19xx, so such a year is computed one cycle on and moved back. */
const CYCLE_MS = 146_097 * 86_400_000;

/**
 * `YYYY-MM-DD HH:MM:SS[.f…]±HH[:MM[:SS]]` (PostgreSQL's ISO DateStyle) as a Date, to the
 * millisecond like `new Date` (further digits are dropped), and the same without a zone as
 * UTC; a year below 100 as that year (new Date makes it 19xx); other text as `new Date` reads it.
 */
export function parseTimestamp(text: string): Date {
  const n = text.length;
  if (n < 19 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) {
    return new Date(text);
  }
  const year = two(text, 0) * 100 + two(text, 2);
  let i = 19;
  let ms = 0;
  if (text.charCodeAt(i) === 46) {
    // Fraction: the first three digits are milliseconds; the rest are dropped.
    i++;
    let scale = 100;
    while (i < n && text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) {
      ms += digit(text, i) * scale;
      scale /= 10;
      i++;
    }
    ms = Math.floor(ms);
  }
  const utc = year < 100
    ? Date.UTC(year + 400, two(text, 5) - 1, two(text, 8), two(text, 11), two(text, 14), two(text, 17), ms) - CYCLE_MS
    : Date.UTC(year, two(text, 5) - 1, two(text, 8), two(text, 11), two(text, 14), two(text, 17), ms);
  // No zone: a `timestamp` column (orders.updated_hour), which holds UTC as every time
  // tracklane writes; new Date would read it in the host's zone.
  if (i === n) return Number.isNaN(utc) ? new Date(`${text.replace(" ", "T")}Z`) : new Date(utc);
  const sign = text.charCodeAt(i);
  if ((sign !== 43 && sign !== 45) || (n - i !== 3 && n - i !== 6 && n - i !== 9)) return new Date(text);
  let offset = two(text, i + 1) * 60;
  if (n - i >= 6) {
    if (text.charCodeAt(i + 3) !== 58) return new Date(text);
    offset += two(text, i + 4);
  }
  let offsetSeconds = 0;
  if (n - i === 9) {
    if (text.charCodeAt(i + 6) !== 58) return new Date(text);
    offsetSeconds = two(text, i + 7);
  }
  const at = utc - (sign === 43 ? 1 : -1) * (offset * 60_000 + offsetSeconds * 1000);
  // A digit out of place (NaN): as before. A year below 100 is that year, where new Date
  // (and postgres.js before this) read 0050-01-01 00:00:00+00 as 1950.
  return Number.isNaN(at) ? new Date(text) : new Date(at);
}
