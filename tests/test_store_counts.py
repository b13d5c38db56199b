"""Counts at any size: `stats`' groups and a page's `count` read indexes, not every row, and
must still equal a count of the memories themselves (forgotten and replaced ones left out, a
forgotten replaced one once); `stats` reuses its groups only while nothing changed; the JSON
export's records and an import's index merge. Both stores."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
import semantic_memory.pipeline as pipeline
from semantic_memory.models import Memory, NewMemory, RecallFilters, iso_exact
from semantic_memory.pipeline import EXPORT_FIELDS, MemoryEngine
from semantic_memory.stores.base import top_values

pytestmark = pytest.mark.both_stores


def _populate(engine: MemoryEngine) -> list[str]:
    """A big project, a small one and global memories, of several kinds and sources; some
    forgotten, some replaced (by the sixth), one both. Returns the uids in order."""
    items = [NewMemory(f"big project note number {i}", project="big",
                       kind=("fact", "decision", "note", "runbook")[i % 4],
                       source=("chat", "tool")[i % 2]) for i in range(24)]
    items += [NewMemory(f"small project note {i}", project="small", kind="fact")
              for i in range(2)]
    items += [NewMemory(f"global note {i}", kind=("preference", "fact")[i % 2],
                        source="import") for i in range(6)]
    uids = [r.uid for r in engine.ingest(items, batch_is_session=False)]
    stored = {m.uid: m for m in engine.store.export(False)}
    big, glob = uids[:24], uids[26:]
    with engine.store.write() as conn:
        engine.store.supersede(conn, [stored[u].id for u in (big[0], big[1], glob[0])], big[5])
    for uid in (big[1], big[2], big[3], glob[1]):  # big[1] is replaced and forgotten
        assert engine.forget(uid)
    return uids


def _current(engine: MemoryEngine, include_superseded: bool = False) -> list[Memory]:
    return [m for m in engine.store.export(False)
            if include_superseded or m.superseded_by is None]


def _expected_stats(engine: MemoryEngine) -> dict[str, Any]:
    current = _current(engine)
    projects = Counter(m.project for m in current)
    return {"by_kind": top_values(dict(Counter(m.kind for m in current))),
            "by_source": top_values(dict(Counter(m.source for m in current))),
            "by_project": top_values(dict(projects), named_only=True),
            "without_project": projects[None], "memories": len(current)}


def _stats(engine: MemoryEngine) -> dict[str, Any]:
    data = engine.stats()
    return {key: data[key] for key in ("by_kind", "by_source", "by_project", "without_project",
                                       "memories")}


def test_stats_groups_count_current_memories_only(engine: MemoryEngine) -> None:
    _populate(engine)
    expected = _expected_stats(engine)
    got = _stats(engine)
    assert got == expected
    assert list(got["by_kind"].items()) == list(expected["by_kind"].items())  # most first
    assert got["by_project"] == {"big": 20, "small": 2} and got["without_project"] == 4
    with engine.store.snapshot() as conn:
        projects = engine.store.value_counts(conn, ("project",))["project"]
        assert top_values(projects) == {"big": 20, "": 4, "small": 2}
        assert top_values(projects, limit=1) == {"big": 20}
        assert projects[None] == 4
        with pytest.raises(ValueError):
            engine.store.value_counts(conn, ("content",))


@pytest.mark.parametrize("filters", [
    RecallFilters(), RecallFilters(project="big"), RecallFilters(project="small"),
    RecallFilters(project="none such"), RecallFilters(global_only=True),
    RecallFilters(kind="fact"), RecallFilters(source="tool"),
    RecallFilters(project="big", kind="note"), RecallFilters(since=0.0),
    RecallFilters(project="big", since=0.0), RecallFilters(include_superseded=True),
    RecallFilters(project="big", include_superseded=True),
    RecallFilters(global_only=True, include_superseded=True),
], ids=repr)
def test_a_count_is_exact_and_at_most_bounds_it(engine: MemoryEngine,
                                                filters: RecallFilters) -> None:
    """Exact whichever way it reads: the small project through its rows, the big one and the
    whole store as all rows less the forgotten and the replaced."""
    _populate(engine)
    expected = sum(
        1 for m in _current(engine, filters.include_superseded)
        if (filters.project is None or m.project == filters.project)
        and (not filters.global_only or m.project is None)
        and (filters.kind is None or m.kind == filters.kind)
        and (filters.source is None or m.source == filters.source)
        and (filters.since is None or m.updated_at >= filters.since))
    assert engine.count(filters) == expected
    for at_most in (0, 1, 3, 1000):
        assert engine.count(filters, at_most=at_most) == min(expected, at_most)


def test_stats_recounts_after_every_kind_of_write(engine: MemoryEngine) -> None:
    uids = _populate(engine)
    assert _stats(engine) == _expected_stats(engine)
    steps = [
        lambda: engine.store_one(NewMemory("a brand new runbook", kind="runbook", project="x")),
        lambda: engine.update(uids[6], kind="decision"),
        lambda: engine.update(uids[7], project="moved"),
        lambda: engine.forget(uids[24]),
        lambda: engine.unsupersede(uids[0]),
        lambda: engine.forget(uids[5]),  # what it replaced is current again
        lambda: engine.purge(),
    ]
    for step in steps:
        assert step()
        assert _stats(engine) == _expected_stats(engine)


def test_stats_reuses_its_groups_only_while_the_store_is_unchanged(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    _populate(engine)
    calls = []
    counts = engine.store.value_counts

    def counted(*args: Any, **kwargs: Any) -> dict[str, dict[str | None, int]]:
        calls.append(1)
        return counts(*args, **kwargs)

    monkeypatch.setattr(engine.store, "value_counts", counted)
    first = engine.stats()
    first["by_kind"]["fact"] = -1  # a caller's change stays in its copy
    assert engine.stats()["by_kind"] == _expected_stats(engine)["by_kind"]
    assert len(calls) == 1
    engine.store_one(NewMemory("one more fact", project="big"))
    assert _stats(engine) == _expected_stats(engine) and len(calls) == 2
    monkeypatch.setattr(pipeline, "STATS_REUSE_S", 0.0)
    engine.stats()
    assert len(calls) == 3


def test_export_records_are_the_memories_fields(engine: MemoryEngine) -> None:
    _populate(engine)
    records = list(engine.export(include_deleted=True))
    memories = list(engine.store.export(True))
    assert len(records) == len(memories) == 32
    for record, memory in zip(records, memories):
        data = memory.to_dict()
        expected = {key: data[key] for key in EXPORT_FIELDS}
        # the times to the microsecond, so an import restores them as they were
        expected["created_at"] = iso_exact(memory.created_at)
        expected["updated_at"] = iso_exact(memory.updated_at)
        if memory.superseded_by is not None:
            expected["superseded_by"] = memory.superseded_by
        if memory.deleted:
            expected["forgotten"] = True
        assert record == expected and list(record) == list(expected)


def test_an_import_merges_the_indexes_only_when_it_is_a_real_share(
        engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    engine.ingest([NewMemory(f"stored note {i}") for i in range(60)], batch_is_session=False)
    merges = []
    monkeypatch.setattr(engine.store, "optimize", lambda vacuum=False: merges.append(1) or [])
    share = math.ceil(pipeline.MERGE_SHARE * 60)
    assert not engine.merge_after_import(share - 1, batch=1)  # a small share
    assert not engine.merge_after_import(share, batch=share + 1)  # less than one batch
    assert merges == []
    assert engine.merge_after_import(share, batch=share)
    assert merges == [1]
