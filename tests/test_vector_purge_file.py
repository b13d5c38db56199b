"""A purge leaves no vector of what went in the vector channel's index file.

usearch's `remove` only marks a key removed: `save` (and so a merge) writes the removed vector's
bytes again, and the file stayed a copy of a purged memory's embedding, which matched its text
at cosine 1.0, until a full rebuild. After a purge the file is rebuilt in full: before a
one-off command (`memory-mcp purge`) returns, in the background in a service; an index the
process does not search is removed. Real store, channel and usearch (the table embedder of
tests/test_vector_ann.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("usearch")

from semantic_memory_vector import ann  # noqa: E402
from test_vector_ann import (  # noqa: E402
    N,
    channel_of,
    engine_at,
    indexed_store,
    search,
    uid_of,
)
from usearch.index import Index  # noqa: E402


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return indexed_store(tmp_path, monkeypatch)


def stored_bytes(folder: Path, memory_id: int) -> bytes:
    """The bytes the index file holds for `memory_id`'s vector (i8, as built)."""
    stamp = ann.read_stamp(folder)
    assert stamp is not None and stamp.dtype == "i8"
    index = Index.restore(str(folder / stamp.file), view=True)
    return np.asarray(index.get(memory_id, dtype=np.int8)).tobytes()


def file_holds(folder: Path, data: bytes) -> bool:
    stamp = ann.read_stamp(folder)
    return stamp is not None and (folder / stamp.file).read_bytes().find(data) >= 0


@pytest.mark.parametrize("serving", [False, True], ids=["one-off command", "service"])
def test_a_purged_memorys_vector_leaves_the_index_file(store: Path, monkeypatch,  # noqa: ANN001
                                                       serving: bool) -> None:
    folder = ann.folder_of(str(store / "memory.db"))
    eng = engine_at(store, monkeypatch, serving=serving)
    top = search(eng, "q5")[0][0]
    vector = stored_bytes(folder, top)
    assert file_holds(folder, vector)
    eng.forget(uid_of(eng, top))
    report = eng.purge()
    assert report.soft_deleted == 1 and report.warning is None
    if serving:
        channel_of(eng)._ann.wait(60)
    stamp = ann.read_stamp(folder)
    assert stamp is not None and stamp.count == N - 1 and stamp.removed == 0
    assert not file_holds(folder, vector)
    assert ann.purge_mark(folder) is None
    assert top not in [h[0] for h in search(eng, "q5")]
    eng.close()


def test_a_merge_after_the_purge_does_not_bring_it_back(store: Path,  # noqa: ANN001
                                                        monkeypatch) -> None:
    """A merge (remove + add on a copy of the file) keeps removed bytes too: while a purge's
    mark stands, the service's next build is a full one."""
    monkeypatch.setattr(ann, "MERGE_MIN", 1)
    monkeypatch.setattr(ann, "MERGE_SHARE", 0.0)
    folder = ann.folder_of(str(store / "memory.db"))
    eng = engine_at(store, monkeypatch, serving=True)
    top = search(eng, "q7")[0][0]
    vector = stored_bytes(folder, top)
    eng.forget(uid_of(eng, top))
    assert ann.mark_purged(folder)  # as a purge in another process leaves it
    with eng.store.write() as conn:  # that purge's delete, which this service then sees
        channel_of(eng).forget(conn, [top])
        conn.execute("UPDATE vector_state SET deletes = deletes + 1 WHERE id = 1")
    search(eng, "q7")  # the deletion passes MERGE_MIN: a build starts, in full
    channel_of(eng)._ann.wait(60)
    assert not file_holds(folder, vector) and ann.purge_mark(folder) is None
    eng.close()


def test_an_index_this_process_does_not_search_is_removed(store: Path,  # noqa: ANN001
                                                          monkeypatch) -> None:
    folder = ann.folder_of(str(store / "memory.db"))
    eng = engine_at(store, monkeypatch, mode="off", serving=False)
    top = search(eng, "q2")[0][0]
    eng.forget(uid_of(eng, top))
    assert eng.purge().warning is None
    assert ann.read_stamp(folder) is None and not list(folder.glob("index-*"))
    eng.close()
