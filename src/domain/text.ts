/**
 * Cutting text short without breaking a character. `String#slice` counts UTF-16 code
 * units: a cut between the two halves of a surrogate pair (an emoji, a rare CJK
 * character) leaves a lone surrogate, which UTF-8 cannot encode (it is written as U+FFFD,
 * or as a `\ud83d` escape that jsonb and strict JSON readers refuse).
 */

/** The longest start of `text` that is at most `max` UTF-16 code units and ends on a whole code point. */
export function headOf(text: string, max: number): string {
  if (text.length <= max) return text;
  if (max <= 0) return "";
  const last = text.charCodeAt(max - 1);
  // A high surrogate as the last unit kept: its low half would be cut off.
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** `text` cut to at most `max` code units, ending with "…" when it was cut. */
export function clipText(text: string, max: number): string {
  return text.length > max ? `${headOf(text, max - 1)}…` : text;
}

const DECIMAL_DIGIT = /\p{Nd}/u;
const DECIMAL_DIGITS = /\p{Nd}/gu;

/**
 * The value of a decimal digit of any script ("९" Devanagari nine, "９" full-width nine):
 * Unicode encodes each script's digits as a run of ten, zero first (a few runs of ten
 * follow each other), so a digit's value is its place in its run, counted from the run's start.
 */
function digitValue(digit: string): number {
  const cp = digit.codePointAt(0)!;
  let start = cp;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start--;
  return (cp - start) % 10;
}

/** `text` with every decimal digit of any script written as its ASCII digit. */
export function asciiDigits(text: string): string {
  return text.replace(DECIMAL_DIGITS, (d) => (d >= "0" && d <= "9" ? d : String(digitValue(d))));
}

/**
 * A phone number as a `tel:` URI's number: a leading "+" and its digits in ASCII, nothing
 * else (RFC 3966 has no room for spaces, and a dialler does not read "९८७६५४३२१०"); null
 * when it holds no digit.
 */
export function telNumber(phone: string): string | null {
  const digits = asciiDigits(phone).replace(/[^0-9]/g, "");
  if (digits === "") return null;
  return /^\s*[+＋]/.test(phone) ? `+${digits}` : digits;
}
