"""Where every hook run leaves a line: `hooks.jsonl` beside the db file.

Hooks fail open and print nothing harmful, so without this log a dead service or a hook that
times out would be invisible. `memory-mcp doctor` reads it back: the last success and the last
failure of each harness's hooks. One generation of history is kept (`hooks.jsonl.1`).
"""

from __future__ import annotations

import os
import time

from ..lite import dumps
from .settings import beside_db

TYPE_CHECKING = False  # a hook process imports this module: no typing, pathlib or config
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from ..config import Settings
    from .settings import HookSettings

#: The log is rotated when it grows past this many bytes.
MAX_LOG_BYTES = 1_000_000
#: Outcomes a user should see as failures; the others (injected, nothing relevant, stored,
#: refused, skipped) mean the hook did its job. A spooled write is safe, but the service did
#: not take it: doctor shows it beside "service down", not as the last success.
FAILURES = frozenset({"service down", "timeout", "error", "spooled"})


def log_path(settings: Settings | HookSettings) -> Path:
    from pathlib import Path

    return Path(beside_db(settings, "hooks.jsonl"))


def record(settings: Settings | HookSettings, entry: dict[str, Any]) -> None:
    """Append one outcome; never raises (a log problem must not fail the hook)."""
    path = beside_db(settings, "hooks.jsonl")
    line = dumps({"ts": round(time.time(), 3), **entry}) + "\n"
    try:
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, mode=0o700, exist_ok=True)  # the data folder: its owner's
        try:
            if os.stat(path).st_size > MAX_LOG_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            # One write: lines of concurrent hooks stay whole. "replace": the hook input is
            # valid Unicode already (`lite.loads_input`), but an argument need not be.
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass


def entries(settings: Settings | HookSettings) -> Iterator[dict[str, Any]]:
    """Every recorded outcome, oldest first (the rotated generation included)."""
    import json

    path = log_path(settings)
    for file in (path.with_name(path.name + ".1"), path):
        try:
            handle = open(file, encoding="utf-8", errors="replace")
        except OSError:
            continue
        with handle:
            for line in handle:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if isinstance(item, dict):
                    yield item


def latest(settings: Settings | HookSettings) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(harness, event) -> {"success": entry, "failure": entry}, the latest of each. A run
    that skipped (a tool not captured: most tool calls) is the success only until the hook
    does its work: after that, the latest time it did."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for item in entries(settings):
        seen = out.setdefault((str(item.get("harness")), str(item.get("event"))), {})
        side = "failure" if item.get("outcome") in FAILURES else "success"
        if item.get("outcome") == "skipped" and \
                seen.get("success", {}).get("outcome") not in (None, "skipped"):
            continue
        seen[side] = item
    return out
