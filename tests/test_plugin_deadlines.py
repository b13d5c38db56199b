"""Plugin hooks outside the channel searches are held to the recall's deadline as searches are
(docs/plugins.md, "Isolation at run time"): a `modify_hits` or `format_injection` that hangs
is left out of the recall in one line naming it and skipped until it returns; a hung
`filter_ingest` refuses the write (fail closed) and every write while it still runs; a
`Channel.relevant` answering a list of ids is read as a set, one answering anything but ids
is refused in one line.

In-process engines in service mode (`serving=True`) with a short MEMORY_CHANNEL_TIMEOUT_S,
then a real service with a plugin installed through an entry point. Times are asserted as
shares of a hang, never as absolute seconds."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from semantic_memory import held
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import ChannelHit, InjectionBlock, NewMemory, RecallHit
from semantic_memory.retrieval import service_recall
from test_plugin_isolation import Answering, channel_plugin, engine_with, install
from test_service_support import start_service

#: The channel timeout, and how long a hung hook waits (released at the test's end): a recall
#: held by it would take HANG_S, one that is not about TIMEOUT_S.
TIMEOUT_S = 0.3
HANG_S = 40 * TIMEOUT_S
FACT = "kubernetes upgrade notes"


class Hangs:
    """modify_hits, format_injection and filter_ingest that hang while `hang` is set (until
    `release`), and otherwise boost every score to 99, wrap the block, pass the memory."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.release = threading.Event()
        self.calls: dict[str, int] = {}
        self.threads: list[int] = []  # the thread of each call

    def _called(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1
        self.threads.append(threading.get_ident())
        if self.hang.is_set():
            self.release.wait(HANG_S)

    @hookimpl
    def modify_hits(self, query: str, hits: list[RecallHit], settings: Any, store: Any,
                    conn: Any) -> None:
        self._called("modify_hits")
        for hit in hits:
            hit.score = 99.0  # after a hang too: a late call's change must reach no recall

    @hookimpl
    def format_injection(self, query: str, hits: list[RecallHit], budget_chars: int) -> Any:
        self._called("format_injection")
        return InjectionBlock("<mine/>", [h.memory.uid for h in hits])

    @hookimpl
    def filter_ingest(self, memory: NewMemory, settings: Any) -> None:
        self._called("filter_ingest")


def wait_returned(plugin: Hangs, engine: Any, hook: str) -> None:
    """Release the hung call and wait until the engine no longer counts it late."""
    plugin.hang.clear()
    plugin.release.set()
    until = time.monotonic() + HANG_S
    while held.running_late(engine.pm, hook, "Hangs") and time.monotonic() < until:
        time.sleep(0.01)
    assert not held.running_late(engine.pm, hook, "Hangs")


def timed(call: Any, *args: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = call(*args)
    return answer, time.monotonic() - started


def plugin_lines(caplog: pytest.LogCaptureFixture, hook: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.getMessage().startswith(f"plugin Hangs: {hook}")]


def test_a_hung_modify_hits_is_left_out_by_the_deadline_until_it_returns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin = Hangs()
    engine = engine_with(tmp_path, plugin, channel_timeout_s=TIMEOUT_S, serving=True)
    try:
        uid = engine.store_one(NewMemory(FACT)).uid
        assert engine.recall("kubernetes")[0].score == 99.0  # answering, it counts
        plugin.hang.set()
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits, took = timed(engine.recall, "kubernetes")
            assert took < HANG_S / 4, took  # not held to the hang
            assert [h.memory.uid for h in hits] == [uid] and hits[0].score != 99.0
            later, took = timed(engine.recall, "kubernetes")  # skipped, not waited for
            assert took < HANG_S / 4 and later[0].score != 99.0
        assert plugin.calls["modify_hits"] == 2  # the later recall did not call it
        assert plugin_lines(caplog, "modify_hits") == [
            f"plugin Hangs: modify_hits took longer than {TIMEOUT_S:g} s "
            "(MEMORY_CHANNEL_TIMEOUT_S); skipped until it returns"]
        wait_returned(plugin, engine, "modify_hits")
        assert engine.recall("kubernetes")[0].score == 99.0  # back once it returned
    finally:
        plugin.release.set()
        engine.close()


def test_a_hung_format_injection_is_left_out_and_the_core_formats(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin = Hangs()
    engine = engine_with(tmp_path, plugin, channel_timeout_s=TIMEOUT_S, serving=True)
    try:
        uid = engine.store_one(NewMemory(FACT)).uid
        hits = engine.recall("kubernetes")
        assert engine.injection("kubernetes", hits, 2_000).text == "<mine/>"
        plugin.hang.set()
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            block, took = timed(engine.injection, "kubernetes", hits, 2_000)
            assert took < HANG_S / 4, took
            assert block.uids == [uid] and block.text != "<mine/>"  # the core's formatter
            _, took = timed(engine.injection, "kubernetes", hits, 2_000)
            assert took < HANG_S / 4
        assert plugin.calls["format_injection"] == 2
        assert plugin_lines(caplog, "format_injection") == [
            f"plugin Hangs: format_injection took longer than {TIMEOUT_S:g} s "
            "(MEMORY_CHANNEL_TIMEOUT_S); skipped until it returns"]
        wait_returned(plugin, engine, "format_injection")
        assert engine.injection("kubernetes", hits, 2_000).text == "<mine/>"
    finally:
        plugin.release.set()
        engine.close()


def test_a_hung_filter_ingest_refuses_writes_until_it_returns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugin = Hangs()
    engine = engine_with(tmp_path, plugin, channel_timeout_s=TIMEOUT_S, serving=True)
    try:
        assert engine.store_one(NewMemory("first note")).status == "new"
        plugin.hang.set()
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            refused, took = timed(engine.store_one, NewMemory("second note"))
            assert took < HANG_S / 4, took
            assert refused.status == "rejected"
            assert refused.reason == (
                f"plugin Hangs: filter_ingest took longer than {TIMEOUT_S:g} s "
                "(MEMORY_CHANNEL_TIMEOUT_S); refused rather than stored unfiltered")
            again, took = timed(engine.store_one, NewMemory("third note"))
            assert took < HANG_S / 4 and again.status == "rejected"
            assert "still runs on an earlier memory" in str(again.reason)
        assert plugin.calls["filter_ingest"] == 2  # never skipped: the late one ran alone
        lines = plugin_lines(caplog, "filter_ingest")
        assert lines == [refused.reason, again.reason]
        assert [m.content for m in engine.list()] == ["first note"]
        wait_returned(plugin, engine, "filter_ingest")
        assert engine.store_one(NewMemory("fourth note")).status == "new"
    finally:
        plugin.release.set()
        engine.close()


def test_a_one_off_command_waits_for_a_slow_hook(tmp_path: Path) -> None:
    """Without the service (a command, a script) nothing is held: its user can interrupt it,
    and the hook runs on the caller's own thread with the recall's connection."""
    plugin = Hangs()
    engine = engine_with(tmp_path, plugin, channel_timeout_s=TIMEOUT_S)
    try:
        engine.store_one(NewMemory(FACT))
        hits = engine.recall("kubernetes")
        assert hits[0].score == 99.0
        assert engine.injection("kubernetes", hits, 2_000).text == "<mine/>"
        assert set(plugin.threads) == {threading.get_ident()}
    finally:
        engine.close()


class Vouching(Answering):
    """A channel answering the stored memory, and vouching with what `verdict` makes of the
    hits' ids and uids."""

    name = "vouching"

    def __init__(self, verdict: Any) -> None:
        super().__init__()
        self.verdict = verdict

    def relevant(self, conn: Any, query: str, hits: list[RecallHit]) -> Any:
        return self.verdict(hits)


@pytest.mark.parametrize(("verdict", "refused"), [
    (lambda hits: {h.memory.id for h in hits}, None),
    (lambda hits: [h.memory.id for h in hits], None),
    (lambda hits: (h.memory.id for h in hits), None),
    (lambda hits: {h.memory.uid for h in hits}, "a set holding a str"),
    (lambda hits: hits, "a list holding a RecallHit"),  # said by type: no content in the log
    (lambda hits: None, "a NoneType"),
    (lambda hits: hits[0].memory.id, "a int")])
def test_relevant_takes_any_iterable_of_ids_and_refuses_anything_else(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, verdict: Any,
        refused: str | None) -> None:
    channel = Vouching(verdict)
    engine = engine_with(tmp_path, channel_plugin(channel), plugins="none")
    try:
        uid = engine.store_one(NewMemory(FACT)).uid
        channel.answer = [ChannelHit(engine.get(uid).id, 1.0)]
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes", relevant_only=True)
        lines = [r.getMessage() for r in caplog.records]
        if refused is None:
            assert [h.memory.uid for h in hits] == [uid] and lines == []
        else:
            assert hits == []
            assert lines == [f"channel vouching: relevant answered {refused}, not memory ids "
                             "(ints); no verdict from it"]
    finally:
        engine.close()


# --- a real service, a plugin installed through an entry point -------------------------------

#: A third party's post-processing: modify_hits sleeps the seconds its mode file says.
SLEEPER = """
    import os, time
    from semantic_memory.hookspecs import hookimpl

    @hookimpl
    def modify_hits(query, hits, settings, store, conn):
        with open(os.environ["SLEEPER_MODE"]) as mode:
            seconds = mode.read().strip()
        if seconds:
            time.sleep(float(seconds))
    """


def test_over_http_a_hung_modify_hits_holds_no_recall_and_is_named(tmp_path: Path) -> None:
    """The QA finding over HTTP: a modify_hits sleeping 30 s held every recall 30 s, named in
    no log, and concurrent ones took the read pool (even /api/stats waited)."""
    site = install(tmp_path / "site", "sleeper", SLEEPER)
    mode = tmp_path / "mode"
    mode.write_text("")
    service = start_service(tmp_path / "svc", PYTHONPATH=str(site), SLEEPER_MODE=str(mode),
                            MEMORY_PLUGINS="bm25_porter,sleeper",
                            MEMORY_CHANNEL_TIMEOUT_S=str(TIMEOUT_S))
    try:
        with service.client() as http:
            assert http.post("/ingest", json={"content": FACT}).json()["status"] == "new"
            mode.write_text(str(HANG_S))
            took: list[float] = []
            started = time.monotonic()
            first = http.post("/recall", json={"query": "kubernetes"})  # the one that hangs
            assert time.monotonic() - started < HANG_S / 4
            assert [i["content"] for i in first.json()["items"]] == [FACT]

            def recall() -> None:
                with service.client() as mine:
                    started = time.monotonic()
                    answer = mine.post("/recall", json={"query": "kubernetes"})
                    took.append(time.monotonic() - started)
                    assert [i["content"] for i in answer.json()["items"]] == [FACT]

            threads = [threading.Thread(target=recall) for _ in range(8)]  # skip it
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(HANG_S)
            assert len(took) == 8 and max(took) < HANG_S / 4, took
            _, stats_took = timed(http.get, "/api/stats")
            assert stats_took < HANG_S / 4
        logged = service.stderr()
    finally:
        mode.write_text("")
        service.stop()
    assert logged.count("plugin sleeper (sleeper-plugin 0.1): modify_hits took longer than "
                        f"{TIMEOUT_S:g} s (MEMORY_CHANNEL_TIMEOUT_S); skipped until it "
                        "returns") == 1, logged[-3000:]


def test_the_cores_own_hooks_are_held_to_no_deadline(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """The core's formatter (and, by the same rule, its hygiene filter and boost) is the
    project's code: a block formatted once the caller's wait ran out is no hung plugin, nor a
    capture stored with a deadline no filter could meet."""
    writer = engine_with(tmp_path, serving=True, channel_timeout_s=1e-6)
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            stored = writer.store_one(NewMemory(FACT + " " + "build log line " * 2000))
    finally:
        writer.close()
    engine = engine_with(tmp_path, serving=True, channel_timeout_s=TIMEOUT_S)
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
            now = time.monotonic()
            with service_recall(now - 10, now - 5, now - 1):  # the caller's wait ran out
                block = engine.injection("kubernetes", hits, 2000)
        assert stored.uid is not None and [h.memory.uid for h in hits] == [stored.uid]
        assert block.uids == [stored.uid] and "kubernetes" in block.text.lower()
        assert not [r for r in caplog.records if "took longer" in r.getMessage()
                    or "did not start" in r.getMessage()]
    finally:
        engine.close()
