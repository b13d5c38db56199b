"""A broken plugin is reported in one line naming it and is isolated (docs/plugins.md, "Loading"
and "Isolation at run time"): installed plugins, each a module plus an entry point in a
`*.dist-info`, run through the real `memory-mcp`, and in-process plugins through the engine."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from semantic_memory import plugins as plugin_loading
from semantic_memory import testing
from semantic_memory.channels import Channel
from semantic_memory.cli import add_plugin_commands, cli
from semantic_memory.config import ConfigError, Settings
from semantic_memory.hookspecs import hookimpl
from semantic_memory.models import (
    ChannelHit,
    InjectionBlock,
    Memory,
    NewMemory,
    RecallFilters,
    RecallHit,
)
from semantic_memory.pipeline import MemoryEngine
from semantic_memory.plugins import build_plugin_manager


@pytest.fixture(autouse=True)
def _fresh_log() -> None:
    """Each problem is logged once per process: every test is a fresh process here."""
    plugin_loading._logged.clear()


def install(site: Path, name: str, code: str) -> Path:
    """An installed plugin: module `name` and distribution `name-plugin 0.1` with an entry
    point `name` in the `semantic_memory` group, on the path `site` (PYTHONPATH)."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{name}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    info = site / f"{name}_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[semantic_memory]\n{name} = {name}\n")
    return site


def memory_mcp(tmp_path: Path, site: Path, *args: str, stdin: str | None = None
               ) -> subprocess.CompletedProcess[str]:
    """`memory-mcp ARGS` as a user runs it, with the plugins installed on `site`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    # MEMORY_PORT 9 (closed): `doctor` must not ask a service the user runs on 8765
    env.update({"PYTHONPATH": str(site), "HOME": str(tmp_path), "MEMORY_PORT": "9",
                "MEMORY_DB_PATH": str(tmp_path / "m.db"), "MEMORY_PLUGINS": "bm25_porter," +
                ",".join(p.stem for p in site.glob("*.py"))})
    return subprocess.run([sys.executable, "-c", "from semantic_memory.entry import main; main()",
                           *args], env=env, input=stdin, capture_output=True, text=True,
                          timeout=60)


def one_line_naming(output: str, name: str) -> list[str]:
    assert "Traceback" not in output, output
    return [line for line in output.splitlines() if f"plugin {name} ({name}-plugin 0.1)" in line]


# --- loading ---------------------------------------------------------------------------------

def test_a_register_commands_that_raises_leaves_out_only_its_commands(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "cmdboom", """
        from semantic_memory.hookspecs import hookimpl

        @hookimpl
        def register_commands(cli):
            @cli.command("half-added")
            def half():
                pass
            raise RuntimeError("commands exploded")
        """)
    stored = memory_mcp(tmp_path, site, "store", "the build needs java 21")
    assert stored.returncode == 0 and stored.stdout.startswith("new ")
    assert len(one_line_naming(stored.stderr, "cmdboom")) == 1
    assert "register_commands failed: RuntimeError: commands exploded" in stored.stderr
    shown = memory_mcp(tmp_path, site, "--help")
    assert shown.returncode == 0 and "recall" in shown.stdout and "half-added" not in shown.stdout
    listed = memory_mcp(tmp_path, site, "plugins")
    assert listed.returncode == 0
    assert [line for line in listed.stdout.splitlines() if line.startswith("broken: ")] == [
        "broken: plugin cmdboom (cmdboom-plugin 0.1): register_commands failed: RuntimeError: "
        "commands exploded; its commands are left out"]


def test_a_plugin_cannot_replace_a_core_command_or_an_earlier_plugins() -> None:
    class Hijack:
        @hookimpl
        def register_commands(self, cli: click.Group) -> None:
            @cli.command("store")
            def store() -> None:
                click.echo("hijacked")

            @cli.command("hello")
            def hello() -> None:
                click.echo("hello")

    class Late:
        @hookimpl
        def register_commands(self, cli: click.Group) -> None:
            @cli.command("hello")
            def hello() -> None:
                click.echo("late")

    @click.group()
    def group() -> None:
        pass

    @group.command("store")
    def store() -> None:
        click.echo("core")

    core = group.commands["store"]
    pm = build_plugin_manager(Settings(plugins="none"), [Hijack(), Late()])
    add_plugin_commands(pm, group)
    assert group.commands["store"] is core and "hello" in group.commands
    assert ".Hijack." in group.commands["hello"].callback.__qualname__
    assert [str(p) for p in pm.problems] == [
        "plugin Hijack: command 'store' refused: it is a core command",
        "plugin Late: command 'hello' refused: it is a command of Hijack"]


def test_sys_exit_or_printing_at_import_is_an_import_failure_not_a_dead_cli(
        tmp_path: Path) -> None:
    site = install(tmp_path / "site", "quitter", """
        import sys
        sys.exit("plugin called sys.exit at import")
        """)
    install(site, "printer", """
        print("HELLO FROM PLUGIN IMPORT")
        """)
    listed = memory_mcp(tmp_path, site, "plugins", "--json")
    assert listed.returncode == 0
    rows = json.loads(listed.stdout)  # nothing but the JSON on stdout
    assert {"name": "quitter (quitter-plugin 0.1)",
            "broken": "not loaded: SystemExit: plugin called sys.exit at import"} in rows
    assert "printer" in {r["name"] for r in rows}
    assert "HELLO FROM PLUGIN IMPORT" in listed.stderr
    assert len(one_line_naming(listed.stderr, "quitter")) == 1
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}}
    served = memory_mcp(tmp_path, site, "--stdio", stdin=json.dumps(request) + "\n")
    answer = [json.loads(line) for line in served.stdout.splitlines()]  # JSON-RPC only
    assert answer and answer[0]["id"] == 1 and "result" in answer[0]


class Hijack:
    """A store kind claiming the core's scheme."""

    name = "hijack"
    schemes = ("sqlite",)

    @staticmethod
    def open(url: str, settings: Any) -> Any:
        raise RuntimeError("hijacked sqlite")


