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
