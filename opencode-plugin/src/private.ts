/**
 * `<private>…</private>`: text a person marks as never to be remembered, removed before the
 * plugin sends, spools or logs anything. The twin of the Python rule (core/semantic_memory/
 * private.py; the same results, so a chunk both sides flush is the same memory): the tag
 * matched case-insensitively, with any spacing inside the angle brackets and any attributes;
 * nested tags count; an opening tag never closed hides everything after it; a stray closing
 * tag and a self-closing `<private/>` are dropped. The hidden span goes, tags included.
 */

// Whitespace spelled out (not `\s`): Python's rule matches the very same characters.
const WS = "[ \\t\\r\\n\\f\\v]";
const TAG = new RegExp(`<${WS}*(/?)${WS}*private(?=[ \\t\\r\\n\\f\\v/>])[^>]*>`, "gi");
const TRAILING_WS = /[ \t\r\n\f\v]+$/;

/** `text` without its private spans (the same string when it has none). */
export function stripPrivate(text: string): string {
  if (!text.includes("<")) return text;
  const kept: string[] = [];
  let depth = 0;
  let position = 0;
  let found = false;
  for (const match of text.matchAll(TAG)) {
    found = true;
    const start = match.index ?? 0;
    if (depth === 0) kept.push(text.slice(position, start));
    position = start + match[0].length;
    if (match[1]) depth = Math.max(depth - 1, 0);
    else if (!match[0].slice(0, -1).replace(TRAILING_WS, "").endsWith("/")) depth += 1;
  }
  if (!found) return text;
  if (depth === 0) kept.push(text.slice(position));
  return kept.join("");
}
