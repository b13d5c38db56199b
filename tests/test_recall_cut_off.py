"""A recall that no channel answered in time is an error, never an empty "nothing matched"
(docs/plugins.md, "Isolation at run time"), and a recall's statements after its searches keep
to its own deadline (docs/postgres.md): QA's findings on a team's PostgreSQL, where a
teammate's `LOCK TABLE memories` (a schema upgrade, VACUUM FULL, ALTER TABLE) made `/recall`,
`/api/search` and `memory_recall` answer 200 `count: 0` after the channel deadline, and at once
afterwards; and a project's recall answered its 503 after 7 s (6.3 s to a hook waiting 1.5 s).

Real services over HTTP and MCP: on SQLite with a third party's channel whose search hangs, on
the suite's PostgreSQL (tests/pg.py) with another session holding the table lock. Times are
asserted as shares of the deadlines, never as absolute seconds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pg
import pytest
from test_channel_deadline import LAGGARD
from test_plugin_isolation import install
from test_service_support import Service, http_session, start_service

FACT = "The deploy freeze starts on Fridays at noon."
PROJECT = "freeze-demo"
CUT_OFF = "recall failed: no channel answered within the recall's "


def mcp_recall(service: Service, **arguments: Any) -> tuple[bool, str]:
    """(is_error, the text) of one memory_recall over the service's /mcp."""
    async def call() -> tuple[bool, str]:
        async with http_session(service.mcp_url) as session:
            result = await session.call_tool("memory_recall", arguments)
            return result.is_error, " ".join(getattr(c, "text", "") for c in result.content)

    return anyio.run(call)


