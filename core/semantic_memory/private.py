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

__all__ = ["has_private", "strip_private"]

# Whitespace spelled out (not `\s`): the TypeScript twin must match the very same characters.
_SOURCE = r"<[ \t\r\n\f\v]*(/?)[ \t\r\n\f\v]*private(?=[ \t\r\n\f\v/>])[^>]*>"
_compiled = None


def _tag():  # type: ignore[no-untyped-def]
    """The tag pattern, compiled on first use: hook processes import this module, and `re`
    costs one more than its own work; most texts hold no "<" and "vate" at all."""
    global _compiled
    if _compiled is None:
        import re

        _compiled = re.compile(_SOURCE, re.IGNORECASE)
    return _compiled


def _may_hold_tag(text: str) -> bool:
    """False when `text` cannot hold a tag: it has no "<", or no "vate" in any case (the
    tag's letters after the "i", which under IGNORECASE also matches "İ" and "ı")."""
    return "<" in text and "vate" in text.lower()


def has_private(text: str) -> bool:
    """Whether `text` holds a private tag (opening, closing or self-closing)."""
    return _may_hold_tag(text) and _tag().search(text) is not None


def strip_private(text: str) -> str:
    """`text` without its private spans (the same object when it has none)."""
    if not _may_hold_tag(text):
        return text
    kept: list[str] = []
    depth = 0
    position = 0
    found = False
    for match in _tag().finditer(text):
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
