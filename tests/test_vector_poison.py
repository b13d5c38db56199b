"""Vectors the channel must not search (docs/vector.md, "A broken embedder", "Edits while the
channel is not loaded"): a batch of the wrong shape, or a row holding NaN, is not stored under
the model's tag; the memory stays keyword-only, counts as missing, and the queue or `backfill`
embeds it once the embedder is fixed. Rows an older version stored that way are left out of
search, never fail it; so is the vector of a text edited while the channel was not loaded.
The real vector channel on real SQLite, with an in-test embedder registered through the plugin
manager."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import embedder_support
import numpy as np
import pytest
from embedder_support import DIM
from semantic_memory import testing
from semantic_memory.models import NewMemory
from semantic_memory.pipeline import MemoryEngine

pytestmark = pytest.mark.sqlite_only


class Letters(embedder_support.Letters):
    """Bag-of-letters vectors; `mode` breaks them: `wrongdim` answers 3 floats too many,
    `nan` answers NaN for texts holding "poison"."""

    def __init__(self) -> None:
        self.mode = ""

    def embed_documents(self, texts: Any) -> Any:
        rows = super().embed_documents(texts)
        if self.mode == "wrongdim":
            return np.hstack([rows, np.zeros((len(texts), 3), np.float32)])
        if self.mode == "nan":
            rows[[("poison" in t) for t in texts]] = np.nan
        return rows


def engine(tmp_path: Path, embedder: Letters, **settings: Any) -> MemoryEngine:
    return testing.engine_with(tmp_path, embedder_support.Plugin(embedder),
                               plugins="bm25_porter,vector", fast_path=False, dedup_sim=0.0,
                               **settings)


def missing(eng: MemoryEngine) -> int:
    return int(eng.embedder_info()["missing"])


def test_a_batch_of_the_wrong_shape_or_a_nan_row_is_not_stored_and_backfill_mends_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedder = Letters()
    eng = engine(tmp_path, embedder)
    try:
        embedder.mode = "wrongdim"
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            first = eng.store_one(NewMemory("zephyr builds are flaky"))
        assert first.status == "new" and missing(eng) == 1
        assert [r.getMessage() for r in caplog.records] == [
            "vector: embedder letters answered shape (1, 29) for 1 texts, not (1, 26); they "
            "stay keyword-only until the embedding queue or backfill embeds them"]
        embedder.mode = "nan"
        eng.ingest([NewMemory("a poison pill"), NewMemory("quartz clocks tick")])
        assert missing(eng) == 2  # the NaN row alone failed
        embedder.mode = ""  # fixed
        caplog.clear()
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = eng.recall("zephyr builds")
            assert hits[0].memory.uid == first.uid and hits[0].ranks == {"porter": 1}
            assert eng.backfill()["embedded"] == 2 and missing(eng) == 0
            assert "vector" in eng.recall("zephyr builds")[0].ranks
        assert not caplog.records  # no search failed on the way
    finally:
        eng.close()


def test_rows_an_older_version_stored_are_left_out_of_search_not_fatal_to_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    embedder = Letters()
    eng = engine(tmp_path, embedder)
    try:
        good = eng.store_one(NewMemory("zephyr builds are flaky")).uid
        short = eng.get(eng.store_one(NewMemory("zebra crossing ahead")).uid).id
        nan = eng.get(eng.store_one(NewMemory("zenith of the day")).uid).id
        with eng.store.write() as conn:  # as an older version stored them, tagged the model's
            conn.execute("UPDATE memories_vec SET vec = ? WHERE memory_id = ?",
                         (np.ones(DIM + 3, "<f4").tobytes(), short))
            conn.execute("UPDATE memories_vec SET vec = ? WHERE memory_id = ?",
                         (np.full(DIM, np.nan, "<f4").tobytes(), nan))
        reopened = engine(tmp_path, embedder)  # loads the matrix from the table
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = reopened.recall("zephyr flaky builds")
        assert hits[0].memory.uid == good and "vector" in hits[0].ranks
        assert all(np.isfinite(h.score) for h in hits)
        lines = [r.getMessage() for r in caplog.records]
        assert lines == [f"vector: 2 stored vectors are not {DIM} floats or hold NaN or "
                         f"infinity (memory ids {short}, {nan}); left out of search until "
                         "they are embedded again"]
        assert missing(reopened) == 1  # the short one: backfill embeds it again
        assert reopened.backfill()["embedded"] == 1 and missing(reopened) == 0
        reopened.close()
    finally:
        eng.close()


@pytest.mark.parametrize("search", ["matrix", "ann"])
def test_a_text_edited_while_the_channel_was_not_loaded_is_not_found_by_its_old_vector(
        tmp_path: Path, search: str) -> None:
    """`update` in a process with MEMORY_PLUGINS=bm25_porter left the old text's vector,
    tagged like a current one: a query for text no live memory holds found the edited one."""
    embedder = Letters()
    eng = engine(tmp_path, embedder)
    edited = eng.store_one(NewMemory("zephyr builds are flaky on arm64")).uid
    eng.store_one(NewMemory("prefer blue dashboards"))
    eng.close()
    keyword_only = testing.engine_with(tmp_path, plugins="bm25_porter")
    assert keyword_only.update(edited, content="kubernetes cluster upgraded").status == "updated"
    keyword_only.close()
    ann = {"env": {"MEMORY_VECTOR_ANN": "on", "MEMORY_VECTOR_ANN_MIN_ROWS": "0"},
           "serving": True} if search == "ann" else {}
    eng = engine(tmp_path, embedder, **ann)
    try:
        if search == "ann":  # an index built over the stale row serves
            assert next(c for c in eng.channels if c.name == "vector").reindex()["built"]
        assert edited not in [h.memory.uid for h in eng.recall("zephyr flaky arm64")]
        assert missing(eng) == 1  # the queue and backfill embed the new text
        assert eng.backfill()["embedded"] == 1 and missing(eng) == 0
        hit = eng.recall("kubernetes cluster upgraded")[0]
        assert hit.memory.uid == edited and "vector" in hit.ranks
    finally:
        eng.close()


def test_a_table_from_before_rows_kept_their_texts_hash_gets_the_column_and_is_trusted(
        tmp_path: Path) -> None:
    """An older vector table has no content_hash: the channel adds it when it opens (no
    rebuild), and its rows, NULL there, stay searched rather than all embedded again."""
    embedder = Letters()
    eng = engine(tmp_path, embedder)
    uid = eng.store_one(NewMemory("zephyr builds are flaky on arm64")).uid
    with eng.store.write() as conn:
        conn.execute("ALTER TABLE memories_vec DROP COLUMN content_hash")
    eng.close()
    eng = engine(tmp_path, embedder)
    try:
        with eng.store.snapshot() as conn:
            assert conn.execute("SELECT content_hash FROM memories_vec").fetchall() == [(None,)]
        assert missing(eng) == 0
        assert "vector" in eng.recall("zephyr flaky arm64")[0].ranks
        assert eng.recall("zephyr flaky arm64")[0].memory.uid == uid
    finally:
        eng.close()
