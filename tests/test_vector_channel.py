"""The vector channel inside the engine, with the real MiniLM GGUF (tests/models.py): hybrid vs
BM25-only semantics, the in-memory matrix kept in step with the db, model tags, backfill,
near-duplicate dedup, the cosine floor, the telemetry boost, the keyword fast path."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("llama_cpp")

from semantic_memory.channels import Channel, Prepares  # noqa: E402
from semantic_memory.config import Settings  # noqa: E402
from semantic_memory.models import NewMemory, RecallFilters  # noqa: E402
from semantic_memory.pipeline import MemoryEngine  # noqa: E402
from semantic_memory.hookspecs import hookimpl  # noqa: E402
from semantic_memory_vector.matrix import VectorMatrix  # noqa: E402

PLUGINS = "bm25_porter,bm25_trigram,vector,llama_cpp"
PARAPHRASE = "Rotate the database credentials every ninety days."
QUERY = "How often should DB passwords be changed?"
UNRELATED = [
    "My grandmother's apple pie recipe uses cinnamon and nutmeg.",
    "The football match was postponed because of heavy rain.",
    "Bob adopted a grey kitten named Pixel last spring.",
    "The office plants need watering on Mondays.",
]


def make_settings(tmp_path: Path, model: Path | str = "", **kw: Any) -> Settings:
    base: dict[str, Any] = dict(db_path=str(tmp_path / "memory.db"), model_path=str(model),
                                device="cpu", plugins=PLUGINS, recall_min_cosine=0.25)
    base.update(kw)
    return Settings(**base)


@pytest.fixture
def hybrid(tmp_path: Path, minilm_path: Path) -> Iterator[MemoryEngine]:
    eng = MemoryEngine(make_settings(tmp_path, minilm_path, fast_path=False))
    yield eng
    eng.close()


def vector_of(engine: MemoryEngine) -> Any:
    return next(c for c in engine.channels if c.name == "vector")


def contents(hits: list) -> list[str]:  # noqa: ANN001
    return [h.memory.content for h in hits]


# --- semantics ----------------------------------------------------------------------------------

def test_paraphrase_recalled_in_hybrid_not_in_bm25_only(tmp_path: Path,
                                                        minilm_path: Path) -> None:
    hybrid = MemoryEngine(make_settings(tmp_path / "h", minilm_path, fast_path=False))
    bm25 = MemoryEngine(make_settings(tmp_path / "b"))  # no model configured
    for engine in (hybrid, bm25):
        engine.ingest([NewMemory(PARAPHRASE)] + [NewMemory(u) for u in UNRELATED])
    got = hybrid.recall(QUERY, 5)
    assert contents(got)[0] == PARAPHRASE  # no shared keyword: only the vector finds it
    assert got[0].ranks == {"vector": 1} and got[0].signals["cosine"] > 0.4
    assert PARAPHRASE not in contents(bm25.recall(QUERY, 5))
    assert bm25.embedder_info()["mode"] == "bm25-only"
    assert "MEMORY_MODEL_PATH" in bm25.embedder_info()["reason"]
    hybrid.close()
    bm25.close()


def test_paraphrase_beats_unrelated(hybrid: MemoryEngine) -> None:
    hybrid.ingest([NewMemory(u) for u in UNRELATED] + [NewMemory(PARAPHRASE)])
    with hybrid.store.snapshot() as conn:
        hits = vector_of(hybrid).search(conn, QUERY, 10, RecallFilters())
    ranked = [h.id for h in hits]
    paraphrase_id = hybrid.list(RecallFilters(), 1)[0].id
    assert ranked[0] == paraphrase_id
    assert hits[0].score > hits[1].score + 0.25


def test_cosine_floor_drops_weak_vector_only_hits_keyword_hits_pass(tmp_path: Path,
                                                                    minilm_path: Path) -> None:
    eng = MemoryEngine(make_settings(tmp_path, minilm_path, fast_path=False,
                                     recall_min_cosine=0.45))
    # One by one: a batch is a session, and a hit would bring its batch neighbours along.
    for text in [*UNRELATED, "passwords live in the vault"]:
        eng.store_one(NewMemory(text))
    hits = eng.recall(QUERY, 10)
    assert "passwords live in the vault" in contents(hits)  # keyword hit passes whatever cosine
    for h in hits:
        if set(h.ranks) == {"vector"}:
            assert h.signals["cosine"] >= 0.45
    assert not set(contents(hits)) & set(UNRELATED)  # nearest-of-the-irrelevant dropped
    vector_of(eng).configured_floor = 0.0  # MEMORY_RECALL_MIN_COSINE=0: floor off
    assert set(UNRELATED) <= set(contents(eng.recall(QUERY, 10)))
    vector_of(eng).configured_floor = -1.0  # default: the model's floor
    assert eng.embedder.cosine_floor == 0.25  # MiniLM (bert); Qwen3 gets the spec's 0.45
    hits = eng.recall(QUERY, 10)
    assert not set(contents(hits)) & set(UNRELATED)
    assert all(set(h.signals) <= {"cosine"} for h in hits)  # no internal signal leaks
    eng.close()


def test_telemetry_boost_composes_with_vector_hits(hybrid: MemoryEngine) -> None:
    hybrid.ingest([NewMemory(PARAPHRASE), NewMemory("Change the database password quarterly.")])
    before = hybrid.recall(QUERY, 2)
    second = before[1].memory
    for _ in range(3):
        hybrid.record_injection(uids=[second.uid])
    after = hybrid.recall(QUERY, 2)
    boosted = next(h for h in after if h.memory.uid == second.uid)
    assert boosted.signals["injections"] == 3.0 and "cosine" in boosted.signals
    assert boosted.score == pytest.approx(before[1].score * (1 + 0.15 * np.log1p(3)), rel=1e-6)


# --- matrix in step with the db ----------------------------------------------------------------

def test_matrix_updates_on_write_without_rereading(hybrid: MemoryEngine, monkeypatch) -> None:  # noqa: ANN001
    channel = vector_of(hybrid)
    hybrid.ingest([NewMemory(u) for u in UNRELATED])
    hybrid.recall("kitten", 3)  # first search loads the matrix
    loads: list[Any] = []
    original = channel._load
    monkeypatch.setattr(channel, "_load", lambda *a, **kw: loads.append(a) or original(*a, **kw))
    hybrid.ingest([NewMemory(PARAPHRASE)])
    assert contents(hybrid.recall(QUERY, 1)) == [PARAPHRASE]
    hybrid.recall(QUERY, 1)
    assert loads == []  # own write applied from memory; no BLOB re-read per query
    assert len(channel._matrix) == 5


def test_other_writers_deletes_and_forget_are_seen(tmp_path: Path, minilm_path: Path) -> None:
    settings = make_settings(tmp_path, minilm_path, fast_path=False)
    a, b = MemoryEngine(settings), MemoryEngine(settings)  # two processes on one db
    a.ingest([NewMemory(u) for u in UNRELATED])
    a.recall("kitten", 3)
    b.ingest([NewMemory(PARAPHRASE)])
    assert contents(a.recall(QUERY, 1)) == [PARAPHRASE]  # a's matrix picked up b's write
    uid = a.recall(QUERY, 1)[0].memory.uid
    assert a.forget(uid)
    assert PARAPHRASE not in contents(a.recall(QUERY, 5))  # soft delete: filtered at once
    a.purge()  # hard delete cascades to the vector row -> reload
    assert len(vector_of(a).sync(a.store.read())) == len(UNRELATED)
    a.close()
    b.close()


def test_project_and_kind_filters(hybrid: MemoryEngine) -> None:
    hybrid.ingest([NewMemory(PARAPHRASE, project="alpha"),
                   NewMemory("Change the database password quarterly.", project="beta",
                             kind="decision")]
                  + [NewMemory(f"{u} ({i})", project="beta") for i, u in enumerate(UNRELATED * 20)])
    hits = hybrid.recall(QUERY, 3, RecallFilters(project="alpha"))
    assert contents(hits) == [PARAPHRASE]
    hits = hybrid.recall(QUERY, 3, RecallFilters(kind="decision"))
    assert contents(hits) == ["Change the database password quarterly."]


def test_vector_matrix_unit() -> None:
    m = VectorMatrix(3)
    m.upsert([1, 2, 3], np.eye(3, dtype=np.float32))
    assert [i for i, _ in m.top(np.array([0, 1, 0], np.float32), 3)][0] == 2
    m.upsert([2], np.array([[1, 0, 0]], np.float32))  # replace in place
    assert len(m) == 3 and m.top(np.array([0, 1, 0], np.float32), 1)[0][1] == 0.0
    m.remove([1])
    assert len(m) == 2 and m.get(1) is None and m.get(3) is not None
    ids = np.array([3], dtype=np.int64)
    assert m.top(np.array([0, 0, 1], np.float32), 5, ids=ids) == [(3, 1.0)]
    big = VectorMatrix(2)
    big.upsert(list(range(5000)), np.ones((5000, 2), np.float32))
    assert len(big) == 5000 and len(big.top(np.ones(2, np.float32), 10)) == 10


# --- model tags, model change, backfill, BM25-only reasons -------------------------------------

def test_model_change_never_compares_old_vectors_until_backfill(tmp_path: Path, minilm_path: Path,
                                                                qwen3_path: Path) -> None:
    first = MemoryEngine(make_settings(tmp_path, minilm_path, fast_path=False))
    first.ingest([NewMemory(PARAPHRASE)] + [NewMemory(u) for u in UNRELATED])
    first.close()
    second = MemoryEngine(make_settings(tmp_path, qwen3_path, fast_path=False,
                                        recall_min_cosine=0.0,
                                        env={"MEMORY_EMBED_N_CTX": "256"}))
    channel = vector_of(second)
    with second.store.snapshot() as conn:
        assert channel.search(conn, QUERY, 5, RecallFilters()) == []  # 384-d rows ignored
    info = second.embedder_info()
    assert info["missing"] == 5 and info["other_model_vectors"] == 5 and info["dim"] == 64
    seen: list[tuple[int, int]] = []
    result = second.backfill(progress=lambda done, total: seen.append((done, total)))
    assert result["embedded"] == 5 and seen[0] == (0, 5) and seen[-1] == (5, 5)
    assert second.embedder_info()["missing"] == 0
    with second.store.snapshot() as conn:
        assert len(channel.search(conn, QUERY, 5, RecallFilters())) == 5
    tags = second.store.read().execute("SELECT DISTINCT model, dim FROM memories_vec").fetchall()
    assert tags == [(second.embedder.model_id, 64)]
    second.close()


def test_bm25_only_when_model_fails_to_load(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 7)
    eng = MemoryEngine(make_settings(tmp_path, bad))
    assert eng.ingest([NewMemory("passwords rotate quarterly")])[0].status == "new"
    assert contents(eng.recall("passwords", 3)) == ["passwords rotate quarterly"]
    info = eng.embedder_info()
    assert info["active"] is False and info["mode"] == "bm25-only" and info["reason"]
    assert eng.backfill()["embedded"] == 0
    eng.close()


def test_vector_gap_then_backfill(tmp_path: Path, minilm_path: Path) -> None:
    plain = MemoryEngine(make_settings(tmp_path))  # written while no model was configured
    plain.ingest([NewMemory(PARAPHRASE)] + [NewMemory(u) for u in UNRELATED])
    plain.close()
    eng = MemoryEngine(make_settings(tmp_path, minilm_path, fast_path=False))
    assert PARAPHRASE not in contents(eng.recall(QUERY, 5))
    assert eng.embedder_info()["missing"] == 5
    assert eng.backfill()["embedded"] == 5
    assert contents(eng.recall(QUERY, 1)) == [PARAPHRASE]
    eng.close()


def stored_without_a_model(tmp_path: Path) -> None:
    """The UNRELATED memories in tmp_path's db, written before any model was configured."""
    plain = MemoryEngine(make_settings(tmp_path))
    plain.ingest([NewMemory(u) for u in UNRELATED])
    plain.close()


