"""A grown flush of an exchange is no near-duplicate of its shorter copy. "Looking at the login
test first." and the same followed by "Done." are 0.99 apart for all-MiniLM-L6-v2 and have the
same details: the near-duplicate step answered the grown copy `duplicate` at ingest, and the
embedding queue (the service's writes) forgot it once its vector came, keeping the shorter
one. Now the grown copy stays and replaces the shorter (supersession). Real MiniLM, both
stores."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from semantic_memory.config import Settings
from semantic_memory.models import NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.both_stores

SHORT = "User: Fix the flaky login test please\nAssistant: Looking at the login test first."
GROWN = SHORT + "\n\nDone."


def flush(engine: MemoryEngine, content: str) -> tuple[str, str]:
    """(status, uid) of `content` stored as a Claude Code flush of session s1 stores it."""
    result = engine.ingest([NewMemory(content, kind="note", source="compaction", project="p",
                                      session="claude-code:s1")])[0]
    return result.status, result.uid  # type: ignore[return-value]


@pytest.mark.parametrize("deferred", [False, True], ids=["at-ingest", "embedding-queue"])
def test_a_grown_flush_is_kept_and_replaces_its_near_duplicate_shorter_copy(
        settings: Settings, minilm_path: Path, deferred: bool) -> None:
    engine = MemoryEngine(replace(settings, model_path=str(minilm_path)))
    try:
        assert engine.writer.deferrable(), engine.plugin_problems
        engine.writer.defer = deferred
        assert flush(engine, SHORT)[0] == "new"
        engine.writer.catch_up(64)
        status, grown = flush(engine, GROWN)
        assert status == "new"
        engine.writer.catch_up(64)
        assert [m.content for m in engine.list(RecallFilters(), limit=10)] == [GROWN]
        assert not engine.get(grown).deleted
        (older,) = [m for m in engine.list(RecallFilters(include_superseded=True), limit=10)
                    if m.uid != grown]
        assert (older.content, older.superseded_by) == (SHORT, grown)
        # the near-duplicate step itself is as it was: a restatement is merged
        twin = engine.ingest([NewMemory(SHORT.upper(), kind="note", source="chat",
                                        project="p")])[0]
        engine.writer.catch_up(64)
        assert twin.status == "duplicate" or engine.get(twin.uid).deleted
    finally:
        engine.close()