class StorePlugin:
    """A `register_stores` that misbehaves as `mode` says; marked trylast, which must not
    put it before the core's SQLite store."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    @hookimpl(trylast=True)
    def register_stores(self, register: Any) -> None:
        if self.mode == "raises":
            raise RuntimeError("register_stores boom")
        register({"raises": None, "junk": "not a store kind", "hijack": Hijack}[self.mode])


@pytest.mark.parametrize(("mode", "line"), [
    ("raises", "register_stores failed: RuntimeError: register_stores boom"),
    ("junk", "store kind refused: str is not a store kind (a class with name, schemes and "
             "open(url, settings))"),
    ("hijack", "store kind 'hijack': sqlite:// refused: store kind 'sqlite' opens it")])
def test_a_broken_store_plugin_is_left_out_and_sqlite_stays_the_cores(
        tmp_path: Path, mode: str, line: str) -> None:
    engine = testing.engine_with(tmp_path, StorePlugin(mode), plugins="bm25_porter")
    try:
        assert engine.plugin_problems == [f"plugin StorePlugin: {line}"]
        assert engine.store.name == "sqlite"
        uid = engine.store_one(NewMemory("the build needs java 21")).uid
        assert engine.recall("java")[0].memory.uid == uid
    finally:
        engine.close()


def test_a_store_plugin_that_raises_stops_no_command(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "storeboom", """
        from semantic_memory.hookspecs import hookimpl

        @hookimpl
        def register_stores(register):
            raise RuntimeError("register_stores boom")
        """)
    stored = memory_mcp(tmp_path, site, "store", "the build needs java 21")
    assert stored.returncode == 0 and stored.stdout.startswith("new ")
    assert one_line_naming(stored.stderr, "storeboom") == [
        "plugin storeboom (storeboom-plugin 0.1): register_stores failed: RuntimeError: "
        "register_stores boom"]
    listed = memory_mcp(tmp_path, site, "plugins")
    assert listed.returncode == 0
    assert "broken: plugin storeboom (storeboom-plugin 0.1): register_stores failed" \
        in listed.stdout


ADAPTER = """
    from semantic_memory.harness import HarnessAdapter, hookimpl

    class Adapter(HarnessAdapter):
        name = "{name}"
        binary = "{name}-agent"
        events = {{"prompt": "prompt"}}

        def session_id(self, payload):
            return payload.get("session")

        def config_files(self, target):
            return []

    @hookimpl
    def register_harnesses(register):
        register(Adapter())
    """


@pytest.mark.parametrize(("prelude", "logged"), [
    ("import sys; sys.exit(2)", "not loaded: SystemExit: 2"),
    ("raise RuntimeError('adapter import boom')", "not loaded: RuntimeError: adapter import boom"),
    ("print('IMPORT NOISE ON STDOUT')", None)])
def test_a_harness_adapter_failing_or_printing_at_import_never_reaches_the_hooks_answer(
        tmp_path: Path, prelude: str, logged: str | None) -> None:
    """The hook's exit status and stdout are what the harness reads: status 2 blocks the
    prompt in Claude Code, Codex and Kimi Code, and stdout goes into the model's context."""
    site = install(tmp_path / "site", "qahook",
                   f"\n    {prelude}" + ADAPTER.format(name="qahook"))
    payload = json.dumps({"session": "s1", "cwd": str(tmp_path), "prompt": "hello there"})
    done = memory_mcp(tmp_path, site, "hook", "qahook", "prompt", stdin=payload)
    assert done.returncode == 0 and done.stdout == "", done
    line = json.loads((tmp_path / "hooks.jsonl").read_text().splitlines()[-1])
    if logged is None:
        assert "IMPORT NOISE ON STDOUT" in done.stderr and line["outcome"] == "service down"
    else:
        assert line["outcome"] == "error" and line["warning"] == \
            f"plugin qahook (qahook-plugin 0.1): {logged}", line


