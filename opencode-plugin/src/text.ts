/**
 * String helpers that count and trim the way Python does, so that the chunks and records this
 * plugin sends are byte for byte those the Python adapters would send for the same text (the
 * service dedups by exact content, so a one-character difference would be a second memory):
 * lengths in code points (not UTF-16 units), whitespace as `str.split()`/`str.strip()` see it.
 */

/** The characters Python's `str.isspace()` is true for (what `split()` and `strip()` use). */
export const SPACE = "\\t\\n\\x0b\\x0c\\r\\x1c-\\x1f \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
/** One character `str.isspace()` is true for (all of them are in the BMP: one UTF-16 unit). */
const SPACE_CHAR = new RegExp(`[${SPACE}]`);
const RUNS = new RegExp(`[${SPACE}]+`);
/** Only text with a character outside the BMP counts differently in UTF-16 units. */
const SURROGATE = /[\ud800-\udfff]/;

// The trims walk an index over the whitespace at the ends and look at nothing else: a regex
// such as `[…]+$` is retried by V8 at every character of a whitespace run inside the text, so
// a prompt or tool output with 80 kB of blanks in it took 17 s to strip inside opencode.

/** `s.strip()` */
export function strip(text: string): string {
  const end = spaceStart(text, text.length, 0);
  return text.slice(spaceEnd(text, 0, end), end);
}

/** `s.lstrip()` */
export function lstrip(text: string): string {
  return text.slice(spaceEnd(text, 0, text.length));
}

/** `s.rstrip()` */
export function rstrip(text: string): string {
  return text.slice(0, spaceStart(text, text.length, 0));
}

/** The index past the whitespace that starts at `from` (at most `end`). */
export function spaceEnd(text: string, from: number, end: number): number {
  while (from < end && SPACE_CHAR.test(text.charAt(from))) from++;
  return from;
}

/** Where the whitespace that ends at `end` starts (at least `floor`). */
export function spaceStart(text: string, end: number, floor: number): number {
  while (end > floor && SPACE_CHAR.test(text.charAt(end - 1))) end--;
  return end;
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
