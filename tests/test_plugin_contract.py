"""The plugin contract (docs/plugins.md): registration that refuses and explains, isolation of a
faulty channel at run time, the weak verdict, purge notifications, the embedder choice, and
the docs covering every contract member and hookspec."""

from __future__ import annotations

import inspect
import logging
import math
import re
import sqlite3
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from semantic_memory import channels as channel_contract
from semantic_memory import embedders as embedder_contract
from semantic_memory import hookspecs, testing
from semantic_memory.channels import Channel
from semantic_memory.cli import cli
from semantic_memory.config import ConfigError, Settings, SettingsSection
from semantic_memory.embedding_channel import EmbeddingChannel
from semantic_memory.embedders import Embedder, choose_embedder
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import ChannelHit, Memory, NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.plugins import build_plugin_manager

from harness_support import closed_port
from test_service_support import memory_mcp_command, service_env

DOCS = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"


class Tagged(Channel):
    """A small channel with a table of its own: finds memories holding a word it indexed."""

    name = "tagged"

    def __init__(self) -> None:
        self.forgotten: list[int] = []

    def setup(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS tagged (id INTEGER PRIMARY KEY, word TEXT)")

    def index(self, conn: sqlite3.Connection, memories: list[Memory],
              prepared: Any = None) -> None:
        conn.executemany("INSERT INTO tagged VALUES (?, ?)",
                         [(m.id, m.content.split()[0].lower()) for m in memories])

    def search(self, conn: sqlite3.Connection, query: str, k: int, filters: RecallFilters
               ) -> list[ChannelHit]:
        where, params = filters.sql("m")
        rows = conn.execute(f"SELECT t.id FROM tagged t JOIN memories m ON m.id = t.id "
                            f"WHERE t.word = ? AND {where} LIMIT ?",
                            [query.split()[0].lower(), *params, k])
        return [ChannelHit(r[0], 1.0) for r in rows]

    def forget(self, conn: sqlite3.Connection, ids: list[int]) -> None:
        self.forgotten += ids
        conn.executemany("DELETE FROM tagged WHERE id = ?", [(i,) for i in ids])


def plugin_of(*objects: Any, hook: str = "register_channels") -> Any:
    """An in-test plugin registering `objects` through `hook`."""

    class Plugin:
        pass

    def register_channels(register: Any, settings: Any) -> None:
        for obj in objects:
            register(obj)

    def register_embedders(register: Any, settings: Any) -> None:
        for obj in objects:
            register(obj)

    chosen = {"register_channels": register_channels,
              "register_embedders": register_embedders}[hook]
    setattr(Plugin, hook, staticmethod(hookimpl(chosen)))
    return Plugin()


def engine_with(tmp_path: Path, *plugins: Any, **settings: Any) -> MemoryEngine:
    return testing.engine_with(tmp_path, *plugins, **{"plugins": "bm25_porter", **settings})


@pytest.mark.sqlite_only
def test_a_channel_with_its_own_table_survives_purge_and_reused_ids(tmp_path: Path) -> None:
    """The issue's first failure: ids are reused after a purge, and a channel that is not told
    about deletes fails UNIQUE on every later write. `forget` hears of them."""
    channel = Tagged()
    engine = engine_with(tmp_path, plugin_of(channel))
    try:
        first = engine.store_one(NewMemory("alpha is the first")).uid
        doomed = engine.store_one(NewMemory("omega comes last")).uid
        doomed_id = engine.get(doomed).id
        engine.forget(doomed)
        engine.purge()
        assert channel.forgotten == [doomed_id]
        again = engine.store_one(NewMemory("omega again, a new memory"))
        assert again.status == "new" and engine.get(again.uid).id == doomed_id  # id reused
        assert [h.memory.uid for h in engine.recall("omega")] == [again.uid]
        assert [h.memory.uid for h in engine.recall("alpha")] == [first]
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_a_channel_whose_index_raises_is_left_out_of_that_write(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class HalfBroken(Tagged):
        name = "halfbroken"

        def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None:
            super().index(conn, memories)  # wrote a row, then fails: the row must go too
            if any("boom" in m.content for m in memories):
                raise RuntimeError("disk on fire")

    engine = engine_with(tmp_path, plugin_of(HalfBroken()))
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            result = engine.store_one(NewMemory("boom goes the build"))
        assert result.status == "new"
        assert [h.memory.uid for h in engine.recall("build")] == [result.uid]  # porter has it
        lines = [r.getMessage() for r in caplog.records if "halfbroken" in r.getMessage()]
        assert lines and "index failed" in lines[0] and "disk on fire" in lines[0]
        with engine.store.snapshot() as conn:  # its partial row was rolled back
            assert conn.execute("SELECT count(*) FROM tagged").fetchone()[0] == 0
        assert engine.store_one(NewMemory("calm deploy")).status == "new"
        assert [h.memory.content for h in engine.recall("calm")] == ["calm deploy"]
    finally:
        engine.close()


@pytest.mark.parametrize("answer", [[(1, 1.0)], None, "nope", [ChannelHit(1, 1.0), 3]])
def test_a_search_answering_the_wrong_shape_is_left_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, answer: Any) -> None:
    class Wrong(Tagged):
        name = "wrong"
        stores = ("sqlite", "postgresql")

        def setup(self, conn: Any) -> None:
            pass

        def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None:
            pass

        def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
            return answer

    engine = engine_with(tmp_path, plugin_of(Wrong()))
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
        assert [h.memory.uid for h in hits] == [uid] and "wrong" not in hits[0].ranks
        assert any("channel wrong: search answered" in r.getMessage() for r in caplog.records)
    finally:
        engine.close()


def test_registration_refuses_and_names_the_plugins(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Impostor(Tagged):
        name = "porter"  # the real BM25 channel's name

    class Nameless(Tagged):
        name = ""

    class HeavyWeight(Tagged):
        name = "heavy"
        weight = -1.0

    class Raises:
        @hookimpl
        def register_channels(self, register: Any, settings: Any) -> None:
            raise ImportError("missing dependency 'frobnicate'")

    with caplog.at_level(logging.WARNING, "semantic_memory"):
        engine = engine_with(tmp_path, plugin_of(Impostor(), Nameless(), HeavyWeight(),
                                                 "not a channel"), Raises())
    try:
        assert sorted(c.name for c in engine.channels) == ["porter"]
        assert type(engine.channels[0]).__module__ == "semantic_memory_bm25_porter"
        problems = engine.plugin_problems
        assert any("channel 'porter' refused: the name is taken by bm25_porter "
                   "(semantic-memory-bm25-porter" in p for p in problems), problems
        assert any("has no valid name" in p for p in problems)
        assert any("weight must be a number >= 0" in p for p in problems)
        assert any("str is not a semantic_memory.channels.Channel" in p for p in problems)
        assert any("register_channels failed: ImportError: missing dependency" in p
                   for p in problems)
        assert all("\n" not in p for p in problems)  # one line each, never a traceback
        assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) >= 5
        uid = engine.store_one(NewMemory("the rest keeps working")).uid
        assert engine.recall("working")[0].memory.uid == uid
    finally:
        engine.close()


@pytest.mark.parametrize(("member", "value", "why"), [
    ("weight", float("inf"), "weight must be a number >= 0, not inf"),
    ("weight", True, "weight must be a number >= 0, not True"),
    ("score_weight", "heavy", "score_weight must be a number >= 0 or None, not 'heavy'"),
    ("score_weight", float("nan"), "score_weight must be a number >= 0 or None, not nan"),
    ("score_weight", -5, "score_weight must be a number >= 0 or None, not -5"),
    ("fusion_share", 1.5, "fusion_share must be a number within 0..1 or None, not 1.5"),
    ("neighbour_gap", float("-inf"), "neighbour_gap must be a number >= 0 or None, not -inf")])
def test_a_channel_weight_that_fusion_cannot_use_refuses_the_channel(
        tmp_path: Path, member: str, value: Any, why: str) -> None:
    """One NaN or infinity in a weight made every fused score NaN: recall, /health and
    /api/stats answered 500 (JSON has no NaN), the CLI printed `"score": NaN`."""
    channel = Tagged()
    setattr(channel, member, value)
    engine = engine_with(tmp_path, plugin_of(channel))
    try:
        assert engine.plugin_problems == [f"plugin Plugin: channel refused: channel "
                                          f"'tagged': {why}"]
        uid = engine.store_one(NewMemory("zephyr builds are flaky")).uid
        hits = engine.recall("zephyr")
        assert [h.memory.uid for h in hits] == [uid] and hits[0].ranks == {"porter": 1}
        assert math.isfinite(hits[0].score)
    finally:
        engine.close()


@pytest.mark.parametrize(("member", "value", "why"), [
    ("fusion_weight", float("inf"), "fusion_weight must be a number >= 0, not inf"),
    ("fusion_share", float("nan"), "fusion_share must be a number within 0..1, not nan"),
    ("neighbour_gap", "wide", "neighbour_gap must be a number >= 0, not 'wide'"),
    ("cosine_floor", 2.0, "cosine_floor must be a number within -1..1, not 2.0")])
def test_an_embedder_fusion_member_the_vector_channel_cannot_use_refuses_it(
        tmp_path: Path, member: str, value: Any, why: str) -> None:
    """The vector channel takes its weight, share, gap and floor from the embedder, after the
    channel was checked: the embedder's are checked as a channel's are."""
    bad = Letters("letters", "letters#1")
    setattr(bad, member, value)
    engine = engine_with(tmp_path, plugin_of(bad, hook="register_embedders"),
                         plugins="bm25_porter,vector")
    try:
        assert engine.plugin_problems == [f"plugin Plugin: embedder refused: embedder "
                                          f"'letters': {why}"]
        assert engine.embedder is None and engine.recall_mode == "keyword"
    finally:
        engine.close()


def test_a_misspelt_hook_or_bad_signature_refuses_that_plugin_only(tmp_path: Path) -> None:
    class Misspelt:
        @hookimpl
        def register_channel(self, register: Any) -> None:  # no such hook
            pass

    class BadSignature:
        @hookimpl
        def register_channels(self, register: Any, settings: Any, extra: Any) -> None:
            pass

    pm = build_plugin_manager(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter"),
                              [Misspelt(), BadSignature()])
    problems = [str(p) for p in pm.problems]
    assert any("Misspelt" in p and "register_channel is not a semantic_memory hook" in p
               for p in problems), problems
    assert any("BadSignature" in p and "not loaded" in p and "extra" in p for p in problems)
    assert pm.has_plugin("bm25_porter") and not pm.has_plugin("Misspelt")


def test_unknown_plugin_names_in_memory_plugins_are_a_problem(tmp_path: Path) -> None:
    settings = Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter,bm25_portr")
    pm = build_plugin_manager(settings)
    assert re.fullmatch(r"MEMORY_PLUGINS names bm25_portr, which is not installed "
                        r"\(installed: .*bm25_porter.*\)", pm.unmet_allowlist or "")
    assert pm.has_plugin("bm25_porter")  # the names that are installed still load
    assert [str(p).split(" (installed")[0] for p in pm.problems] == [
        "plugin bm25_portr: named in MEMORY_PLUGINS, not installed"]


@pytest.mark.parametrize("args, code", [
    (["--help"], 0), (["--version"], 0), (["recall", "--help"], 0),
    (["--db", "x.db", "plugins"], 0),
    (["doctor"], 1),  # 1: no service runs, which is doctor's own exit code; not 2
    (["stats"], 2), (["recall", "pnpm"], 2), (["plugins-typo"], 2)])
def test_a_stale_memory_plugins_name_stops_only_what_does_not_diagnose_it(
        tmp_path: Path, args: list[str], code: int) -> None:
    """A plugin uninstalled but still named: `--help`, `--version`, `doctor` and `plugins`
    warn and run (the last two show it as a `broken:` line); every other command stops in one
    line with exit code 2, as before."""
    env = {**service_env(tmp_path), "MEMORY_PLUGINS": "bm25_porter,bm25_portr",
           "MEMORY_PORT": str(closed_port()), "HOME": str(tmp_path)}
    done = subprocess.run([*memory_mcp_command(), *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    said = "MEMORY_PLUGINS names bm25_portr, which is not installed (installed: "
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(("Warning: " if code != 2 else "Error: ") + said), done.stderr
    if code == 2:
        assert len(lines) == 1 and not done.stdout
    if args[-1] in ("plugins", "doctor"):
        assert "broken: plugin bm25_portr: named in MEMORY_PLUGINS, not installed" in done.stdout


def test_a_plugin_also_installed_can_be_passed_to_the_engine(tmp_path: Path) -> None:
    """A plugin's own tests pass its module while it is installed (`pip install -e`)."""
    import semantic_memory_bm25_porter

    engine = engine_with(tmp_path, semantic_memory_bm25_porter)
    try:
        assert [c.name for c in engine.channels] == ["porter"] and not engine.plugin_problems
    finally:
        engine.close()


class Letters(Embedder):
    """Bag-of-letters vectors: enough to tell the engine's choice apart."""

    def __init__(self, name: str, model_id: str | None) -> None:
        self.name, self.model_id, self.dim = name, model_id, 26

    def embed_documents(self, texts: Any) -> Any:
        import numpy as np

        return np.stack([self.embed_query(t) for t in texts])

    def embed_query(self, text: str) -> Any:
        import numpy as np

        v = np.zeros(26, np.float32)
        for ch in text.lower():
            if "a" <= ch <= "z":
                v[ord(ch) - 97] += 1
        return v / max(float(np.linalg.norm(v)), 1e-12)


def test_the_embedder_choice_is_explicit() -> None:
    unset, model_a, model_b = Letters("unset", None), Letters("a", "a#1"), Letters("b", "b#1")
    assert choose_embedder([]) == (None, None)
    assert choose_embedder([unset]) == (unset, None)
    # an installed but unconfigured embedder never displaces a configured one
    assert choose_embedder([unset, model_a]) == (model_a, None)
    chosen, problem = choose_embedder([model_a, model_b])
    assert chosen is None and "set MEMORY_EMBEDDER" in (problem or "")
    assert choose_embedder([model_a, model_b], "b") == (model_b, None)
    chosen, problem = choose_embedder([model_a], "c")
    assert chosen is None and "MEMORY_EMBEDDER=c is not installed (installed: a)" == problem


@pytest.mark.parametrize(("embedders", "chosen", "line", "why"), [
    ([("a", "a#1"), ("b", "b#1")], "", "plugin embedders: {}",
     "several embedders have a model configured (a, b): set MEMORY_EMBEDDER"),
    ([("a", "a#1")], "c", "plugin embedders: {}",
     "MEMORY_EMBEDDER=c is not installed (installed: a)"),
    ([("bad name", "a#1")], "", "plugin Plugin: embedder refused: {}",
     "Letters has no valid name (got 'bad name')")])
def test_stats_and_plugins_give_one_reason_for_no_embedder(
        tmp_path: Path, embedders: list[tuple[str, str]], chosen: str, line: str,
        why: str) -> None:
    """`stats` said "no embedder plugin installed" where `plugins` asked for MEMORY_EMBEDDER."""
    plugin = plugin_of(*(Letters(n, m) for n, m in embedders), hook="register_embedders")
    engine = engine_with(tmp_path, plugin, plugins="bm25_porter,vector", embedder=chosen)
    try:
        assert engine.embedder is None and engine.plugin_problems == [line.format(why)]
        reason = why if line.startswith("plugin embedders") else \
            f"the embedder was refused ({why})"
        assert engine.stats()["embedder"]["reason"] == reason
        assert engine.backfill()["channels"]["vector"]["reason"] == reason
    finally:
        engine.close()


class Moody(Letters):
    """An embedder whose model members misbehave as `member` and `value` say (a property
    that raises, or an answer of the wrong type)."""

    def __init__(self, member: str, value: Any) -> None:
        super().__init__("moody", "moody#1")
        self.member, self.value = member, value

    def __getattribute__(self, name: str) -> Any:
        if name != "member" and name == object.__getattribute__(self, "member"):
            value = object.__getattribute__(self, "value")
            if isinstance(value, Exception):
                raise value
            return value
        return object.__getattribute__(self, name)


@pytest.mark.parametrize(("member", "value", "why"), [
    ("model_id", RuntimeError("model_id boom"),
     "reading model_id failed: RuntimeError: model_id boom"),
    ("dim", RuntimeError("no dim yet"), "reading dim failed: RuntimeError: no dim yet"),
    ("available", KeyError("gpu"), "reading available failed: KeyError: 'gpu'"),
    ("model_id", 7, "model_id must be a str or None, not 7"),
    ("dim", "sixty-four", "dim must be an int > 0 with a model configured, not 'sixty-four'"),
    ("available", "yes", "available must be a bool, not 'yes'")])
def test_an_embedder_whose_model_members_misbehave_is_refused_in_one_line(
        tmp_path: Path, member: str, value: Any, why: str) -> None:
    good = Letters("letters", "letters#1")
    engine = engine_with(tmp_path, plugin_of(Moody(member, value), good,
                                             hook="register_embedders"),
                         plugins="bm25_porter,vector")
    try:
        assert engine.plugin_problems == [f"plugin Plugin: embedder refused: embedder "
                                          f"'moody': {why}"]
        assert engine.embedder is good and engine.recall_mode == "hybrid"
        uid = engine.store_one(NewMemory("zephyr builds are flaky")).uid
        assert engine.recall("zephyr")[0].memory.uid == uid
        assert engine.stats()["embedder"]["vectorized"] == 1  # the good one embedded it
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_weak_hits_found_by_no_other_channel_are_dropped(tmp_path: Path) -> None:
    class Weak(Tagged):
        name = "weakling"

        def search(self, conn: Any, query: str, k: int, filters: RecallFilters
                   ) -> list[ChannelHit]:
            rows = conn.execute("SELECT id FROM memories WHERE deleted = 0 ORDER BY id")
            return [ChannelHit(r[0], 1.0, weak=True) for r in rows][:k]

    engine = engine_with(tmp_path, plugin_of(Weak()))
    try:
        keyword = engine.store_one(NewMemory("deploy on fridays")).uid
        engine.store_one(NewMemory("lunch menu"))
        hits = engine.recall("deploy")
        assert [h.memory.uid for h in hits] == [keyword]  # the weak-only hit went
        assert set(hits[0].ranks) == {"porter", "weakling"}  # a weak verdict plus a strong one
    finally:
        engine.close()


def test_plugins_command_lists_a_broken_plugin_in_one_line(tmp_path: Path) -> None:
    settings = Settings(db_path=str(tmp_path / "m.db"))
    pm = build_plugin_manager(settings)
    pm.refuse("demo (demo-dist 1.0)", "not loaded: ImportError: No module named 'x'")
    assert str(pm.problems[-1]) == ("plugin demo (demo-dist 1.0): not loaded: ImportError: "
                                    "No module named 'x'")


# --- the docs cover the contract -----------------------------------------------------------

def _members(cls: type) -> set[str]:
    own = {n for n in vars(cls) if not n.startswith("_")}
    return own | {n for n in getattr(cls, "__annotations__", {}) if not n.startswith("_")}


@pytest.mark.parametrize("cls", [channel_contract.Channel, channel_contract.Prepares,
                                 channel_contract.Confident, channel_contract.Backfills,
                                 channel_contract.Deferrable, channel_contract.TransfersVectors,
                                 EmbeddingChannel, embedder_contract.Embedder,
                                 SettingsSection])
def test_every_contract_member_is_documented(cls: type) -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert f"`{cls.__name__}`" in text, cls.__name__
    missing = [m for m in sorted(_members(cls)) if f"`{m}" not in text]
    assert not missing, f"{cls.__name__}: undocumented in docs/plugins.md: {missing}"


def test_every_hookspec_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    specs = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
             if hasattr(f, "semantic_memory_spec")]
    assert len(specs) >= 8
    assert not [s for s in specs if not re.search(rf"`{s}\b", text)]


# --- the test kit, as a plugin's own repository uses it ------------------------------------

def test_the_test_kit_fixtures_run_a_plugin_end_to_end(
        memory_engine: Any, memory_service: Any, memory_hook: Any, tmp_path: Path) -> None:
    channel = Tagged()
    engine = memory_engine(plugin_of(channel), plugins="bm25_porter")
    uid = engine.store_one(NewMemory("zephyr builds are flaky")).uid
    assert engine.recall("zephyr")[0].ranks.keys() == {"porter", "tagged"}
    assert engine.get(uid) is not None
    service = memory_service(MEMORY_PLUGINS="bm25_porter,claude_code")
    status, body = service.request("POST", "/ingest", {"items": [
        {"content": "Remember: the staging db is on port 5433", "project": "kit"}]})
    assert status == 200 and body["results"][0]["status"] == "new"
    status, body = service.request("POST", "/ingest", {"items": "not a list"})
    assert status == 422 and body  # a clear 4xx with a message
    done = memory_hook("claude-code", "UserPromptSubmit", {
        "session_id": "kit-1", "prompt": "which port is the staging db on?",
        "cwd": str(tmp_path), "hook_event_name": "UserPromptSubmit"}, service.env)
    assert done.returncode == 0, done.stderr


def docs_example() -> Any:
    """The worked channel example of docs/plugins.md, as a module."""
    import types

    text = DOCS.read_text(encoding="utf-8")
    code = re.search(r"### Worked example.*?```python\n(.*?)```", text, re.S)
    assert code, "docs/plugins.md lost its worked example"
    module = types.ModuleType("first_word_channel")
    exec(compile(code.group(1), "docs/plugins.md", "exec"), module.__dict__)  # noqa: S102
    return module


@pytest.mark.sqlite_only
def test_the_docs_example_survives_restart_purge_uninstall_and_reinstall(tmp_path: Path) -> None:
    example = docs_example()
    engine = engine_with(tmp_path, example)
    first = engine.store_one(NewMemory("zephyr builds are flaky on arm")).uid
    doomed = engine.store_one(NewMemory("quartz migration is done")).uid
    assert engine.recall("zephyr")[0].ranks.keys() == {"porter", "first_word"}
    engine.close()
    engine = engine_with(tmp_path, example)  # a restart: setup runs again
    engine.forget(doomed)
    engine.purge()  # hard-deletes it: its id will be reused
    again = engine.store_one(NewMemory("quartz is back, a new memory"))
    assert again.status == "new"
    assert [h.memory.uid for h in engine.recall("quartz")] == [again.uid]
    engine.close()
    engine = engine_with(tmp_path)  # uninstalled: its table stays, untouched
    while_gone = engine.store_one(NewMemory("zephyr again while uninstalled")).uid
    engine.close()
    engine = engine_with(tmp_path, example)  # reinstalled
    try:
        assert engine.store_one(NewMemory("zephyr third note")).status == "new"
        found = [h.memory.uid for h in engine.recall("zephyr", k=5)]
        assert first in found and while_gone in found  # porter finds what it missed
        assert not engine.plugin_problems
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_the_docs_example_keeps_no_row_of_a_memory_purged_while_it_was_not_loaded(
        tmp_path: Path) -> None:
    """SQLite hands a purged highest id out again: a row the channel kept for it would make
    the new memory answer the purged one's text (its table references memories(id) ON DELETE
    CASCADE, docs/plugins.md "While a channel is not loaded")."""
    example = docs_example()
    engine = engine_with(tmp_path, example)
    doomed = engine.store_one(NewMemory("quartz migration is done")).uid
    doomed_id = engine.get(doomed).id
    engine.close()
    engine = engine_with(tmp_path)  # not loaded
    engine.forget(doomed)
    engine.purge()
    reused = engine.store_one(NewMemory("revenue figures for acme"))
    assert engine.get(reused.uid).id == doomed_id
    engine.close()
    engine = engine_with(tmp_path, example)
    try:
        assert engine.recall("quartz") == []
    finally:
        engine.close()


def test_trace_hooks_covers_channel_calls(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    engine = engine_with(tmp_path, trace_hooks=True)
    try:
        engine.store_one(NewMemory("traced write"))
        engine.recall("traced")
        err = capfd.readouterr().err
        assert "channel porter.index(1 memories)" in err
        assert re.search(r"channel porter\.search\(k=\d+\) [0-9.]+ ms", err)
    finally:
        engine.close()


def test_an_inactive_vector_channel_leaves_ingest_on_the_batch_path(
        tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    """Issue #25: installed without a model, the vector channel costs ingest nothing: a batch
    is indexed in one call per channel, not memory by memory (bench/inactive_channel.py)."""
    engine = engine_with(tmp_path, plugins="bm25_porter,vector,llama_cpp", model_path="",
                         trace_hooks=True)
    try:
        assert engine.recall_mode == "keyword"
        capfd.readouterr()
        engine.ingest([NewMemory(f"note number {i}") for i in range(10)])
        err = capfd.readouterr().err
        assert err.count("channel porter.index(10 memories)") == 1
        assert "channel porter.index(1 memories)" not in err
    finally:
        engine.close()


def test_a_broken_or_untyped_harness_adapter_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`doctor`, `install` and `plugins` list adapters through harness/registry.py: a plugin
    whose register_harnesses raises, or that registers something that is not a
    HarnessAdapter, is left out with one line; the installed adapters still load."""
    import semantic_memory.plugins as plugins_module
    from semantic_memory.harness import registry

    class Raises:
        @hookimpl
        def register_harnesses(self, register: Any) -> None:
            raise RuntimeError("adapter exploded")

    class Untyped:
        @hookimpl
        def register_harnesses(self, register: Any) -> None:
            register(object())

    original = plugins_module.build_plugin_manager
    monkeypatch.setattr(plugins_module, "build_plugin_manager",
                        lambda settings, extra=(): original(settings, [Raises(), Untyped()]))
    lines: list[str] = []
    adapters = registry.all_adapters(
        Settings(db_path=str(tmp_path / "m.db"), plugins="claude_code"), lines)
    assert "claude-code" in adapters
    assert any("register_harnesses failed: RuntimeError: adapter exploded" in line
               for line in lines), lines
    assert any("object is not a semantic_memory.harness.HarnessAdapter" in line
               for line in lines), lines
    assert all("\n" not in line for line in lines)


def test_a_trylast_adapter_cannot_take_an_installed_harness_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pluggy calls a `trylast` implementation's hook first in its list: a later plugin would
    have registered `claude-code` before the installed adapter did."""
    import semantic_memory.plugins as plugins_module
    from semantic_memory.harness import registry
    from semantic_memory.harness.adapter import HarnessAdapter

    class Impostor(HarnessAdapter):
        name = "claude-code"

    class Late:
        @hookimpl(trylast=True)
        def register_harnesses(self, register: Any) -> None:
            register(Impostor())

    original = plugins_module.build_plugin_manager
    monkeypatch.setattr(plugins_module, "build_plugin_manager",
                        lambda settings, extra=(): original(settings, [Late()]))
    lines: list[str] = []
    adapters = registry.all_adapters(
        Settings(db_path=str(tmp_path / "m.db"), plugins="claude_code"), lines)
    assert not isinstance(adapters["claude-code"], Impostor)
    assert lines == ["plugin Late: harness adapter 'claude-code' refused: the name is taken by "
                     f"claude_code (semantic-memory-claude-code "
                     f"{metadata.version('semantic-memory-claude-code')})"]


def test_the_docs_settings_section_reads_checks_and_stops_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    text = DOCS.read_text(encoding="utf-8")
    code = re.search(r"## Settings.*?```python\n(.*?)```", text, re.S)
    assert code, "docs/plugins.md lost its settings example"
    module = types.ModuleType("recency_settings")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # as an imported module is
    exec(compile(code.group(1), "docs/plugins.md", "exec"), module.__dict__)  # noqa: S102
    section = module.RecencySettings
    env = {"MEMORY_RECENCY_HALF_LIFE_DAYS": "7.5", "MEMORY_DB_PATH": str(tmp_path / "m.db")}
    assert Settings.from_env(env).section(section).half_life_days == 7.5
    assert Settings(env={}).section(section).half_life_days == 30.0  # the default
    assert section.variable("half_life_days") == "MEMORY_RECENCY_HALF_LIFE_DAYS"
    with pytest.raises(ConfigError, match="MEMORY_RECENCY_HALF_LIFE_DAYS: cannot use 'soon'"):
        section.from_env({"MEMORY_RECENCY_HALF_LIFE_DAYS": "soon"})

    class Recency(Channel):
        name = "recency"

        def __init__(self, own: Any) -> None:
            self.own = own

        def index(self, conn: Any, memories: Any, prepared: Any = None) -> None:
            pass

        def search(self, conn: Any, query: str, k: int, filters: Any) -> list[ChannelHit]:
            return []

    class Plugin:
        @hookimpl
        def register_channels(self, register: Any, settings: Settings) -> None:
            register(Recency(settings.section(section)))

    bad = Settings.from_env({**env, "MEMORY_RECENCY_HALF_LIFE_DAYS": "0", "MEMORY_PLUGINS": "none"})
    with pytest.raises(ConfigError, match="MEMORY_RECENCY_HALF_LIFE_DAYS must be > 0, not 0.0"):
        MemoryEngine(bad, plugins=[Plugin()])
    result = CliRunner().invoke(cli, ["stats"], obj=None, env={
        "MEMORY_DB_PATH": str(tmp_path / "cli.db"), "MEMORY_VECTOR_ANN_MIN_ROWS": "-1"})
    assert result.exit_code == 2 and result.output.strip().splitlines() == [
        "Error: MEMORY_VECTOR_ANN_MIN_ROWS must be within 0..1000000000, not -1"]
