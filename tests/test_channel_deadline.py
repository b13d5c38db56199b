"""A channel that hangs or is slow stalls no recall and silences no hook (docs/plugins.md,
"Isolation at run time"; docs/service.md, `X-Memory-Wait-Ms`): a third-party channel searches
on a worker held to the deadline however fast it was before, a hook's recall ends its searches
in time for its budget, and a channel answering out of score order is left out.

In-process engines for the thread plan (`Searcher`), then a real service with a channel
installed through an entry point, asked over HTTP and by a real hook. Times are asserted as
shares of a hang or a budget, never as absolute seconds."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from harness_support import hook_env, hook_log, run_hook
from semantic_memory.models import ChannelHit, NewMemory, RecallFilters
from semantic_memory_bigram import BigramChannel
from semantic_memory_bm25_porter import PorterChannel
from semantic_memory_bm25_trigram import TrigramChannel
from semantic_memory_vector.channel import VectorChannel
from test_plugin_isolation import Answering, channel_plugin, engine_with, install
from test_service_support import Service, start_service

#: How long a hung search waits, against a channel timeout of TIMEOUT_S: a recall held by it
#: would take HANG_S, one that is not takes about TIMEOUT_S.
TIMEOUT_S = 0.3
HANG_S = 40 * TIMEOUT_S
#: A good search of the third-party channels here: fast, yet slower than the porter channel's
#: on a small store, so that the recall's own thread took it before the fix (the slowest).
GOOD_S = TIMEOUT_S / 10


class Flaky(Answering):
    """A third party's channel that answers at once until told to hang (a remote index that
    stopped answering after a hundred good searches); it notes each search's thread."""

    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.hang = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        self.threads.append(threading.get_ident())
        if self.hang.is_set():
            self.release.wait(HANG_S)
        time.sleep(GOOD_S)
        return [ChannelHit(self.answer, 1.0)]


def test_only_the_projects_fts5_channels_declare_a_search_that_cannot_hang() -> None:
    assert Answering.search_on_caller_thread is False  # the default: a third party's channel
    assert VectorChannel.search_on_caller_thread is False  # a model's query embedding
    assert all(c.search_on_caller_thread is True
               for c in (PorterChannel, TrigramChannel, BigramChannel))


def test_a_third_party_channel_never_searches_on_the_recalls_thread(tmp_path: Path) -> None:
    """A channel that answered fast ("proven") searched on the recall's thread from then on,
    where no deadline could stop it; a channel that does not declare its search bounded now
    always searches on a worker in the service."""
    channel = Flaky()
    engine = engine_with(tmp_path, channel_plugin(channel), channel_timeout_s=TIMEOUT_S,
                         serving=True)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        channel.answer = engine.get(uid).id
        for _ in range(8):
            assert engine.recall("kubernetes")[0].ranks == {"porter": 1, "flaky": 1}
        assert len(channel.threads) == 8 and threading.get_ident() not in channel.threads
    finally:
        engine.close()


