/**
 * `<private>…</private>`: text a person marks as never to be remembered, removed before the
 * plugin sends, spools or logs anything. The twin of the Python rule (core/semantic_memory/
 * private.py; the same results, so a chunk both sides flush is the same memory): the tag
 * matched case-insensitively, with any spacing inside the angle brackets and any attributes;
 * nested tags count; an opening tag never closed hides everything after it; a stray closing
 * tag and a self-closing `<private/>` are dropped. The hidden span goes, tags included.
 *
 * Tags are looked for in what the text reads as (Python's `safety/textnorm.py` `visible`):
 * each character's NFKC form, invisible characters dropped, look-alike letters folded, so a
 * zero-width space or soft hyphen in the name, an ideographic space in the brackets,
 * `＜ｐrivate＞` or a Cyrillic `р` hide no tag. The span found there is cut from the text as
 * written.
 */

// Whitespace spelled out (not `\s`): Python's rule matches the very same characters. Python's
// IGNORECASE also lets "İ" stand for the "i" (its simple lower case); JavaScript's does not.
const WS = "[ \\t\\r\\n\\f\\v]";
const TAG = new RegExp(`<${WS}*(/?)${WS}*pr[i\u0130]vate(?=[ \\t\\r\\n\\f\\v/>])[^>]*>`, "gi");
const TRAILING_WS = /[ \t\r\n\f\v]+$/;
/** Every character whose NFKC form holds a "<" (checked against Python from pytest). */
const OPENING = /[<\uff1c\ufe64]/;
const NON_ASCII = /[^\x00-\x7f]/;
const NON_ASCII_CHARS = /[^\x00-\x7f]/gu;
/** Unicode's default-ignorable code points and format characters: shown as nothing. */
const INVISIBLE = /\p{Default_Ignorable_Code_Point}|\p{Cf}/u;

// textnorm.py's look-alike letters, for the letters a tag name has (p, r, i, v, a, t, e: no
// other letter can make or unmake a tag); pytest checks each entry of the Python tables there.
// Latin variants (small capitals, dotless i …) are always folded; the Cyrillic, Greek and
// Armenian ones only inside a word that also holds a Latin letter (`рrivate`): a word spelled
// wholly in them is a word of that language (Python also folds a few such keywords, none of
// them "private").
const LATIN_VARIANTS: Record<string, string> = { a: "\u1d00\u0251", e: "\u1d07", i: "\u026a\u0131", p: "\u1d18", r: "\u0280", t: "\u1d1b", v: "\u1d20" };
const SCRIPT_LOOKALIKES: Record<string, string> = {
  a: "\u0430\u03b1", e: "\u0435\u03b5\u0454", i: "\u0456\u03b9", p: "\u0440\u03c1", r: "\u0433", t: "\u0442\u03c4", v: "\u03bd\u0475",
};

function table(letters: Record<string, string>): Map<string, string> {
  return new Map(Object.entries(letters).flatMap(([latin, chars]) => [...chars].map((c): [string, string] => [c, latin])));
}

const VARIANT_OF = table(LATIN_VARIANTS);
const LOOKALIKE_OF = table(SCRIPT_LOOKALIKES);
const VARIANT_CHARS = new RegExp(`[${Object.values(LATIN_VARIANTS).join("")}]`, "g");
const SCRIPT_CHARS = new RegExp(`[${Object.values(SCRIPT_LOOKALIKES).join("")}]`, "g");
/** A word: Python's `[^\W\d_]+` (letters, and numerals that are not digits). */
const WORD = /[\p{L}\p{Nl}\p{No}]+/gu;
const HAS_LATIN = /[a-zA-Z]/;

/** What each character reads as: its NFKC form without invisible characters (memoised). */
const shown = new Map<string, string>();

function readAs(char: string): string {
  let form = shown.get(char);
  if (form === undefined) {
    form = [...char.normalize("NFKC")].filter((c) => !INVISIBLE.test(c)).join("");
    shown.set(char, form);
  }
  return form;
}

/** `text` as it reads. Look-alike letters fold one UTF-16 unit for one, so `origins` holds. */
function visible(text: string): string {
  let view = text.replace(NON_ASCII_CHARS, readAs);
  VARIANT_CHARS.lastIndex = 0;
  if (VARIANT_CHARS.test(view)) view = view.replace(VARIANT_CHARS, (c) => VARIANT_OF.get(c) ?? c);
  SCRIPT_CHARS.lastIndex = 0;
  if (SCRIPT_CHARS.test(view)) {
    view = view.replace(WORD, (word) => {
      const folded = word.replace(SCRIPT_CHARS, (c) => LOOKALIKE_OF.get(c) ?? c);
      return folded !== word && HAS_LATIN.test(word) ? folded : word;
    });
  }
  return view;
}

/** For each UTF-16 unit of `visible(text)`, the index in `text` of the character it comes from. */
function origins(text: string): number[] {
  const found: number[] = [];
  let done = 0;
  for (const match of text.matchAll(NON_ASCII_CHARS)) { // an ASCII character reads as itself
    const at = match.index ?? 0;
    for (let i = done; i < at; i++) found.push(i);
    for (let n = readAs(match[0]).length; n > 0; n--) found.push(at);
    done = at + match[0].length;
  }
  for (let i = done; i < text.length; i++) found.push(i);
  return found;
}

/** The spans of `view` outside private text, or null when it holds no tag. */
function keptSpans(view: string): [number, number][] | null {
  const kept: [number, number][] = [];
  let depth = 0;
  let position = 0;
  let found = false;
  for (const match of view.matchAll(TAG)) {
    found = true;
    const start = match.index ?? 0;
    if (depth === 0) kept.push([position, start]);
    position = start + match[0].length;
    if (match[1]) depth = Math.max(depth - 1, 0);
    else if (!match[0].slice(0, -1).replace(TRAILING_WS, "").endsWith("/")) depth += 1;
  }
  if (!found) return null;
  if (depth === 0) kept.push([position, view.length]);
  return kept;
}

/** `text` without its private spans (the same string when it has none). */
export function stripPrivate(text: string): string {
  if (!OPENING.test(text)) return text;
  const view = NON_ASCII.test(text) ? visible(text) : text;
  if (!view.toLowerCase().includes("vate")) return text;
  let kept = keptSpans(view);
  if (kept === null) return text;
  if (view !== text) {
    // Spans of what `text` reads as, cut from `text` itself: a span starts after the character
    // its view's previous unit comes from, and ends at the one its own end comes from.
    const from = origins(text);
    const after = (i: number): number => from[i]! + ((text.codePointAt(from[i]!) ?? 0) > 0xffff ? 2 : 1);
    kept = kept.map(([start, end]) => [start ? after(start - 1) : 0, end < from.length ? from[end]! : text.length]);
  }
  return kept.map(([start, end]) => text.slice(start, end)).join("");
}