# --- run time --------------------------------------------------------------------------------

class Answering(Channel):
    """A channel answering what a test gives it, for every query."""

    name = "answering"
    stores = ("sqlite", "postgresql")

    def __init__(self, answer: Any = None) -> None:
        self.answer = answer

    def index(self, conn: Any, memories: list[Memory], prepared: Any = None) -> None:
        pass

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        return self.answer() if callable(self.answer) else self.answer


def channel_plugin(*channels: Channel) -> Any:
    class Plugin:
        @hookimpl
        def register_channels(self, register: Any, settings: Any) -> None:
            for channel in channels:
                register(channel)

    return Plugin()


def engine_with(tmp_path: Path, *plugins: Any, **settings: Any) -> MemoryEngine:
    return testing.engine_with(tmp_path, *plugins, **{"plugins": "bm25_porter", **settings})


@pytest.mark.parametrize("fusion", ["score", "rrf"])
@pytest.mark.parametrize("hit", [
    {"score": "high"}, {"score": None}, {"score": float("nan")}, {"score": float("inf")},
    {"score": True}, {"score": 1.0, "signals": {"x": "notfloat"}},
    {"score": 1.0, "signals": {"x": float("nan")}}, {"score": 1.0, "signals": ["x"]},
    {"score": 1.0, "id": "1"}, {"score": 1.0, "id": 1.0}, {"score": 1.0, "id": "numpy"},
    {"score": 1.0, "id": 2**70}, {"score": 1.0, "id": -2**63 - 1}])  # no store binds these
def test_a_hit_with_a_bad_field_leaves_its_channel_out_of_that_recall(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, hit: dict[str, Any],
        fusion: str) -> None:
    channel = Answering()
    engine = engine_with(tmp_path, channel_plugin(channel), fusion=fusion)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        real = engine.get(uid).id
        if hit.get("id") == "numpy":
            import numpy as np

            hit = {**hit, "id": np.int64(real)}  # sqlite3 cannot bind it
        channel.answer = [ChannelHit(**{"id": real, **hit}), ChannelHit(real, 0.5)]
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
        assert [h.memory.uid for h in hits] == [uid] and "answering" not in hits[0].ranks
        lines = [r.getMessage() for r in caplog.records if "answering" in r.getMessage()]
        assert len(lines) == 1 and lines[0].startswith("channel answering: search answered")
        assert "recall goes on without it" in lines[0]
    finally:
        engine.close()


@pytest.mark.parametrize("fusion", ["score", "rrf"])
def test_ids_that_match_no_memory_take_no_rank_place(tmp_path: Path, fusion: str) -> None:
    import numpy as np

    channel = Answering()
    engine = engine_with(tmp_path, channel_plugin(channel), fusion=fusion)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        real = engine.get(uid).id
        channel.answer = [ChannelHit(9_001, 4.0), ChannelHit(9_002, 3.0),
                          ChannelHit(9_003, 2.0), ChannelHit(real, np.float32(1.0))]
        hits = engine.recall("kubernetes")
        assert [h.memory.uid for h in hits] == [uid]
        assert hits[0].ranks == {"porter": 1, "answering": 1}
    finally:
        engine.close()