def test_a_fast_channel_that_hangs_holds_no_concurrent_recall(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The QA report's finding 2: warmed up fast, then hung, it held 4 concurrent recalls for
    the whole hang, with no log line. Now each answers by the deadline, without it."""
    channel = Flaky()
    engine = engine_with(tmp_path, channel_plugin(channel), channel_timeout_s=TIMEOUT_S,
                         serving=True)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        channel.answer = engine.get(uid).id
        for _ in range(4):
            engine.recall("kubernetes")
        channel.hang.set()
        answers: dict[int, list[Any]] = {}

        def recall(n: int) -> None:
            answers[n] = engine.recall("kubernetes")

        recalls = [threading.Thread(target=recall, args=(n,), daemon=True) for n in range(4)]
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            started = time.monotonic()
            for thread in recalls:
                thread.start()
                time.sleep(TIMEOUT_S / 4)
            for thread in recalls:
                thread.join(HANG_S / 2)
            took = time.monotonic() - started
        assert not channel.release.is_set() and len(answers) == 4, "recalls waited for the hang"
        assert took < HANG_S / 4
        assert all([h.memory.uid for h in hits] == [uid] and hits[0].ranks == {"porter": 1}
                   for hits in answers.values())
        # One line per recall that asked it before the first search was known to be late
        lines = [r.getMessage() for r in caplog.records if "flaky" in r.getMessage()]
        assert lines and set(lines) == {
            f"channel flaky: search took longer than {TIMEOUT_S:g} s (MEMORY_CHANNEL_TIMEOUT_S)"
            "; recall goes on without it until that search ends"}
    finally:
        channel.release.set()
        engine.close()


def test_a_channel_that_took_most_of_its_deadline_is_named_once_a_while(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The QA report's finding 3: a channel taking 1.5 of its 2 s answered, and nothing said
    it held every recall (and every hook's budget) up. One line names it, not one a recall."""
    timeout_s = 4.0
    channel = Answering(lambda: time.sleep(0.85 * timeout_s) or [])
    engine = engine_with(tmp_path, channel_plugin(channel), channel_timeout_s=timeout_s,
                         serving=True)
    try:
        engine.store_one(NewMemory("kubernetes upgrade notes"))
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            for _ in range(2):
                assert engine.recall("kubernetes")[0].ranks == {"porter": 1}
        lines = [r.getMessage() for r in caplog.records if "answering" in r.getMessage()]
        assert len(lines) == 1 and lines[0].startswith("channel answering: search took ")
        assert lines[0].endswith(" s it had (MEMORY_CHANNEL_TIMEOUT_S): slow; past it the "
                                 "recall goes on without it"), lines
    finally:
        engine.close()


class StuckPorter(PorterChannel):
    """The project's own porter channel, made to hang once told to: a bounded channel that
    does not keep its word."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hang = threading.Event()
        self.release = threading.Event()
        self.threads: list[int] = []

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        self.threads.append(threading.get_ident())
        if self.hang.is_set():
            self.hang.clear()  # the first search after the word hangs, the next ones do not
            self.release.wait(HANG_S)
        return super().search(conn, query, k, filters)


def test_a_declared_channel_stuck_on_one_recalls_thread_holds_no_other_recall(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A channel searching on a recall's own thread that hangs there holds that recall; the
    recalls beside it ask a worker, held to the deadline, and once it ends past the deadline
    the channel searches on workers for good, in one line."""
    porter = StuckPorter()
    engine = engine_with(tmp_path, channel_plugin(porter), plugins="none",
                         channel_timeout_s=TIMEOUT_S, serving=True)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        for _ in range(3):  # the first on a worker, then on the recall's thread
            engine.recall("kubernetes")
        assert porter.threads[-1] == threading.get_ident()
        porter.hang.set()
        stuck = threading.Thread(target=engine.recall, args=("kubernetes",), daemon=True)
        stuck.start()
        time.sleep(2 * TIMEOUT_S)  # past the deadline on that recall's thread
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            started = time.monotonic()
            beside = engine.recall("kubernetes")
            took = time.monotonic() - started
            assert stuck.is_alive() and took < HANG_S / 4
            assert [h.memory.uid for h in beside] == [uid]
            assert porter.threads[-1] != threading.get_ident()  # a worker searched it
            porter.release.set()
            stuck.join(HANG_S)
            engine.recall("kubernetes")
        assert porter.threads[-1] != threading.get_ident()  # and does from now on
        # (on a loaded machine a worker's search may also take most of its deadline: that
        # "slow" line is another one, logged at most once a minute)
        lines = [r.getMessage() for r in caplog.records if "porter" in r.getMessage()
                 and ": slow;" not in r.getMessage()]
        assert len(lines) == 1 and lines[0].startswith(
            "channel porter: search on the recall's own thread took "), lines
        assert lines[0].endswith(f"past {TIMEOUT_S:g} s (MEMORY_CHANNEL_TIMEOUT_S); it searches "
                                 "on a worker thread held to the deadline from now on")
    finally:
        porter.release.set()
        engine.close()


@pytest.mark.parametrize("fusion", ["score", "rrf"])
def test_hits_out_of_score_order_leave_the_channel_out(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, fusion: str) -> None:
    """The QA report's finding 11: a channel listing its lowest score first was fused by
    score while `ranks` said it ranked that hit first. Refused, as other malformed answers."""
    channel = Answering()
    engine = engine_with(tmp_path, channel_plugin(channel), fusion=fusion)
    try:
        first = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        second = engine.store_one(NewMemory("kubernetes rollback notes")).uid
        ids = [engine.get(first).id, engine.get(second).id]
        channel.answer = [ChannelHit(ids[0], 0.1), ChannelHit(ids[1], 0.9)]
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
        assert hits and all("answering" not in h.ranks for h in hits)
        lines = [r.getMessage() for r in caplog.records if "answering" in r.getMessage()]
        assert lines == ["channel answering: search answered hit 2 with score 0.9 above hit "
                         "1's 0.1: best first, list order must agree with score; recall goes "
                         "on without it"]
        # Float noise is no disorder: ties ranked by a rounded score (newer first) pass.
        channel.answer = [ChannelHit(ids[1], 2.0000000001), ChannelHit(ids[0], 2.0000000004)]
        hits = engine.recall("kubernetes")
        assert {h.memory.uid: h.ranks["answering"] for h in hits} == {second: 1, first: 2}
    finally:
        engine.close()


def test_a_search_on_caller_thread_that_is_not_a_bool_refuses_the_channel(
        tmp_path: Path) -> None:
    channel = Answering()
    channel.search_on_caller_thread = "yes"  # type: ignore[misc]
    engine = engine_with(tmp_path, channel_plugin(channel))
    try:
        assert engine.plugin_problems == [
            "plugin Plugin: channel refused: channel 'answering': search_on_caller_thread "
            "must be True or False, not 'yes'"]
    finally:
        engine.close()


# --- a real service, a channel installed through an entry point ------------------------------

#: A third party's channel: its search sleeps the seconds its mode file says.
LAGGARD = """
    import os, time
    from semantic_memory.channels import Channel
    from semantic_memory.hookspecs import hookimpl

    class Laggard(Channel):
        name = "laggard"
        stores = ("sqlite", "postgresql")

        def index(self, conn, memories, prepared=None):
            pass

        def search(self, conn, query, k, filters):
            with open(os.environ["LAGGARD_MODE"]) as mode:
                seconds = mode.read().strip()
            if seconds:
                time.sleep(float(seconds))
            return []

    @hookimpl
    def register_channels(register, settings):
        register(Laggard())
    """
#: The hook's budget in these tests, and the channel timeout, far past it (a slow channel the
#: old service waited for to the end).
BUDGET_S = 4.0
SLOW_S = 3 * BUDGET_S
PROJECT = "deadline-demo"
FACT = "The deploy freeze starts on Fridays at noon."


@contextmanager
def laggard_service(tmp_path: Path, timeout_s: float) -> Iterator[tuple[Service, Path]]:
    """A service with the laggard installed (MEMORY_CHANNEL_TIMEOUT_S `timeout_s`), FACT stored
    in PROJECT, and a few recalls the laggard answered at once ("proven" before the fix); the
    path of its mode file."""
    site = install(tmp_path / "site", "laggard", LAGGARD)
    mode = tmp_path / "mode"
    mode.write_text(str(GOOD_S))
    service = start_service(tmp_path / "svc", PYTHONPATH=str(site), LAGGARD_MODE=str(mode),
                            MEMORY_PLUGINS="bm25_porter,laggard",
                            MEMORY_CHANNEL_TIMEOUT_S=str(timeout_s))
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": FACT, "project": PROJECT}
                             ).json()["status"] == "new"
            for _ in range(4):
                assert http.post("/recall", json={"query": "deploy freeze"}).status_code == 200
        yield service, mode
    finally:
        mode.write_text("")
        service.stop()