def timed(call: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = call()
    return answer, time.monotonic() - started


# --- SQLite: the only channel hangs ------------------------------------------------------------

#: The channel deadline, and how long the hung search sleeps: far past it.
TIMEOUT_S = 0.5
HANG_S = 20 * TIMEOUT_S


def test_a_recall_whose_only_channel_hangs_is_an_error_not_nothing_matched(
        tmp_path: Path) -> None:
    site = install(tmp_path / "site", "laggard", LAGGARD)
    mode = tmp_path / "mode"
    mode.write_text("")
    service = start_service(tmp_path / "svc", PYTHONPATH=str(site), LAGGARD_MODE=str(mode),
                            MEMORY_PLUGINS="laggard", MEMORY_CHANNEL_TIMEOUT_S=str(TIMEOUT_S))
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": FACT}).json()["status"] == "new"
            answered = http.post("/recall", json={"query": "deploy freeze"})
            # A channel that answers, even with nothing: "nothing matched" stays an answer
            assert answered.status_code == 200 and answered.json()["count"] == 0
            mode.write_text(str(HANG_S))
            first, took = timed(lambda: http.post("/recall", json={"query": "deploy freeze"}))
            assert first.status_code == 503, first.text
            assert first.json()["error"] == (
                f"{CUT_OFF}{TIMEOUT_S:g} s (MEMORY_CHANNEL_TIMEOUT_S) (laggard: still "
                "searching); the store may be locked or not answering, or the channels stuck")
            assert took < HANG_S / 4, took
            # The next recalls leave the late channel out without asking it: still an error
            again, took = timed(lambda: http.post("/recall", json={"query": "deploy freeze"}))
            assert again.status_code == 503, again.text
            assert "laggard: a search of it from an earlier recall still runs" in \
                   again.json()["error"]
            assert took < TIMEOUT_S, took  # at once, as it was answered empty before
            searched = http.get("/api/search", params={"q": "deploy"})
            assert searched.status_code == 503 and CUT_OFF in searched.json()["error"]
            waited = http.post("/recall", json={"query": "deploy freeze", "project": PROJECT},
                               headers={"X-Memory-Wait-Ms": "1500"})
            assert waited.status_code == 503 and CUT_OFF in waited.json()["error"]
        is_error, text = mcp_recall(service, query="deploy freeze")
        assert is_error and CUT_OFF in text, text
    finally:
        mode.write_text("")
        service.stop()


# --- PostgreSQL: another session holds LOCK TABLE memories -----------------------------------

#: A channel answering the memory ids its file lists, without the store (an index elsewhere):
#: the recall goes on past its searches to the statements after them. It searches on the
#: recall's own thread (once it answered in time), so it answers however busy the workers are.
PINNED = """
    import os
    from semantic_memory.channels import Channel
    from semantic_memory.hookspecs import hookimpl
    from semantic_memory.models import ChannelHit

    class Pinned(Channel):
        name = "pinned"
        stores = ("sqlite", "postgresql")
        search_on_caller_thread = True

        def index(self, conn, memories, prepared=None):
            pass

        def search(self, conn, query, k, filters):
            with open(os.environ["PINNED_IDS"]) as ids:
                return [ChannelHit(int(i), 1.0) for i in ids.read().split()]

    @hookimpl
    def register_channels(register, settings):
        register(Pinned())
    """


@contextmanager
def locked_pg_service(tmp_path: Path, channel_timeout_s: float, db_timeout_s: float,
                      pinned: bool = False) -> Iterator[tuple[Service, str]]:
    """A service on a fresh PostgreSQL database holding FACT in PROJECT, and (`pinned`) a
    channel answering FACT's id from outside the store; within, another session holds
    `LOCK TABLE memories IN ACCESS EXCLUSIVE MODE`. Yields the service and the database URL."""
    import psycopg

    url = pg.new_database()
    env = {"MEMORY_DB_URL": url, "MEMORY_CHANNEL_TIMEOUT_S": str(channel_timeout_s),
           "MEMORY_DB_TIMEOUT": str(db_timeout_s)}
    ids = tmp_path / "ids"
    ids.write_text("")
    if pinned:
        env.update(PYTHONPATH=str(install(tmp_path / "site", "pinned", PINNED)),
                   PINNED_IDS=str(ids))
    service = start_service(tmp_path / "svc", "serve", **env)
    try:
        with service.client() as http:
            stored = http.post("/ingest", json={"content": FACT, "project": PROJECT})
            assert stored.json()["status"] == "new", stored.text
            found = http.post("/recall", json={"query": "deploy freeze"}).json()
            assert [i["content"] for i in found["items"]] == [FACT], found
        with psycopg.connect(url) as holder:
            ids.write_text(" ".join(str(row[0]) for row in
                                    holder.execute("SELECT id FROM memories")))
            holder.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
            yield service, url
    finally:
        service.stop()


#: The channel deadline and MEMORY_DB_TIMEOUT on PostgreSQL: a statement behind the lock waits
#: DB_TIMEOUT_S, far longer than the channels may search.
CHANNEL_S = 1.0
DB_TIMEOUT_S = 6.0


def test_a_table_lock_under_every_channel_is_an_error_everywhere(tmp_path: Path) -> None:
    """QA finding 1: `/recall` without a project, `/api/search` and memory_recall answered 200
    `count: 0` at the channel deadline, then at once; a project's recall 503 after both
    deadlines. Each is now the one line naming the channels and the deadline, by it."""
    with locked_pg_service(tmp_path, CHANNEL_S, DB_TIMEOUT_S) as (service, _):
        with service.client() as http:
            first, took = timed(lambda: http.post("/recall", json={"query": "deploy freeze"}))
            assert first.status_code == 503, first.text
            error = first.json()["error"]
            assert error.startswith(f"{CUT_OFF}{CHANNEL_S:g} s (MEMORY_CHANNEL_TIMEOUT_S) ("), \
                error
            assert "pg_fulltext: still searching" in error, error
            assert "pg_trigram: still searching" in error, error
            assert took < (CHANNEL_S + DB_TIMEOUT_S) / 2, took
            again, took = timed(lambda: http.post("/recall", json={"query": "deploy freeze"}))
            assert again.status_code == 503 and CUT_OFF in again.json()["error"], again.text
            assert took < DB_TIMEOUT_S / 2, took
            searched = http.get("/api/search", params={"q": "redis"})
            assert searched.status_code == 503 and CUT_OFF in searched.json()["error"]
            project, took = timed(lambda: http.post(
                "/recall", json={"query": "deploy freeze", "project": PROJECT}))
            assert project.status_code == 503 and CUT_OFF in project.json()["error"]
            assert took < DB_TIMEOUT_S / 2, took  # not behind a statement of its own
        is_error, text = mcp_recall(service, query="deploy freeze")
        assert is_error and CUT_OFF in text, text


@pytest.mark.parametrize("wait_ms", [1000, None])
def test_a_recalls_statements_after_its_searches_keep_to_its_deadline(
        tmp_path: Path, wait_ms: int | None) -> None:
    """QA finding 2: a channel answered (here from outside the store), the table's channels
    were cut, and then loading the memories waited the whole MEMORY_DB_TIMEOUT behind the
    lock: the 503 came after both deadlines, 4x past what a hook waits. It comes by the
    caller's wait (X-Memory-Wait-Ms), else by MEMORY_DB_TIMEOUT from the recall's start."""
    if wait_ms is not None:  # searches end before the wait, far inside the channel deadline
        channel_s, db_s = DB_TIMEOUT_S, DB_TIMEOUT_S
        headers = {"X-Memory-Wait-Ms": str(wait_ms)}
    else:  # the channels take the whole deadline: nothing is left for the statements
        channel_s = db_s = DB_TIMEOUT_S / 2
        headers = {}
    with locked_pg_service(tmp_path, channel_s, db_s, pinned=True) as (service, _):
        with service.client() as http:
            answer, took = timed(lambda: http.post(
                "/recall", json={"query": "deploy freeze", "project": PROJECT},
                headers=headers))
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert " is unavailable: no answer from the server within " in error, error
    if wait_ms is not None:
        assert error.endswith("what the recall's caller could wait (X-Memory-Wait-Ms)"), error
        assert took < db_s / 2, took  # by the wait (1 s), not after the statement's 6 s
    else:
        assert error.endswith(f"within {db_s:g} s"), error
        assert took < 1.5 * db_s, took  # by MEMORY_DB_TIMEOUT, not after both deadlines
