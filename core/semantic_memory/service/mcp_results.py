"""What the MCP tools return, shaped for a model's context: a memory shown as every tool shows
it (`shown`: ITEM_FIELDS, wrapper tags neutralised), a result bounded to MAX_RESULT_CHARS of
compact JSON (`fit`, cutting contents fairly and saying so), the secret kinds a store redacted,
how a person takes a forget back, and memory_stats without what a model cannot use.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from ..config import Settings
from ..default_plugins.injection import clip, sanitize_head
from .mcp_browse import RECENT_BUDGET
from .mcp_server import json_text

#: The most characters of JSON one tool result takes (memory_recall's `block`, which its
#: `budget_chars` bounds, comes on top): the resources' bound (mcp_browse.RECENT_BUDGET).
#: Clients cut or refuse more (Claude Code near 25k tokens; the SDK's HTTP client fails on an
#: event over 1 MiB), and the model's context pays for every character.
MAX_RESULT_CHARS = RECENT_BUDGET
#: What a tool shows of a memory, in this order; the pipeline's own fields (scores, ranks,
#: signals, session, seq, created_at) are nothing a model acts on. `project` null: global.
ITEM_FIELDS = ("uid", "content", "truncated", "content_chars", "kind", "project", "tags",
               "source", "updated_at", "superseded_by")


def shown(memory: dict[str, Any]) -> dict[str, Any]:
    """A memory as every tool shows it: its content cleaned as the injection block cleans it
    (wrapper tags neutralised, `rest.recall_item`'s rule: a stored `</memory>` reads the same
    in memory_recall, memory_list and memory_update), with ITEM_FIELDS only, empty ones left
    out but `project` (null: a global memory). `content_chars` is the memory's own length
    (the one `memory` gives: a recall item's content is cleaned already), not the cleaned
    text's (an escaped `</memory>` is longer): `fit` keeps it on `truncated` items only. Only
    the head a result can show (MAX_RESULT_CHARS) is cleaned: `fit` cuts the rest."""
    out: dict[str, Any] = {}
    for name in ITEM_FIELDS:
        value = memory.get(name)
        if name == "content":
            value = sanitize_head(value or "", MAX_RESULT_CHARS)
        elif name == "content_chars" and not isinstance(value, int):
            value = len(memory.get("content") or "")
        if (value is None and name != "project") or value == []:
            continue
        out[name] = value
    return out


def _json_chars(text: str) -> int:
    """What `text` adds to a result's JSON, quotes aside."""
    return len(json.dumps(text, ensure_ascii=False)) - 2


def _cut(content: str, chars: int) -> str:
    """`content` clipped (`…`, at a character boundary) to at most `chars` characters of JSON."""
    limit = chars
    while limit > 0:
        text = clip(content, limit)
        over = _json_chars(text) - chars
        if over <= 0:
            return text
        limit -= over  # quotes, backslashes and newlines take two characters in JSON
    return ""


#: The marker a cut item gains, counted before the cut (`content_chars` at its widest).
_CUT_MARK = len(json_text({"truncated": True, "content_chars": 10**7})) - 1


def fit(result: dict[str, Any], items: list[dict[str, Any]], whole: str,
        limit: int = MAX_RESULT_CHARS) -> dict[str, Any]:
    """`result`, which holds `items` (`shown` memories), within `limit` characters of compact
    JSON: each content cut to its share of what the other fields leave (a short one leaves the
    rest of its share to the others), marked `"truncated": true` with its full length in
    `content_chars`, and a `note` saying so and where the whole text is (`whole`; also for
    items cut before, to a recall's `budget_chars`). Items whose other fields alone do not
    fit (100 memories of 32 long tags) are left out, last first, and the note says how many.
    `result` is changed in place and returned."""
    whole_lengths = [item.pop("content_chars", None) for item in items]
    for item, chars in zip(items, whole_lengths):
        if item.get("truncated") and chars is not None:
            item["content_chars"] = chars
    note_chars = len(json_text({"note": _note(len(items), len(items), 10**7, whole)}))
    if len(json_text(result)) + note_chars <= limit:
        if cut := sum(1 for item in items if item.get("truncated")):
            result["note"] = _note(cut, len(items), 0, whole)
        return result
    contents = [item["content"] for item in items]
    for item in items:
        item["content"] = ""
    reserved = note_chars + _CUT_MARK * len(items)
    kept = len(items)
    while kept and len(json_text(result)) + reserved > limit:
        kept -= 1
        items.pop()  # the list `result` holds
        reserved -= _CUT_MARK
    budget = max(0, limit - len(json_text(result)) - reserved)
    costs = [_json_chars(c) for c in contents[:kept]]
    shares = [0] * kept
    for n, i in enumerate(sorted(range(kept), key=costs.__getitem__)):
        shares[i] = min(costs[i], budget // (kept - n))
        budget -= shares[i]
    for item, content, cost, share, chars in zip(items, contents, costs, shares, whole_lengths):
        item["content"] = content if cost <= share else _cut(content, share)
        if cost > share:
            item["truncated"] = True
            item["content_chars"] = chars if chars is not None else len(content)
    cut = sum(1 for item in items if item.get("truncated"))
    result["note"] = _note(cut, kept, len(contents) - kept, whole)
    return result


def _note(cut: int, shown_count: int, left_out: int, whole: str) -> str:
    text = (f"{cut} of {shown_count} memories are cut to fit (`truncated`, whole length in "
            f"`content_chars`): {whole}")
    if left_out:
        text += (f"; {left_out} more did not fit in {MAX_RESULT_CHARS:,} characters: ask for "
                 "fewer, or page on with `offset`")
    return text


#: A `[REDACTED:<kind>]` marker (safety/redaction.py writes them).
_REDACTED = re.compile(r"\[REDACTED:([\w.-]{1,80})\]")


def redacted_kinds(sent: str, stored: str) -> list[str]:
    """The kinds of secret the store redacted: its markers in `stored` that `sent` did not
    hold already."""
    found = Counter(_REDACTED.findall(stored)) - Counter(_REDACTED.findall(sent))
    return sorted(found)


def undo_forget(uid: str, settings: Settings) -> str:
    """How a person takes the forget of `uid` back, and until when."""
    if settings.forget_purged_after_s is None:
        until = "until a `memory-mcp purge`"
    else:
        until = (f"within {settings.forget_grace_days} days (MEMORY_FORGET_GRACE_DAYS; a "
                 "`memory-mcp purge` ends that sooner)")
    return f"the user can take it back with `memory-mcp unforget {uid}` {until}"


def slim_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """memory_stats' figures without what a model cannot use: days without an injection and
    null fields of a channel. (The engine names at most 50 kinds, sources and projects.)"""
    injections = stats.get("injections")
    if isinstance(injections, dict) and isinstance(injections.get("per_day"), list):
        injections["per_day"] = [d for d in injections["per_day"]
                                 if not isinstance(d, dict) or d.get("count")]
    if isinstance(stats.get("channels"), list):
        stats["channels"] = [{k: v for k, v in c.items() if v is not None}
                             if isinstance(c, dict) else c for c in stats["channels"]]
    return stats
