"""Contract holes an outside plugin author found (docs/plugins.md "Isolation at run time",
docs/vector.md "A broken embedder" and "Embedding queue"): a hung embedder held the service's
shutdown; a `format_injection` block over its budget was passed on; a `filter_ingest` that
left a memory invalid was refused with a reason blaming the user's text; embedder failures were
logged without naming the embedder, and a NaN or None query vector was described by its shape.

Installed plugins (a module plus a `*.dist-info` with an entry point, on PYTHONPATH) run through
the real `memory-mcp` and a real service; in-process plugins through the engine."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from semantic_memory import testing
from semantic_memory.embedders import Embedder
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import InjectionBlock, NewMemory, RecallHit
from test_plugin_isolation import install
from test_service_support import start_service

#: How long the installed embedder's `embed_documents` hangs: the shutdown is compared with it.
HANG_S = 60.0
DIM = 8


def memory_mcp(tmp_path: Path, site: Path, *args: str, **env: str
               ) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` as a user runs it, with the plugins on `site` and the vector channel."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    environment.update({"PYTHONPATH": str(site), "HOME": str(tmp_path), "MEMORY_PORT": "9",
                        "MEMORY_DB_PATH": str(tmp_path / "memory.db"), "MEMORY_FAST_PATH": "0",
                        "MEMORY_PLUGINS": "bm25_porter,vector," +
                        ",".join(p.stem for p in site.glob("*.py")), **env})
    return subprocess.run([sys.executable, "-c", "from semantic_memory.entry import main; main()",
                           *args], env=environment, capture_output=True, text=True, timeout=120)


#: An embedder plugin whose methods break the way QA_MODE says (empty: they work); its
#: `embed_documents` leaves a file named by QA_STARTED before it hangs.
EMBEDDER = f"""
    import os, time
    from pathlib import Path
    import numpy as np
    from semantic_memory.embedders import Embedder
    from semantic_memory.hookspecs import hookimpl

    MODE = os.environ.get("QA_MODE", "")


    def vector(text):
        v = np.zeros({DIM}, np.float32)
        for word in text.lower().split():
            v[sum(map(ord, word)) % {DIM}] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-12)


    class Quirky(Embedder):
        name = "quirky"
        model_id = "quirky#1"
        dim = {DIM}
        cosine_floor = 0.0

        def embed_documents(self, texts):
            if MODE == "hang":
                Path(os.environ["QA_STARTED"]).write_text("embedding")
                time.sleep({HANG_S})
            if MODE == "raise":
                raise RuntimeError("model fell over")
            return np.stack([vector(t) for t in texts])

        def embed_query(self, text):
            if MODE == "nan":
                return np.full({DIM}, np.nan, np.float32)
            return vector(text)


    @hookimpl
    def register_embedders(register, settings):
        register(Quirky())