def cli_with_model(tmp_path: Path, model: Path, monkeypatch) -> Any:  # noqa: ANN001
    """The `memory-mcp` group over tmp_path's db with `model` configured, its plugins'
    commands (backfill, reindex) added."""
    from semantic_memory.cli import cli
    from semantic_memory.plugins import build_plugin_manager

    for key, value in {"MEMORY_DB_PATH": str(tmp_path / "memory.db"), "MEMORY_DEVICE": "cpu",
                       "MEMORY_MODEL_PATH": str(model), "MEMORY_PLUGINS": PLUGINS}.items():
        monkeypatch.setenv(key, value)
    build_plugin_manager(Settings.from_env()).hook.register_commands(cli=cli)
    return cli


def test_backfill_cli_shows_progress_and_result(tmp_path: Path, minilm_path: Path,
                                                monkeypatch) -> None:  # noqa: ANN001
    from click.testing import CliRunner

    stored_without_a_model(tmp_path)
    cli = cli_with_model(tmp_path, minilm_path, monkeypatch)
    result = CliRunner().invoke(cli, ["backfill"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output.strip().splitlines()[-1])["embedded"] == 4
    monkeypatch.setenv("MEMORY_MODEL_PATH", "")
    result = CliRunner().invoke(cli, ["backfill"])
    assert result.exit_code != 0 and "MEMORY_MODEL_PATH" in result.output


def test_stats_says_what_holds_recall_by_meaning_back(tmp_path: Path, minilm_path: Path) -> None:
    """A broken model path, or memories stored before the model, were summed up as
    "by words and meaning" or "until an embedder is set up"."""
    import os
    import subprocess
    import sys

    stored_without_a_model(tmp_path)

    def recall_line(model: str) -> str:
        env = {**os.environ, "MEMORY_DB_PATH": str(tmp_path / "memory.db"),
               "MEMORY_DEVICE": "cpu", "MEMORY_MODEL_PATH": model, "MEMORY_PLUGINS": PLUGINS,
               "COLUMNS": "300"}
        out = subprocess.run([sys.executable, "-m", "semantic_memory", "stats"], env=env,
                             capture_output=True, text=True, timeout=120).stdout
        return next(line for line in out.splitlines() if line.startswith("recall:"))

    assert "the embedder is off (cannot read model" in recall_line(str(tmp_path / "no.gguf"))
    assert f"by meaning for 0 of {len(UNRELATED)} memories: `memory-mcp backfill`" in \
        recall_line(str(minilm_path))


def test_a_model_that_fails_to_load_fails_backfill_and_reindex(tmp_path: Path, minilm_path: Path,
                                                              monkeypatch) -> None:  # noqa: ANN001
    """Half a GGUF file passes the header check, then every embedding fails: backfill said
    `failed` in its JSON and exited 0, reindex built an empty index and exited 0."""
    from click.testing import CliRunner

    half = tmp_path / "half.gguf"
    data = minilm_path.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    stored_without_a_model(tmp_path)
    cli = cli_with_model(tmp_path, half, monkeypatch)
    backfill = CliRunner().invoke(cli, ["backfill"])
    assert backfill.exit_code == 1 and "could not be embedded" in backfill.output
    assert "Traceback" not in backfill.output
    reindex = CliRunner().invoke(cli, ["reindex"])
    assert reindex.exit_code == 1 and "run `memory-mcp backfill` first" in reindex.output
    threads = CliRunner().invoke(cli, ["reindex", "--threads", "-3"])
    assert threads.exit_code == 2 and "--threads" in threads.output


# --- write path: embedding outside the lock, near-duplicate dedup -------------------------------

def test_embedding_runs_outside_the_write_lock(hybrid: MemoryEngine) -> None:
    channel = vector_of(hybrid)
    original = channel.embedder.embed_documents
    held: list[bool] = []

    def spy(texts):  # noqa: ANN001, ANN202
        def try_lock() -> None:
            got = hybrid.store._write_lock.acquire(timeout=0.5)
            held.append(not got)
            if got:
                hybrid.store._write_lock.release()

        probe = threading.Thread(target=try_lock)
        probe.start()
        probe.join()
        return original(texts)

    channel.embedder.embed_documents = spy
    try:
        hybrid.ingest([NewMemory(PARAPHRASE)])
    finally:
        channel.embedder.embed_documents = original
    assert held == [False]  # another thread could take the write lock while we embedded


def test_near_duplicate_dedup_within_a_project(hybrid: MemoryEngine) -> None:
    text = "Alice prefers tabs over spaces in Python files"  # vs "…files!": cosine 0.994
    first = hybrid.store_one(NewMemory(text, project="p"))
    again = hybrid.store_one(NewMemory(text + "!", project="p"))
    assert again.status == "duplicate" and again.uid == first.uid
    assert hybrid.get(first.uid).updated_at >= hybrid.get(first.uid).created_at
    # near-duplicates and exact ones are both per project
    assert hybrid.store_one(NewMemory(text + "!", project="q")).status == "new"
    assert hybrid.store_one(NewMemory(text + " ", project="s")).status == "new"
    batch = hybrid.ingest([NewMemory("Bob deploys on Fridays only", project="r"),
                           NewMemory("BOB DEPLOYS ON FRIDAYS ONLY", project="r")])
    assert [r.status for r in batch] == ["new", "duplicate"]  # within one batch too (MiniLM
    # lowercases: cosine 1.0, while the content hash keeps case)
    distinct = hybrid.store_one(NewMemory("Alice prefers spaces in YAML files", project="p"))
    assert distinct.status == "new"
    vector_of(hybrid).dedup_sim = 0.0  # MEMORY_DEDUP_SIM=0
    assert hybrid.store_one(NewMemory(text + "!!", project="p")).status == "new"  # 0 = off


def test_a_project_recall_with_global_memories_embeds_its_query_once(
        hybrid: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """It searches twice (the project's memories, then the global ones) with one query: the
    model, the dear part with a real embedder, runs once."""
    hybrid.store_one(NewMemory("The web app is deployed to Vercel from main", project="web"))
    shared = hybrid.store_one(NewMemory("Deploying the web app always needs a changelog entry")
                              ).uid
    embedder = vector_of(hybrid).embedder
    calls: list[str] = []
    real = embedder.embed_query
    monkeypatch.setattr(embedder, "embed_query", lambda text: calls.append(text) or real(text))
    hits = hybrid.recall("how is the web app deployed", k=5,
                         filters=RecallFilters(project="web"))
    assert shared in [h.memory.uid for h in hits] and len(calls) == 1
    hybrid.recall("what does a deployment need", k=5, filters=RecallFilters(project="web"))
    assert len(calls) == 2  # a new query is embedded


class DupChannel(Channel, Prepares):
    """An in-test channel using the `Prepares` capability: prepare / find_duplicate /
    index(prepared)."""

    name = "dupcheck"

    def __init__(self) -> None:
        self.prepared_outside: list[bool] = []
        self.indexed: list[tuple[int, Any]] = []

    def setup(self, conn):  # noqa: ANN001, ANN201
        pass

    def prepare(self, memories):  # noqa: ANN001, ANN201
        return [m.content.lower().strip("!. ") for m in memories]

    def find_duplicate(self, conn, memory, prepared):  # noqa: ANN001, ANN201
        for id_, key in self.indexed:
            if key == prepared:
                return id_
        return None

    def index(self, conn, memories, prepared=None):  # noqa: ANN001, ANN201
        self.indexed += [(m.id, p) for m, p in zip(memories, prepared)]

    def search(self, conn, query, k, filters):  # noqa: ANN001, ANN201
        return []


def test_find_duplicate_hook_is_called_by_the_pipeline(tmp_path: Path) -> None:
    channel = DupChannel()

    class Plugin:
        @hookimpl
        def register_channels(self, register, settings):  # noqa: ANN001, ANN201
            register(channel)

    eng = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter"),
                       plugins=[Plugin()])
    results = eng.ingest([NewMemory("Hello World"), NewMemory("hello world!")])
    assert [r.status for r in results] == ["new", "duplicate"]
    assert results[0].uid == results[1].uid and len(channel.indexed) == 1
    eng.close()


# --- keyword fast path ------------------------------------------------------------------------

def test_fast_path_skips_query_embedding_when_keywords_are_confident(tmp_path: Path,
                                                                     minilm_path: Path) -> None:
    eng = MemoryEngine(make_settings(tmp_path, minilm_path, fast_path=True, fast_path_min=0.8))
    eng.ingest([NewMemory("The staging cluster uses kubernetes namespaces per team")]
               + [NewMemory(u) for u in UNRELATED])
    channel = vector_of(eng)
    calls: list[str] = []
    original = channel.embedder.embed_query
    channel.embedder.embed_query = lambda q: calls.append(q) or original(q)
    hits = eng.recall("kubernetes namespaces staging cluster", 3)
    assert contents(hits)[0].startswith("The staging cluster") and calls == []
    assert "vector" not in hits[0].ranks
    eng.recall(QUERY, 3)  # no confident keyword evidence: the query is embedded
    assert calls == [QUERY]
    eng.settings = replace(eng.settings, fast_path=False)
    eng.recall("kubernetes namespaces staging cluster", 3)
    assert len(calls) == 2
    eng.close()
