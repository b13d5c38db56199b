/**
 * String helpers that count and trim the way Python does, so that the chunks and records this
 * plugin sends are byte for byte those the Python adapters would send for the same text (the
 * service dedups by exact content, so a one-character difference would be a second memory):
 * lengths in code points (not UTF-16 units), whitespace as `str.split()`/`str.strip()` see it.
 */

/** The characters Python's `str.isspace()` is true for (what `split()` and `strip()` use). */
export const SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const LEADING = new RegExp(`^[${SPACE}]+`);
const TRAILING = new RegExp(`[${SPACE}]+$`);
const RUNS = new RegExp(`[${SPACE}]+`);
/** Only text with a character outside the BMP counts differently in UTF-16 units. */
const SURROGATE = /[\ud800-\udfff]/;

/** `s.strip()` */
export function strip(text: string): string {
  return rstrip(lstrip(text));
}

/** `s.lstrip()` */
export function lstrip(text: string): string {
  return text.replace(LEADING, "");
}

/** `s.rstrip()` */
export function rstrip(text: string): string {
  return text.replace(TRAILING, "");
}

/** `s.split()`: the words between runs of whitespace. */
export function words(text: string): string[] {
  return text.split(RUNS).filter(Boolean);
}

/** `len(s)`: code points. */
export function length(text: string): number {
  if (!SURROGATE.test(text)) return text.length;
  let count = 0;
  for (const _ of text) count++;
  return count;
}

/** `s[start:end]` in code points (non-negative bounds; end past the text is the end). */
export function slice(text: string, start: number, end = Infinity): string {
  if (!SURROGATE.test(text)) return text.slice(start, end);
  return Array.from(text).slice(start, end).join("");
}

/** `s.rfind(sub)` in code points (-1 when absent). */
export function rfind(text: string, sub: string): number {
  const unit = text.lastIndexOf(sub);
  return unit < 0 ? -1 : length(text.slice(0, unit));
}
