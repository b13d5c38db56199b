"""What a recall makes of channels whose search failed (retrieval.Searcher): a channel of its
own failing is left out with one line and the recall goes on; a recall that fails as a whole
says so in one error, without first saying per channel that it "goes on without it"; a
failure on the store's own state (its StoreError) is that error, not a list of every channel's
consequence of it. The PostgreSQL side (a server past its deadline, a refused privilege) is in
test_postgres_refusals.py."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from semantic_memory import testing
from semantic_memory.channels import Channel
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import Memory, NewMemory, RecallFilters
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.stores import StoreError


class Raising(Channel):
    """A channel whose every search raises what a test gives it."""

    stores = ("sqlite", "postgresql")

    def __init__(self, name: str, error: Exception) -> None:
        self.name = name
        self.error = error

    def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None:
        pass

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        raise self.error


def engine_with(tmp_path: Path, *channels: Channel, plugins: str) -> MemoryEngine:
    class Plugin:
        @hookimpl
        def register_channels(self, register: Any, settings: Any) -> None:
            for channel in channels:
                register(channel)

    return testing.engine_with(tmp_path, Plugin(), plugins=plugins)


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "goes on without it" in r.getMessage()]


def test_a_broken_channel_is_left_out_in_one_line_and_the_recall_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = engine_with(tmp_path, Raising("broken", RuntimeError("index file missing")),
                         plugins="bm25_porter")
    try:
        uid = engine.store_one(NewMemory("the deploy pipeline runs on fridays")).uid
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("deploy pipeline")
            none = engine.recall("nothing stored says this")
        assert [h.memory.uid for h in hits] == [uid] and none == []
        assert said(caplog) == ["channel broken: search failed (RuntimeError: index file "
                                "missing); recall goes on without it"] * 2
    finally:
        engine.close()


def test_a_recall_no_channel_could_search_is_one_error_and_no_goes_on_lines(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Each channel's "recall goes on without it" came before the error saying the recall
    did not go on."""
    engine = engine_with(tmp_path, Raising("first", RuntimeError("boom")),
                         Raising("second", ValueError("bang")), plugins="codex")
    try:
        engine.store_one(NewMemory("the deploy pipeline runs on fridays"))
        with caplog.at_level(logging.WARNING, "semantic_memory"), \
                pytest.raises(StoreError) as failed:
            engine.recall("deploy pipeline")
        message = str(failed.value)  # in the order they failed: side by side, either first
        assert message.startswith("recall failed: every channel's search failed ("), message
        assert {"first: RuntimeError: boom", "second: ValueError: bang"} == set(
            message.partition("(")[2].removesuffix(")").split("; ")), message
        assert said(caplog) == []
    finally:
        engine.close()


def test_a_search_failed_on_the_stores_state_is_the_stores_error(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A channel meets the store's own StoreError (a server gone); another then fails on what
    that left (a closed connection) and the rest find nothing: the recall is the store's one
    line, not "every channel failed" listing a consequence as a second cause."""
    gone = "postgresql://memory:***@db/team is unavailable: no answer from the server within 5 s"
    engine = engine_with(tmp_path, Raising("first", StoreError(gone)),
                         Raising("second", RuntimeError("the connection is closed")),
                         plugins="bm25_porter")
    try:
        engine.store_one(NewMemory("the deploy pipeline runs on fridays"))
        with caplog.at_level(logging.WARNING, "semantic_memory"), \
                pytest.raises(StoreError) as failed:
            engine.recall("nothing stored says this")
        assert str(failed.value) == gone
        assert said(caplog) == []
    finally:
        engine.close()


class FailingSql(Channel):
    """A third party's channel whose SQL fails on the server (a typo, a missing table): its
    search, and its `relevant` verdict, run a statement that raises."""

    name = "failing_sql"
    stores = ("sqlite", "postgresql")

    def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None:
        pass

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        conn.execute("SELECT * FROM no_such_index").fetchall()
        return []

    def relevant(self, conn: Any, query: str, hits: list[Any]) -> set[int]:
        conn.execute("SELECT * FROM no_such_table").fetchall()
        return set()


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_a_channels_failed_statement_leaves_the_recalls_connection_usable(
        tmp_path: Path, store: str, caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL aborts a whole transaction at a failed statement: a third party's SQL error
    on the recall's own connection failed every channel and stage after it ("every channel's
    search failed (failing_sql: UndefinedTable …; pg_fulltext: InFailedSqlTransaction …)"),
    on a one-off command's every recall. Now only that channel is left out, in one line, and
    its failed verdict costs no other channel's."""
    import pg

    settings: dict[str, Any] = {"device": "cpu"}
    if store == "postgresql":
        settings["db_url"] = pg.new_database()
    else:
        settings["plugins"] = "bm25_porter"
    engine = testing.engine_with(tmp_path, _registering(FailingSql()), **settings)
    try:
        uid = engine.store_one(NewMemory("the deploy pipeline runs on fridays")).uid
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            for _ in range(3):
                assert [h.memory.uid for h in engine.recall("deploy pipeline")] == [uid]
                assert [h.memory.uid for h in engine.recall(
                    "deploy pipeline", relevant_only=True)] == [uid]
        lines = [r.getMessage() for r in caplog.records]
        assert len([m for m in lines if m.startswith("channel failing_sql: search failed")
                    and "no_such_index" in m and m.endswith("recall goes on without it")]) == 6
        assert len([m for m in lines if m.startswith("channel failing_sql: relevant failed")
                    and "no_such_table" in m]) == 3
        assert len(lines) == 9, lines
    finally:
        engine.close()


def _registering(channel: Channel) -> Any:
    class Plugin:
        @hookimpl
        def register_channels(self, register: Any, settings: Any) -> None:
            register(channel)

    return Plugin()
