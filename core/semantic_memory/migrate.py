"""`memory-mcp migrate`: copy one store into another (SQLite -> PostgreSQL, or back) and check
that everything arrived.

Memories keep their uid, timestamps (to the microsecond), forgotten state, session and place;
injection reports keep their memories. The target must be empty, so that the counts after the
copy say whether anything was lost. Vectors are not copied: the target's vector channel embeds
what it stores (the same model gives the same vectors), or `memory-mcp backfill` does later.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .models import Memory, NewMemory
from .pipeline import MemoryEngine

BATCH = 1_000


class MigrationError(RuntimeError):
    """The copy cannot start (target not empty) or did not arrive whole."""


def _restore(memory: Memory) -> NewMemory:
    return NewMemory(content=memory.content, kind=memory.kind, source=memory.source,
                     project=memory.project, tags=list(memory.tags),
                     created_at=memory.created_at, session=memory.session, uid=memory.uid,
                     updated_at=memory.updated_at, forgotten=memory.deleted, seq=memory.seq)


def migrate(source: MemoryEngine, target: MemoryEngine,
            progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Copy every memory and injection report of `source` into the empty `target`; returns
    the counts of both and `verified`. Raises MigrationError when the target is not empty or
    the counts differ after the copy."""
    before = target.counts()
    if any(before.values()):
        raise MigrationError(f"the target {target.store.location} is not empty ({before}); "
                             "migrate into a new database")
    expected = source.counts()
    rejected: list[str] = []
    batch: list[NewMemory] = []

    def flush() -> None:
        results = target.ingest(batch, batch_is_session=False)
        rejected.extend(f"{item.uid}: {r.reason}" for item, r in zip(batch, results, strict=True)
                        if r.status == "rejected")
        if progress is not None:
            progress(len(batch))
        batch.clear()

    for memory in source.store.export(include_deleted=True):
        batch.append(_restore(memory))
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    reports: list[dict[str, Any]] = []
    for report in source.store.export_injections():
        reports.append(report)
        if len(reports) >= BATCH:
            target.store.restore_injections(reports)
            reports.clear()
    target.store.restore_injections(reports)
    target.store.optimize()
    copied = target.counts()
    result = {"source": source.store.location, "target": target.store.location,
              "expected": expected, "copied": copied, "verified": copied == expected}
    if rejected:
        result["rejected"] = rejected[:20]
    if copied != expected:
        raise MigrationError(f"counts differ after the copy: expected {expected}, "
                             f"copied {copied}" + (f"; rejected: {rejected[:3]}" if rejected
                                                  else ""))
    return result