"""
QUIRKY = "embedder quirky of plugin quirky (quirky-plugin 0.1)"


# --- a hung embedder and the service's shutdown ----------------------------------------------

def test_a_hung_embedder_holds_neither_the_shutdown_nor_the_memory(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "quirky", EMBEDDER)
    started = tmp_path / "embedding-started"
    service = start_service(tmp_path / "s", PYTHONPATH=str(site), QA_MODE="hang",
                            QA_STARTED=str(started), MEMORY_DISCOVERY_FILE="off",
                            MEMORY_PLUGINS="bm25_porter,vector,quirky")
    try:
        with service.client() as http:
            stored = http.post("/ingest", json={"content": "the nightly parquet export runs "
                                                           "at two", "project": "emb"}).json()
        assert stored["status"] == "new"  # answered at once: the queue embeds it
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), service.stderr()
    finally:
        asked = time.monotonic()
        code = service.stop(timeout=HANG_S + 30)
        took = time.monotonic() - asked
    assert code == 0 and took < HANG_S / 3, (took, service.stderr())
    busy = [line for line in service.stderr().splitlines() if "still busy" in line]
    assert len(busy) == 1 and busy[0].startswith(f"memory-mcp: embedding queue: {QUIRKY} "
                                                 "still busy at shutdown"), busy
    # Nothing acknowledged is lost: the memory is there, found by its words, and waits for
    # its vector (the next start's queue, or backfill, makes it).
    engine = testing.engine_with(tmp_path / "s", InProcess(Moody("")),
                                 plugins="bm25_porter,vector", fast_path=False)
    try:
        assert [h.memory.uid for h in engine.recall("parquet export")] == [stored["uid"]]
        assert engine.embedder_info()["missing"] == 1
        assert engine.backfill()["embedded"] == 1 and engine.embedder_info()["missing"] == 0
    finally:
        engine.close()


# --- format_injection over its budget ---------------------------------------------------------

class Overlong:
    """A formatter answering `size(budget)` characters for a budget."""

    def __init__(self, size: Any) -> None:
        self.size = size

    @hookimpl
    def format_injection(self, query: str, hits: list[RecallHit], budget_chars: int) -> Any:
        return InjectionBlock("Z" * self.size(budget_chars), [h.memory.uid for h in hits])


def test_a_block_over_its_budget_is_skipped_and_the_core_formats(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = testing.engine_with(tmp_path, Overlong(lambda budget: budget * 10),
                                 plugins="bm25_porter")
    try:
        uid = engine.store_one(NewMemory("analytics postgres replication lag")).uid
        hits = engine.recall("postgres replication")
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            block = engine.injection("postgres replication", hits, 600)
        assert block.uids == [uid] and block.text.startswith("<semantic-memory>")
        assert len(block.text) <= 600
        assert [r.getMessage() for r in caplog.records] == [
            "plugin Overlong: format_injection answered a block of 6000 characters, over its "
            "budget of 600; skipped"]
    finally:
        engine.close()
    exact = testing.engine_with(tmp_path / "exact", Overlong(lambda budget: budget),
                                plugins="bm25_porter")
    try:  # a block of exactly its budget is the plugin's to give
        exact.store_one(NewMemory("analytics postgres replication lag"))
        hits = exact.recall("postgres replication")
        assert exact.injection("postgres replication", hits, 600).text == "Z" * 600
    finally:
        exact.close()


def test_recall_block_keeps_to_its_budget_past_an_overlong_plugin(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "overlong", """
        from semantic_memory.hookspecs import hookimpl
        from semantic_memory.models import InjectionBlock

        @hookimpl
        def format_injection(query, hits, budget_chars):
            return InjectionBlock("Z" * (budget_chars * 10), [h.memory.uid for h in hits])
    """)
    stored = memory_mcp(tmp_path, site, "store", "deploys go out tuesday at noon",
                        MEMORY_PLUGINS="bm25_porter,overlong")
    assert stored.returncode == 0, stored.stderr
    shown = memory_mcp(tmp_path, site, "recall", "tuesday at noon", "--block", "900",
                       MEMORY_PLUGINS="bm25_porter,overlong")
    assert shown.returncode == 0, shown.stderr
    assert "tuesday at noon" in shown.stdout and len(shown.stdout.rstrip("\n")) <= 900
    assert "Z" not in shown.stdout
    assert shown.stderr.splitlines() == [
        "plugin overlong (overlong-plugin 0.1): format_injection answered a block of 9000 "
        "characters, over its budget of 900; skipped"]


# --- filter_ingest that leaves the memory invalid --------------------------------------------

class Mangler:
    """A filter that edits the memory into what no store takes, the way `edit` says."""

    def __init__(self, field: str, value: Any) -> None:
        self.field, self.value = field, value

    @hookimpl
    def filter_ingest(self, memory: NewMemory, settings: Any) -> None:
        setattr(memory, self.field, self.value)


@pytest.mark.parametrize(("field", "value", "why"), [
    ("content", None, "content: must be a string"),
    ("content", "   ", "content: must not be empty"),
    ("tags", "notalist", "tags: expected a list of at most 32 strings"),
    ("kind", "not a kind!", "kind: expected a short identifier (letters, digits, _.:-), got "
                            "'not a kind!'")])
def test_a_filter_that_leaves_the_memory_invalid_is_named_for_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: Any,
        why: str) -> None:
    engine = testing.engine_with(tmp_path, Mangler(field, value), plugins="bm25_porter")
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            refused = engine.store_one(NewMemory("x y z"))
        reason = f"plugin Mangler: filter_ingest left the memory invalid ({why}); refused"
        assert (refused.status, refused.reason) == ("rejected", reason)
        assert [r.getMessage() for r in caplog.records] == [reason]
        assert engine.count() == 0
    finally:
        engine.close()


def test_store_names_the_filter_that_left_the_memory_invalid(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "badedit", """
        from semantic_memory.hookspecs import hookimpl

        @hookimpl
        def filter_ingest(memory, settings):
            memory.content = None
    """)
    refused = memory_mcp(tmp_path, site, "store", "x y z", MEMORY_PLUGINS="bm25_porter,badedit")
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        "Error: rejected: plugin badedit (badedit-plugin 0.1): filter_ingest left the memory "
        "invalid (content: must be a string); refused")


def test_an_edit_a_filter_leaves_invalid_is_refused_naming_it(tmp_path: Path) -> None:
    engine = testing.engine_with(tmp_path, plugins="bm25_porter")
    uid = engine.store_one(NewMemory("a calm note")).uid
    engine.close()
    engine = testing.engine_with(tmp_path, Mangler("tags", [1, 2]), plugins="bm25_porter")
    try:
        edited = engine.update(uid, content="a calmer note")
        assert edited.status == "rejected" and edited.reason == (
            "plugin Mangler: filter_ingest left the memory invalid (tags: each tag must be a "
            "string of 1..64 characters); refused")
        assert engine.get(uid).content == "a calm note"
    finally:
        engine.close()


# --- embedder messages -----------------------------------------------------------------------

class Moody(Embedder):
    """Bag-of-words vectors of DIM floats; its query answer breaks the way `mode` says."""

    name = "moody"
    model_id = "quirky#1"  # the installed embedder's tag: reads the vectors it would store
    dim = DIM
    cosine_floor = 0.0

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def embed_documents(self, texts: Any) -> Any:
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text: str) -> Any:
        return {"nan": np.full(DIM, np.nan, np.float32), "inf": np.full(DIM, np.inf),
                "none": None, "text": "not a vector", "short": np.ones(DIM - 1, np.float32),
                "scalar": 0.5}.get(self.mode, self._vector(text))

    @staticmethod
    def _vector(text: str) -> Any:
        v = np.zeros(DIM, np.float32)
        for word in text.lower().split():
            v[sum(map(ord, word)) % DIM] += 1.0
        return v / max(float(np.linalg.norm(v)), 1e-12)


class InProcess:
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    @hookimpl
    def register_embedders(self, register: Any, settings: Any) -> None:
        register(self.embedder)


@pytest.mark.parametrize(("mode", "said"), [
    ("nan", f"answered a query vector of {DIM} floats holding NaN or infinity"),
    ("inf", f"answered a query vector of {DIM} floats holding NaN or infinity"),
    ("none", f"answered None, not a query vector of {DIM} floats"),
    ("text", f"answered str, not a query vector of {DIM} floats"),
    ("scalar", f"answered float, not a query vector of {DIM} floats"),
    ("short", f"answered a query vector of shape ({DIM - 1},), not ({DIM},)")])
def test_a_query_vector_that_cannot_be_searched_says_what_came(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str, said: str) -> None:
    embedder = Moody("")
    engine = testing.engine_with(tmp_path, InProcess(embedder), plugins="bm25_porter,vector",
                                 fast_path=False)
    try:
        uid = engine.store_one(NewMemory("the nightly parquet export")).uid
        embedder.mode = mode
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("nightly parquet export")
        assert [h.memory.uid for h in hits] == [uid] and "vector" not in hits[0].ranks
        assert [r.getMessage() for r in caplog.records] == [
            f"vector: embedder moody {said}; keyword-only for this recall"]
    finally:
        engine.close()


def test_embedding_failures_name_the_embedder_its_plugin_and_distribution(
        tmp_path: Path) -> None:
    site = install(tmp_path / "site", "quirky", EMBEDDER)
    stored = memory_mcp(tmp_path, site, "store", "the nightly parquet export", QA_MODE="raise")
    assert stored.returncode == 0 and stored.stdout.startswith("new ")
    assert stored.stderr.splitlines() == [
        f"vector: {QUIRKY}: embedding 1 memories failed (RuntimeError: model fell over); they "
        "stay keyword-only until the embedding queue or backfill embeds them"]
    refilled = memory_mcp(tmp_path, site, "backfill", QA_MODE="raise")
    assert refilled.returncode == 1
    assert (f"Error: vector: 1 memories could not be embedded: {QUIRKY} raised RuntimeError: "
            "model fell over") in refilled.stderr.splitlines()
    recalled = memory_mcp(tmp_path, site, "recall", "nightly parquet export", QA_MODE="nan")
    assert recalled.returncode == 0 and "parquet" in recalled.stdout
    assert recalled.stderr.splitlines() == [
        f"vector: {QUIRKY} answered a query vector of {DIM} floats holding NaN or infinity; "
        "keyword-only for this recall"]


class Unloadable(Moody):
    """An embedder whose model cannot be loaded: every embedding raises."""

    def embed_documents(self, texts: Any) -> Any:
        raise RuntimeError("model failed to load")


def test_a_backfill_that_stops_counts_every_memory_it_did_not_embed(tmp_path: Path) -> None:
    """A model that fails to load stops the backfill at its first chunk: it said `64 failed of
    100` (one chunk's), where none of the 100 was embedded."""
    embedder = Unloadable("")
    engine = testing.engine_with(tmp_path, InProcess(embedder), plugins="bm25_porter,vector",
                                 fast_path=False, embed_background=False)
    try:
        engine.ingest([NewMemory(f"note {i} about the parquet export") for i in range(100)],
                      batch_is_session=False)
        channel = next(c for c in engine.channels if c.name == "vector")
        result = channel.backfill(engine.store)
    finally:
        engine.close()
    assert (result["embedded"], result["failed"], result["total"]) == (0, 100, 100), result
    assert "model failed to load" in result["reason"]
