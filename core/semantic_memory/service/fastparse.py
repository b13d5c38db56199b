"""The hook-facing request bodies (`/recall`, `/inject/report`, `/ingest`) checked without
pydantic, so that the first request after a start does not pay pydantic's import (about as
long as the rest of the service's start-up, several times a warm `/recall`).

Only bodies that are plainly valid take this path: every key known, every value of the exact
type and within the bounds that schemas.py declares. For those it returns the same values the
pydantic model would hold. Anything else (a wrong type, a value out of range, an unknown key,
`k` and `limit` together) returns None, and the caller validates with the pydantic model,
which names the bad field. tests/test_service_warm.py checks the two agree on random bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..limits import (
    DEFAULT_K,
    MAX_BATCH,
    MAX_BUDGET_CHARS,
    MAX_QUERY_CHARS,
    MAX_RECALL_K,
    MAX_TAGS,
    MAX_UIDS,
)
from ..limits import MAX_PROJECT_CHARS as MAX_SHORT
from ..limits import MAX_TAG_CHARS as MAX_TAG

# The rest of schemas.py's bounds (not imported from there: that would import pydantic).
DEFAULT_BUDGET = 2_000
MAX_BUDGET = MAX_BUDGET_CHARS
MAX_CHARS = 10**9
_EXACT_FLOAT = 2**53  # an int up to this converts to a float exactly, as pydantic's does


class _Unsure(Exception):
    """Not plainly valid: let pydantic decide (and word the error)."""


def _str(value: Any, low: int = 0, high: int | None = None) -> str:
    if type(value) is not str or len(value) < low or (high is not None and len(value) > high):
        raise _Unsure
    return value


def _opt_str(value: Any, low: int = 0, high: int | None = None) -> str | None:
    return None if value is None else _str(value, low, high)


def _short(value: Any) -> str | None:
    return _opt_str(value, 1, MAX_SHORT)


def _int(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _Unsure
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _Unsure
    return value


def _str_list(value: Any, most: int, longest: int) -> list[str]:
    if type(value) is not list or len(value) > most:
        raise _Unsure
    return [_str(item, 0, longest) for item in value]


def _timestamp(value: Any) -> float | str | None:
    """schemas.Timestamp | None: a float, a str, or an int (which becomes a float)."""
    if value is None or type(value) in (float, str):
        return value
    if type(value) is int and abs(value) <= _EXACT_FLOAT:
        return float(value)
    raise _Unsure


def _recall(body: dict[str, Any]) -> dict[str, Any]:
    if "k" in body and "limit" in body:
        raise _Unsure  # pydantic takes `k` and calls `limit` an unknown field
    return {
        "query": _str(body.pop("query", None), 0, MAX_QUERY_CHARS),
        "k": _int(body.pop("k", body.pop("limit", DEFAULT_K)), 1, MAX_RECALL_K),
        "project": _short(body.pop("project", None)),
        "kind": _short(body.pop("kind", None)),
        "source": _short(body.pop("source", None)),
        "since": _timestamp(body.pop("since", None)),
        "budget_chars": _int(body.pop("budget_chars", DEFAULT_BUDGET), 0, MAX_BUDGET),
        "session": _short(body.pop("session", None)),
        "relevant_only": _bool(body.pop("relevant_only", False)),
        "include_superseded": _bool(body.pop("include_superseded", False)),
        "with_global": _bool(body.pop("with_global", True)),
    }


def _inject_report(body: dict[str, Any]) -> dict[str, Any]:
    return {
        "uids": _str_list(body.pop("uids", []), MAX_UIDS, MAX_TAG),
        "harness": _short(body.pop("harness", None)),
        "hook": _short(body.pop("hook", None)),
        "project": _short(body.pop("project", None)),
        "query": _opt_str(body.pop("query", None), 0, MAX_QUERY_CHARS),
        "chars": _int(body.pop("chars", 0), 0, MAX_CHARS),
        "session": _short(body.pop("session", None)),
    }


def _memory_fields(body: dict[str, Any]) -> dict[str, Any]:
    """What a memory carries beside its text (schemas._MemoryFields)."""
    return {
        "kind": _str(body.pop("kind", "fact")),
        "source": _str(body.pop("source", "chat")),
        "project": _opt_str(body.pop("project", None)),
        "tags": _str_list(body.pop("tags", []), MAX_TAGS, MAX_TAG),
        "created_at": _timestamp(body.pop("created_at", None)),
        "session": _short(body.pop("session", None)),
    }


def _ingest_item(body: dict[str, Any]) -> dict[str, Any]:
    return {"content": _str(body.pop("content", None)), **_memory_fields(body),
            "replaces": _opt_str(body.pop("replaces", None), 0, MAX_TAG)}


def _exchange(value: Any) -> SimpleNamespace:
    if type(value) is not dict or set(value) != {"user", "reply"}:
        raise _Unsure
    return SimpleNamespace(user=_str(value["user"]), reply=_str(value["reply"]))


def _ingest_exchange(body: dict[str, Any]) -> dict[str, Any]:
    return {"exchange": _exchange(body.pop("exchange", None)), **_memory_fields(body)}


def _ingest_batch(body: dict[str, Any]) -> dict[str, Any]:
    items = body.pop("items", None)
    if type(items) is not list or not 1 <= len(items) <= MAX_BATCH:
        raise _Unsure
    return {"items": list(items)}  # each item is checked on its own (IngestItem)


PARSERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "RecallRequest": _recall,
    "InjectReport": _inject_report,
    "IngestItem": _ingest_item,
    "IngestExchange": _ingest_exchange,
    "IngestBatch": _ingest_batch,
}


def parse(model_name: str, data: Any) -> SimpleNamespace | None:
    """`data` as the named model's fields, when it is plainly valid; None otherwise (also for
    a model this module does not cover)."""
    parser = PARSERS.get(model_name)
    if parser is None or type(data) is not dict:
        return None
    rest = dict(data)
    try:
        fields = parser(rest)
    except _Unsure:
        return None
    if rest:  # an unknown field: pydantic refuses it by name
        return None
    return SimpleNamespace(**fields)
