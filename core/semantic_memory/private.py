"""`<private>…</private>`: text a person marks as never to be remembered.

One rule, used by every writer before it sends, spools or logs anything (the hook adapters,
the MCP proxy) and by the service before any channel sees a write (`safety/private_fields.py`);
the opencode plugin has its twin in `opencode-plugin/src/private.ts` (the same results, so a
chunk both sides flush is the same memory). Standard library only: a hook imports it.

The rule: the tag is matched case-insensitively, with any spacing inside the angle brackets
and any attributes (`< Private >`, `</ PRIVATE >`, `<private reason="x">`); nested tags
count (the text stays hidden until the outermost tag closes); an opening tag never closed
hides everything after it; a stray closing tag and a self-closing `<private/>` are dropped.
The hidden span is removed, tags included, with nothing in its place. Tags are looked for in
what the text reads as (NFKC, invisible characters dropped: a zero-width space inside the
name, `＜private＞`), since that is what the injection block, and a model, makes of them.

Across the turns of a conversation (`strip_private_from`) a span the user opens stays open
until a later message closes it: the text in between, the assistant's replies included, is
hidden, and the closing tag in the later message closes that span. Only for a while
(`carry_private`): a span left open at the end of a user message runs into the next
CARRY_MESSAGES user messages at most; if none of them closes it, it was a mention of the tag
("does <private> keep text out?"), not a span, and nothing after them is hidden (what was hidden
stays hidden). Unbounded, one mention turned memory off for the rest of the session, unseen.
"""

from __future__ import annotations

__all__ = ["CARRY_MESSAGES", "NO_CARRY", "carry_private", "has_private", "strip_private",
           "strip_private_from"]

# No typing at run time: a hook imports this module.
TYPE_CHECKING = False
if TYPE_CHECKING:
    #: What a user message leaves open for the next: the spans open, and the later messages
    #: the oldest of them has run into with none closing it.
    Carry = tuple[int, int]

#: How many later user messages a span left open carries into, unless one closes it. Two: a
#: person who marks a paste across messages closes it in the next one or two (the record, then
#: "…</private> now fix the bug"); a mention is never closed, and costs two messages, each told.
CARRY_MESSAGES = 2
#: Nothing left open.
NO_CARRY: Carry = (0, 0)

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


def _view(text: str) -> str | None:
    """`text` as a reader sees it (`safety.textnorm.visible`), or None when it cannot hold a
    tag: no "<" in any form, or no "vate" in any case (the tag's letters after the "i", which
    under IGNORECASE also matches "İ" and "ı"). A zero-width space or soft hyphen in the name,
    an ideographic space or fullwidth letters hide no tag from a model, so none from here."""
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:  # NFKC: "<"
        return None
    if not text.isascii():
        from .safety.textnorm import visible  # only then: hooks import this module

        text = visible(text)
    return text if "vate" in text.lower() else None


def _kept_spans(view: str, depth: int = 0) -> tuple[list[tuple[int, int]] | None, int]:
    """The spans of `view` outside private text (None when it holds no tag and starts
    outside a span), and how many spans are open at its end; `depth` were open before it."""
    kept: list[tuple[int, int]] = []
    position = 0
    found = False
    for match in _tag().finditer(view):
        found = True
        if depth == 0:
            kept.append((position, match.start()))
        position = match.end()
        if match.group(1):
            depth = max(depth - 1, 0)
        elif not match.group(0)[:-1].rstrip(" \t\r\n\f\v").endswith("/"):
            depth += 1
    if not found and not depth:
        return None, 0
    if depth == 0:
        kept.append((position, len(view)))
    return kept, depth


def has_private(text: str) -> bool:
    """Whether `text` holds a private tag (opening, closing or self-closing)."""
    view = _view(text)
    return view is not None and _tag().search(view) is not None


def strip_private(text: str) -> str:
    """`text` without its private spans (the same object when it has none)."""
    return strip_private_from(text, 0)[0]


def strip_private_from(text: str, depth: int) -> tuple[str, int]:
    """`text`, a message read `depth` spans deep (opened by earlier messages and not closed
    yet), without its private text; and how many spans are open at its end, for the next
    message. A span opened in one message thus runs on into the next ones, and a closing
    tag there closes it instead of being dropped as stray (which kept what preceded it)."""
    view = _view(text)
    if view is None:
        return (text, 0) if depth <= 0 else ("", depth)
    kept, depth = _kept_spans(view, max(depth, 0))
    if kept is None:
        return text, 0
    if view is not text:  # spans of what `text` reads as: cut from `text` itself
        from .safety.textnorm import visible_origins

        origins = visible_origins(text)
        kept = [(origins[start - 1] + 1 if start else 0,
                 origins[end] if end < len(origins) else len(text)) for start, end in kept]
    return "".join(text[start:end] for start, end in kept), depth


def carry_private(text: str, carry: Carry) -> tuple[str, Carry]:
    """`text`, a user message read inside what the earlier ones left open (`carry`), without
    its private text; and what it leaves open for the next (`strip_private_from`, bounded by
    CARRY_MESSAGES). A message that keeps no text ran on inside the span; one that keeps some
    closed it, and a span still open at its end is a new one."""
    kept, depth = strip_private_from(text, carry[0])
    if not depth:
        return kept, NO_CARRY
    carried = carry[1] + 1 if carry[0] and not kept else 0
    if carried >= CARRY_MESSAGES:  # never closed within the bound: a mention of the tag
        return kept, NO_CARRY
    return kept, (depth, carried)