class Hanging(Answering):
    """A channel whose search waits for `release` (a remote index that stopped answering)."""

    name = "hanging"

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.calls = 0

    def search(self, conn: Any, query: str, k: int, filters: RecallFilters) -> Any:
        self.calls += 1
        self.release.wait(120)
        return [ChannelHit(self.answer, 1.0)]


def test_a_search_that_never_answers_leaves_its_channel_out_until_it_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Past MEMORY_CHANNEL_TIMEOUT_S the recall answers without the channel; while that search
    runs the channel is not asked again (no thread piles up behind it); once it ends the
    channel is back."""
    channel = Hanging()
    engine = engine_with(tmp_path, channel_plugin(channel), channel_timeout_s=0.2,
                         serving=True)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        channel.answer = engine.get(uid).id
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            first = engine.recall("kubernetes")
            second = engine.recall("kubernetes")
        assert not channel.release.is_set()  # both answered while its search still waited
        assert [h.memory.uid for h in first] == [uid] and first[0].ranks == {"porter": 1}
        assert [h.memory.uid for h in second] == [uid] and channel.calls == 1
        lines = [r.getMessage() for r in caplog.records if "hanging" in r.getMessage()]
        assert lines == ["channel hanging: search took longer than 0.2 s "
                         "(MEMORY_CHANNEL_TIMEOUT_S); recall goes on without it until that "
                         "search ends"]
        channel.release.set()
        for _ in range(100):  # the late search ends on its worker
            if engine.recall("kubernetes")[0].ranks.get("hanging"):
                break
            threading.Event().wait(0.05)
        assert engine.recall("kubernetes")[0].ranks == {"porter": 1, "hanging": 1}
    finally:
        channel.release.set()
        engine.close()


class Expensive(Answering):
    """A channel that costs model time: searched after the cheap ones."""

    name = "dear"

    @property
    def expensive(self) -> bool:
        return True


def test_a_channel_left_without_time_by_a_hung_one_says_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A hung cheap channel spent the recall's deadline; the expensive one searched after it
    was said to have found "no thread free" though every worker was."""
    hung, dear = Hanging(), Expensive()
    engine = engine_with(tmp_path, channel_plugin(hung, dear), channel_timeout_s=0.2,
                         serving=True, fast_path=False)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        hung.answer = engine.get(uid).id
        dear.answer = lambda: [ChannelHit(hung.answer, 1.0)]
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            first = engine.recall("kubernetes")
            second = engine.recall("kubernetes")
        assert first[0].ranks == {"porter": 1}
        assert second[0].ranks == {"porter": 1, "dear": 1}  # the hung one is skipped now
        lines = [r.getMessage() for r in caplog.records if "dear" in r.getMessage()]
        assert lines == ["channel dear: not searched: the channels searched before it took the "
                         "recall's 0.2 s (MEMORY_CHANNEL_TIMEOUT_S); recall goes on without it"]
    finally:
        hung.release.set()
        engine.close()


def test_a_one_off_command_waits_for_a_slow_channel(tmp_path: Path) -> None:
    """Outside the service (a CLI command, a benchmark) no agent waits: a slow search, such as
    one loading a large model first, still answers."""
    channel = Hanging()
    engine = engine_with(tmp_path, channel_plugin(channel), channel_timeout_s=0.2)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        channel.answer = engine.get(uid).id
        threading.Timer(1.0, channel.release.set).start()  # five times the limit
        assert engine.recall("kubernetes")[0].ranks == {"porter": 1, "hanging": 1}
    finally:
        channel.release.set()
        engine.close()


def test_a_hung_search_holds_neither_close_nor_the_process_exit(tmp_path: Path) -> None:
    """The workers are daemons: a search that never ends does not keep a command (or the
    service) from exiting once it is done."""
    code = textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_plugin_isolation import Hanging, channel_plugin, engine_with
        from pathlib import Path
        from semantic_memory.models import NewMemory
        channel = Hanging()
        engine = engine_with(Path({str(tmp_path)!r}), channel_plugin(channel),
                             channel_timeout_s=0.2, serving=True)
        channel.answer = engine.get(engine.store_one(NewMemory("kubernetes notes")).uid).id
        print(len(engine.recall("kubernetes")), channel.release.is_set(), flush=True)
        engine.close()
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=100)  # a hang guard: the search itself waits 120 s
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "False"]