def test_over_http_a_slow_channel_is_left_out_by_the_callers_wait(tmp_path: Path) -> None:
    """X-Memory-Wait-Ms holds the recall's searches to what the caller can wait: the answer
    arrives within it, without the slow channel, and the service's log names the channel."""
    with laggard_service(tmp_path, 4 * SLOW_S) as (service, mode):
        mode.write_text(str(SLOW_S))
        with service.client() as http:
            started = time.monotonic()
            answer = http.post("/recall", json={"query": "deploy freeze", "project": PROJECT},
                               headers={"X-Memory-Wait-Ms": str(int(BUDGET_S / 2 * 1000))})
            took = time.monotonic() - started
            assert answer.status_code == 200, answer.text
            assert [i["content"] for i in answer.json()["items"]] == [FACT]
            assert took < SLOW_S / 2, took  # not held to the channel's sleep
            refused = http.post("/recall", json={"query": "deploy freeze"},
                                headers={"X-Memory-Wait-Ms": "1.5"})
            assert refused.status_code == 422, refused.text
            assert refused.json()["field"] == "x-memory-wait-ms"
        logged = service.stderr()
    assert "channel laggard: search took longer than " in logged
    assert "(what its caller could still wait, X-Memory-Wait-Ms); recall goes on without it " \
           "until that search ends" in logged


