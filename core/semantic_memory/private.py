"""`<private>…</private>`: text a person marks as never to be remembered.

One rule, used by every writer before it sends, spools or logs anything (the hook adapters,
the MCP proxy) and by the service before any channel sees a write (`safety/private_fields.py`);
the opencode plugin has its twin in `opencode-plugin/src/private.ts` (the same results, so a
chunk both sides flush is the same memory). Standard library only: a hook imports it.

The rule: the tag is matched case-insensitively, with any spacing inside the angle brackets
and any attributes (`< Private >`, `</ PRIVATE >`, `<private reason="x">`); nested tags
count (the text stays hidden until the outermost tag closes); an opening tag never closed
hides everything after it; a stray closing tag and a self-closing `<private/>` are dropped.
The hidden span is removed, tags included, with nothing in its place.
"""

from __future__ import annotations

import re

__all__ = ["has_private", "strip_private"]

# Whitespace spelled out (not `\s`): the TypeScript twin must match the very same characters.
_TAG = re.compile(r"<[ \t\r\n\f\v]*(/?)[ \t\r\n\f\v]*private(?=[ \t\r\n\f\v/>])[^>]*>",
                  re.IGNORECASE)


def has_private(text: str) -> bool:
    """Whether `text` holds a private tag (opening, closing or self-closing)."""
    return "<" in text and _TAG.search(text) is not None


def strip_private(text: str) -> str:
    """`text` without its private spans (the same object when it has none)."""
    if "<" not in text:
        return text
    kept: list[str] = []
    depth = 0
    position = 0
    found = False
    for match in _TAG.finditer(text):
        found = True
        if depth == 0:
            kept.append(text[position:match.start()])
        position = match.end()
        if match.group(1):
            depth = max(depth - 1, 0)
        elif not match.group(0)[:-1].rstrip(" \t\r\n\f\v").endswith("/"):
            depth += 1
    if not found:
        return text
    if depth == 0:
        kept.append(text[position:])
    return "".join(kept)