def test_a_channel_timeout_out_of_range_is_refused() -> None:
    with pytest.raises(ConfigError, match="MEMORY_CHANNEL_TIMEOUT_S must be within 0..600"):
        Settings.from_env({"MEMORY_CHANNEL_TIMEOUT_S": "-1"})
    assert Settings.from_env({"MEMORY_CHANNEL_TIMEOUT_S": "0"}).channel_timeout_s == 0


class BrokenPostProcessing:
    """modify_hits and format_injection that misbehave in the way `mode` says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    @hookimpl
    def modify_hits(self, query: str, hits: list[RecallHit], settings: Any, store: Any,
                    conn: Any) -> None:
        if self.mode == "raises":
            hits[0].score = -5.0  # half done, then fails: undone
            hits.clear()
            raise KeyError("boost")
        if self.mode == "wrong":
            hits[0].score = "high"  # type: ignore[assignment]

    @hookimpl
    def format_injection(self, query: str, hits: list[RecallHit], budget_chars: int) -> Any:
        if self.mode == "raises":
            raise RuntimeError("formatter exploded")
        return "plain text, no wrapper"


@pytest.mark.parametrize("mode", ["raises", "wrong"])
def test_a_post_processing_hook_that_misbehaves_is_skipped_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    plugin = BrokenPostProcessing(mode)
    engine = engine_with(tmp_path, plugin)
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        plain = engine_with(tmp_path / "plain")  # the same memory without the plugin
        plain.store_one(NewMemory("kubernetes upgrade notes"))
        expected = plain.recall("kubernetes")[0].score
        plain.close()
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
            block = engine.injection("kubernetes", hits, 2_000)
        assert [h.memory.uid for h in hits] == [uid] and hits[0].score == expected
        assert block.uids == [uid] and block.text.startswith("<")  # the core's wrapper
        lines = [r.getMessage() for r in caplog.records]
        assert len([line for line in lines if "modify_hits" in line]) == 1
        assert len([line for line in lines if "format_injection" in line]) == 1
        assert all(line.startswith("plugin BrokenPostProcessing: ") and "skipped" in line
                   for line in lines), lines
    finally:
        engine.close()


class HalfRight:
    """Post-processing that answers the right types with wrong values inside: a NaN score
    (`nan`), or `block`."""

    def __init__(self, block: InjectionBlock | None = None, nan: bool = False) -> None:
        self.block, self.nan = block, nan

    @hookimpl
    def modify_hits(self, query: str, hits: list[RecallHit], settings: Any, store: Any,
                    conn: Any) -> None:
        if self.nan:
            hits[0].score = float("nan")

    @hookimpl
    def format_injection(self, query: str, hits: list[RecallHit], budget_chars: int) -> Any:
        return self.block


@pytest.mark.parametrize(("block", "why"), [
    (InjectionBlock(text=None, uids=[]),  # type: ignore[arg-type]
     "answered an InjectionBlock whose text is NoneType, not a str"),
    (InjectionBlock(text="a block", uids="x"),  # type: ignore[arg-type]
     "answered an InjectionBlock whose uids are str, not a list of str")])
def test_a_format_injection_block_with_a_wrong_field_says_which(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, block: InjectionBlock,
        why: str) -> None:
    engine = engine_with(tmp_path, HalfRight(block))
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            injected = engine.injection("kubernetes", engine.recall("kubernetes"), 2_000)
        assert injected.uids == [uid]  # the core's formatter answered
        assert [r.getMessage() for r in caplog.records] == [
            f"plugin HalfRight: format_injection {why}; skipped"]
    finally:
        engine.close()


def test_a_modify_hits_problem_is_logged_without_the_memory_content(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = engine_with(tmp_path, HalfRight(nan=True))
    try:
        uid = engine.store_one(NewMemory("kubernetes upgrade notes")).uid
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            hits = engine.recall("kubernetes")
        assert math.isfinite(hits[0].score)  # undone
        assert [r.getMessage() for r in caplog.records] == [
            f"plugin HalfRight: modify_hits left memory {uid} with score nan, not a finite "
            "number; skipped for this recall"]
    finally:
        engine.close()


def test_a_channel_status_that_raises_shows_the_error_in_stats(tmp_path: Path) -> None:
    class Moody(Answering):
        name = "moody"

        def status(self) -> str | None:
            raise RuntimeError("no mood")

    engine = engine_with(tmp_path, channel_plugin(Moody([])))
    try:
        status = {c["name"]: c["status"] for c in engine.stats()["channels"]}
        assert status["moody"] == "status failed: RuntimeError: no mood"
        assert status["porter"] is None
    finally:
        engine.close()


def test_a_filter_that_raises_refuses_the_memory_naming_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    class Picky:
        @hookimpl
        def filter_ingest(self, memory: NewMemory, settings: Any) -> None:
            if "boom" in memory.content:
                raise KeyError("missing")

    engine = engine_with(tmp_path, Picky())
    try:
        with caplog.at_level(logging.WARNING, "semantic_memory"):
            refused = engine.store_one(NewMemory("boom: an api key abc"))
        assert refused.status == "rejected" and refused.uid is None
        assert refused.reason == ("plugin Picky: filter_ingest failed (KeyError: 'missing'); "
                                  "refused rather than stored unfiltered")
        assert [r.getMessage() for r in caplog.records] == [refused.reason]
        assert engine.count() == 0
        kept = engine.store_one(NewMemory("a calm note"))
        assert kept.status == "new"
        edited = engine.update(kept.uid, content="boom again")
        assert edited.status == "rejected" and "Picky" in edited.reason
        assert engine.get(kept.uid).content == "a calm note"
    finally:
        engine.close()


@pytest.mark.sqlite_only
def test_bind_and_setup_failures_are_listed_by_plugins_and_doctor(tmp_path: Path) -> None:
    class BadBind(Answering):
        name = "badbind"

        def bind(self, *, store: Any, embedder: Any) -> None:
            raise RuntimeError("bind exploded")

    class BadSetup(Answering):
        name = "badsetup"

        def setup(self, conn: Any) -> None:
            raise RuntimeError("setup exploded")

    env = {"MEMORY_DB_PATH": str(tmp_path / "m.db"), "MEMORY_PLUGINS": "bm25_porter",
           "HOME": str(tmp_path), "MEMORY_PORT": "9"}
    expected = ["plugin Plugin: channel 'badbind' left out: bind failed: RuntimeError: "
                "bind exploded",
                "plugin Plugin: channel 'badsetup' left out: setup failed: RuntimeError: "
                "setup exploded"]

    def loaded() -> Any:
        return build_plugin_manager(Settings.from_env(env), [channel_plugin(BadBind(),
                                                                            BadSetup())])

    listed = CliRunner().invoke(cli, ["plugins"], obj=loaded(), env=env)
    assert listed.exit_code == 0, listed.output
    assert [line[len("broken: "):] for line in listed.stdout.splitlines()
            if line.startswith("broken: ")] == expected
    doctor = CliRunner().invoke(cli, ["doctor", "--json"], obj=loaded(), env=env)
    assert json.loads(doctor.stdout)["plugin_problems"] == expected


def test_each_problem_is_printed_once_per_process_with_its_distribution(tmp_path: Path) -> None:
    site = install(tmp_path / "site", "wrongsig", """
        from semantic_memory.hookspecs import hookimpl

        @hookimpl
        def register_channels(register, settings, extra):
            pass
        """)
    line = ("plugin wrongsig (wrongsig-plugin 0.1): not loaded: PluginValidationError: Plugin "
            "'wrongsig' for hook 'register_channels'")
    for args in (["recall", "anything"], ["stats"], ["plugins"], ["doctor"]):
        done = memory_mcp(tmp_path, site, *args)
        assert "Traceback" not in done.stderr
        printed = done.stderr.splitlines() + done.stdout.splitlines()
        assert len([x for x in printed if x.startswith(line)]) == 1, (args, printed)
        if args[0] in ("plugins", "doctor"):  # and listed once among the problems
            assert len([x for x in printed if x.startswith(f"broken: {line}")]) == 1


def test_an_invalid_channel_name_is_refused_with_the_rule(tmp_path: Path) -> None:
    class Spaced(Answering):
        name = "has space"

    engine = engine_with(tmp_path, channel_plugin(Spaced()))
    try:
        assert engine.plugin_problems == [
            "plugin Plugin: channel refused: Spaced has no valid name (got 'has space'; a name "
            "is 1 to 64 letters, digits, _ . : -, starting with a letter or digit)"]
    finally:
        engine.close()
