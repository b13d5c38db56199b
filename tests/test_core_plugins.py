"""Plugin discovery, the allowlist, in-test plugins exercising every core hook, tracing."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import replace
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from semantic_memory.keywords import words
from semantic_memory.stores.fts5 import fts_search, or_query
from semantic_memory.cli import cli
from semantic_memory.config import Settings
from semantic_memory.errors import Rejected
from semantic_memory.models import (
    ChannelHit,
    InjectionBlock,
    Memory,
    NewMemory,
    RecallFilters,
    RecallHit,
)
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.channels import Channel
from semantic_memory.hookspecs import hookimpl
from semantic_memory.plugins import build_plugin_manager

pytestmark = pytest.mark.both_stores


def test_installed_channel_plugins_are_discovered_with_their_distributions(
    settings: Settings,
) -> None:
    pm = build_plugin_manager(settings)
    infos = {i.name: i for i in pm.describe()}
    assert infos["bm25_porter"].distribution == "semantic-memory-bm25-porter"
    assert infos["bm25_trigram"].distribution == "semantic-memory-bm25-trigram"
    assert "register_channels" in infos["bm25_porter"].hooks
    assert {"hygiene", "boost", "injection"} <= set(infos)


def test_trigram_absent_recall_still_works(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter"))
    assert [c.name for c in engine.channels] == ["porter"]
    uid = engine.store_one(NewMemory("The cache layer uses Redis streams")).uid
    hits = engine.recall("redis stream")
    assert [h.memory.uid for h in hits] == [uid] and hits[0].ranks == {"porter": 1}
    engine.close()
    # Re-enabling trigram later on the same file indexes what it missed.
    full = MemoryEngine(Settings(db_path=str(tmp_path / "m.db")))
    assert full.recall("Redi")[0].memory.uid == uid
    full.close()


def test_porter_absent_recall_uses_trigram(tmp_path: Path) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_trigram"))
    uid = engine.store_one(NewMemory("The cache layer uses Redis streams")).uid
    assert [h.memory.uid for h in engine.recall("redis")] == [uid]
    engine.close()


class ReverseChannel(Channel):
    """A toy channel: matches memories containing a reversed query word."""

    name = "reverse"
    weight = 1.0
    indexed: list[int]

    def __init__(self) -> None:
        self.indexed = []

    def setup(self, conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS reverse_index (id INTEGER PRIMARY KEY, text TEXT)")

    def index(self, conn: sqlite3.Connection, memories: list[Memory], prepared=None) -> None:
        assert conn.in_transaction  # same transaction as the insert
        conn.executemany("INSERT INTO reverse_index VALUES (?, ?)",
                         [(m.id, m.content[::-1].lower()) for m in memories])
        self.indexed.extend(m.id for m in memories)

    def search(self, conn, query, k, filters) -> list[ChannelHit]:
        where, params = filters.sql("m")
        out = []
        for term in words(query):
            for (id_,) in conn.execute(
                f"SELECT r.id FROM reverse_index r JOIN memories m ON m.id = r.id "
                f"WHERE instr(r.text, ?) AND {where} LIMIT ?", [term, *params, k]):
                out.append(ChannelHit(id_, 1.0))
        return out[:k]


class ReversePlugin:
    def __init__(self) -> None:
        self.channel = ReverseChannel()

    @hookimpl
    def register_channels(self, register, settings):
        register(self.channel)


@pytest.mark.sqlite_only  # its channels are SQLite ones
def test_runtime_plugin_adds_a_channel(settings: Settings) -> None:
    plugin = ReversePlugin()
    engine = MemoryEngine(settings, plugins=[plugin])
    assert "reverse" in [c.name for c in engine.channels]
    uid = engine.store_one(NewMemory("kubernetes")).uid
    assert plugin.channel.indexed == [engine.get(uid).id]
    hits = engine.recall("setenrebuk")  # only the reverse channel can match this
    assert [h.memory.uid for h in hits] == [uid] and hits[0].ranks == {"reverse": 1}
    engine.close()


@pytest.mark.sqlite_only  # its channels are SQLite ones
def test_channels_are_asked_for_the_depth_or_twice_k(settings: Settings) -> None:
    asked: list[int] = []

    class Counting(ReverseChannel):
        def search(self, conn, query, k, filters):
            asked.append(k)
            return super().search(conn, query, k, filters)

    class Plugin:
        @hookimpl
        def register_channels(self, register, settings):
            register(Counting())

    engine = MemoryEngine(replace(settings, recall_depth=50), plugins=[Plugin()])
    try:
        for k in (1, 10, 25, 40):
            engine.recall("anything", k=k)
        assert asked == [50, 50, 50, 80]
    finally:
        engine.close()


def test_a_failing_channel_does_not_break_recall(settings: Settings) -> None:
    class Broken(ReverseChannel):
        name = "broken"

        def search(self, conn, query, k, filters):
            raise RuntimeError("boom")

    class Plugin:
        @hookimpl
        def register_channels(self, register, settings):
            register(Broken())

    engine = MemoryEngine(settings, plugins=[Plugin()])
    engine.store_one(NewMemory("still findable"))
    assert engine.recall("findable")[0].memory.content == "still findable"
    engine.close()


@pytest.mark.parametrize("name", ["aa_broken", "zz_broken"])  # caller's thread, pool thread
def test_a_failing_channel_does_not_break_recall_wherever_it_runs(
    settings: Settings, name: str
) -> None:
    class Broken(ReverseChannel):
        def search(self, conn, query, k, filters):
            raise RuntimeError("boom")

    Broken.name = name

    class Plugin:
        @hookimpl
        def register_channels(self, register, settings):
            register(Broken())

    engine = MemoryEngine(settings, plugins=[Plugin()])
    try:
        engine.store_one(NewMemory("still findable"))
        hit = engine.recall("findable")[0]
        assert hit.memory.content == "still findable" and name not in hit.ranks
    finally:
        engine.close()


@pytest.mark.sqlite_only  # its channels are SQLite ones
def test_cheap_channels_search_at_the_same_time(settings: Settings) -> None:
    """Each waits at a barrier that only opens when both are inside `search` at once: run one
    after the other, the barrier would time out and the channel would fail."""
    barrier = threading.Barrier(2, timeout=10)
    threads: dict[str, int] = {}

    class Meeting(ReverseChannel):
        search_on_caller_thread = True  # a bounded SQLite search, as the built-in ones

        def search(self, conn, query, k, filters):
            threads[self.name] = threading.get_ident()
            barrier.wait()
            return super().search(conn, query, k, filters)

    class First(Meeting):
        name = "meet_a"

    class Second(Meeting):
        name = "meet_b"

        def index(self, conn, memories, prepared=None):  # reads First's table
            pass

    class Plugin:
        @hookimpl
        def register_channels(self, register, settings):
            register(First())
            register(Second())

    engine = MemoryEngine(replace(settings, plugins="none"), plugins=[Plugin()])
    try:
        uid = engine.store_one(NewMemory("kubernetes")).uid
        hits = engine.recall("setenrebuk")
        assert [h.memory.uid for h in hits] == [uid]
        assert hits[0].ranks == {"meet_a": 1, "meet_b": 1}
        assert threads["meet_a"] != threads["meet_b"]
        # a channel's first search runs on a worker (the deadline can only stop waiting for
        # one there); once both have answered within it, one takes the caller's thread
        assert threading.get_ident() not in threads.values()
        assert [h.memory.uid for h in engine.recall("setenrebuk")] == [uid]
        assert threads["meet_a"] != threads["meet_b"]
        assert threading.get_ident() in threads.values()
    finally:
        engine.close()


def test_filter_ingest_can_redact_and_reject(settings: Settings) -> None:
    class Policy:
        @hookimpl
        def filter_ingest(self, memory: NewMemory, settings: Settings) -> None:
            if "classified" in memory.content:
                raise Rejected("classified material")
            memory.content = memory.content.replace("ACME", "[client]")

    engine = MemoryEngine(settings, plugins=[Policy()])
    results = engine.ingest([NewMemory("ACME wants dark mode"), NewMemory("classified plan")])
    assert results[0].status == "new"
    assert results[1].status == "rejected" and results[1].reason == "classified material"
    assert [m.content for m in engine.list()] == ["[client] wants dark mode"]
    engine.close()


def test_modify_hits_and_format_injection_hooks(settings: Settings) -> None:
    class Demote:
        @hookimpl
        def modify_hits(self, query, hits: list[RecallHit], settings, conn) -> None:
            for hit in hits:
                if "legacy" in hit.memory.content:
                    hit.score /= 100

        @hookimpl
        def format_injection(self, query, hits, budget_chars):
            return InjectionBlock("|".join(h.memory.uid for h in hits[:1]), [hits[0].memory.uid])

    engine = MemoryEngine(settings, plugins=[Demote()])
    legacy = engine.store_one(NewMemory("legacy deploy deploy deploy script")).uid
    modern = engine.store_one(NewMemory("deploy with the new pipeline")).uid
    hits = engine.recall("deploy")
    assert [h.memory.uid for h in hits] == [modern, legacy]
    block = engine.injection("deploy", hits, 1000)
    assert (block.text, block.uids) == (modern, [modern])  # the block states its uids
    engine.close()


def test_register_commands_adds_a_cli_command(settings: Settings) -> None:
    class Commands:
        @hookimpl
        def register_commands(self, cli: click.Group) -> None:
            @cli.command(name="hello-plugin")
            def hello() -> None:
                click.echo("hello from a plugin")

    group = click.Group(commands=dict(cli.commands))
    build_plugin_manager(settings, [Commands()]).hook.register_commands(cli=group)
    result = CliRunner().invoke(group, ["hello-plugin"])
    assert result.exit_code == 0 and result.output == "hello from a plugin\n"


def test_embedder_and_harness_registration_hooks(settings: Settings) -> None:
    class Registers:
        @hookimpl
        def register_embedders(self, register, settings):
            register("embedder-x")

        @hookimpl
        def register_harnesses(self, register):
            register("harness-y")

    pm = build_plugin_manager(settings, [Registers()])
    embedders: list = []
    harnesses: list = []
    pm.hook.register_embedders(register=embedders.append, settings=settings)
    pm.hook.register_harnesses(register=harnesses.append)
    assert "embedder-x" in embedders and "harness-y" in harnesses


def test_hook_tracing_writes_calls_to_stderr(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    engine = MemoryEngine(Settings(db_path=str(tmp_path / "t.db"), trace_hooks=True))
    engine.store_one(NewMemory("traced"))
    assert "filter_ingest" in capfd.readouterr().err
    engine.close()


def test_fts_helpers_quote_everything() -> None:
    assert or_query(['a"b', "c"]) == '"a""b" OR "c"'
    assert or_query([]) == ""
    assert words("Hello, hello WORLD!") == ["hello", "world"]
    conn = sqlite3.connect(":memory:")
    assert fts_search(conn, "unused", "", 5, RecallFilters()) == []