def test_over_http_a_channel_that_hangs_holds_no_concurrent_recall(tmp_path: Path) -> None:
    """The QA report's finding 2 over HTTP: after recalls it answered at once, a third-party
    channel that hung held 4 concurrent recalls for the whole hang (30 s each), unlogged."""
    with laggard_service(tmp_path, BUDGET_S / 3) as (service, mode):
        mode.write_text(str(SLOW_S))
        took: dict[int, float] = {}
        found: dict[int, list[str]] = {}

        def recall(n: int) -> None:
            with service.client() as http:
                started = time.monotonic()
                answer = http.post("/recall", json={"query": "deploy freeze",
                                                    "project": PROJECT})
                took[n] = time.monotonic() - started
                found[n] = [i["content"] for i in answer.json()["items"]]

        threads = [threading.Thread(target=recall, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
            time.sleep(0.1)
        for thread in threads:
            thread.join()
        logged = service.stderr()
    assert found == {n: [FACT] for n in range(4)}
    assert max(took.values()) < SLOW_S / 2, took
    assert "channel laggard: search took longer than " in logged


def test_a_hook_injects_beside_a_channel_slower_than_its_budget(tmp_path: Path) -> None:
    """The QA report's finding 3: a channel slower than the hook's budget but within
    MEMORY_CHANNEL_TIMEOUT_S timed every hook out ("budget spent (recall)"), injecting
    nothing. The hook sends what is left of its budget; the other channels' answer arrives."""
    with laggard_service(tmp_path / "s", 4 * SLOW_S) as (service, mode):
        mode.write_text(str(SLOW_S))
        env = hook_env(tmp_path, service.url, MEMORY_PROJECT=PROJECT,
                       MEMORY_HOOK_BUDGET_S=str(BUDGET_S))
        for n in range(2):  # the second while the first one's slow search still runs
            done = run_hook("claude-code", "UserPromptSubmit", {
                "session_id": f"s-deadline-{n}", "cwd": str(tmp_path),
                "hook_event_name": "UserPromptSubmit",
                "prompt": "when does the deploy freeze start?"}, env, cwd=tmp_path)
            assert done.returncode == 0, done.stderr
            entry = hook_log(tmp_path)[-1]
            assert entry["outcome"] == "injected", entry
            assert FACT in json.dumps(done.json()), done.stdout
            assert done.seconds < SLOW_S / 2
        logged = service.stderr()
    assert "channel laggard: search took longer than " in logged


def test_the_hooks_client_says_how_long_it_can_still_wait() -> None:
    """Every request of `ServiceClient` carries X-Memory-Wait-Ms: what is left of its
    deadline, in whole milliseconds (the service reads digits only)."""
    import socket

    from semantic_memory.harness.client import ServiceClient

    heard: list[bytes] = []
    with socket.create_server(("127.0.0.1", 0)) as server:

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                heard.append(conn.recv(65536))
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

        threading.Thread(target=answer, daemon=True).start()
        budget_s = 5.0
        client = ServiceClient(f"http://127.0.0.1:{server.getsockname()[1]}",
                               time.monotonic() + budget_s)
        assert client.post("/recall", {"query": "x"}) == {}
    lines = heard[0].decode("latin-1").split("\r\n")
    [wait] = [line.split(": ", 1)[1] for line in lines if line.startswith("X-Memory-Wait-Ms: ")]
    assert wait.isdigit() and 0 < int(wait) <= budget_s * 1000
