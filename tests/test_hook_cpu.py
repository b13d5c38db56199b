"""A hook process is light on CPU (issue #25): it imports only what one hook needs, costs at
most a few bare interpreters in CPU time, and its stand-ins for heavier modules (`lite`,
`HookSettings`, the hand-written matchers, the pluggy-free `hookimpl`) agree with what they
stand in for."""

from __future__ import annotations

import configparser
import json
import math
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pluggy
import pytest
from harness_support import closed_port, hook_env, hook_log
from semantic_memory import lite
from semantic_memory.config import ConfigError, Settings
from semantic_memory.harness import hookimpl
from semantic_memory.harness.project import _FirstValues, _plain_config, scp_like
from semantic_memory.harness.registry import (
    _cached_entry_points,
    _keep_first,
    _named_entry_points,
    _path_key,
    find_adapter,
    refusal,
)
from semantic_memory.harness.settings import FIELDS, HookSettings
from test_service_support import Service, memory_mcp_command, start_service

#: What a hook process must never import (issue #25), and what it no longer needs.
HEAVY = ("pluggy", "click", "rich", "pydantic", "numpy", "starlette")
AVOIDED = ("typing", "dataclasses", "pathlib", "inspect", "importlib.metadata", "json",
           "socket", "signal", "re", "semantic_memory.config", "semantic_memory.plugins",
           "semantic_memory.safety.redaction")
PROMPT = "Which Redis database does the checkout test fixture use on CI?"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("hook-cpu"))
    yield svc
    svc.stop()


def transcript(path: Path, turns: int = 20, long: bool = False) -> str:
    """`turns` exchanges; `long`: each reply long enough to be cut into three memories."""
    with path.open("w") as handle:
        for i in range(turns):
            reply = f"Module {i} pins an old compiler; bump it in the lock file."
            if long:
                reply += f" Then rebuild module {i} and rerun its tests on the runners." * 50
            handle.write(json.dumps({"type": "user", "message": {
                "role": "user", "content": f"Question {i}: why does the build of module {i} "
                                           "fail on the CI runners?"}}) + "\n")
            handle.write(json.dumps({"type": "assistant", "message": {
                "role": "assistant", "content": [{"type": "text", "text": reply}]}}) + "\n")
    return str(path)


def cases(tmp: Path) -> dict[str, tuple[str, str, dict[str, Any], str]]:
    """name -> (harness, event, payload, outcomes that show the hook did its work)."""
    cwd = str(tmp)
    return {
        "claude-code recall": ("claude-code", "UserPromptSubmit",
                               {"session_id": "a", "cwd": cwd, "prompt": PROMPT},
                               "injected nothing relevant"),
        "claude-code tool": ("claude-code", "PostToolUse", {
            "session_id": "a", "cwd": cwd, "tool_name": "Bash",
            "tool_input": {"command": "pytest -q"},
            "tool_response": {"stdout": "3 passed in 0.5s\n" * 5, "stderr": ""}}, "stored"),
        "claude-code flush": ("claude-code", "PreCompact", {
            "session_id": "a", "cwd": cwd, "trigger": "auto",
            "transcript_path": transcript(tmp / "t.jsonl")}, "stored"),
        # Each exchange goes whole, for the service to redact and cut: the hook loads no
        # secret rules (it did to redact them itself, ~100 ms of CPU and more per MB).
        "claude-code long flush": ("claude-code", "PreCompact", {
            "session_id": "l", "cwd": cwd, "trigger": "auto",
            "transcript_path": transcript(tmp / "l.jsonl", long=True)}, "stored"),
        "claude-code resume": ("claude-code", "SessionStart", {
            "session_id": "r", "cwd": cwd, "source": "resume",
            "transcript_path": transcript(tmp / "r.jsonl")}, "injected nothing relevant"),
        "codex recall": ("codex", "UserPromptSubmit",
                         {"session_id": "b", "cwd": cwd, "prompt": PROMPT},
                         "injected nothing relevant"),
        "kimi-code recall": ("kimi-code", "UserPromptSubmit",
                             {"session_id": "c", "cwd": cwd,
                              "prompt": [{"type": "text", "text": PROMPT}]},
                             "injected nothing relevant"),
    }


def environment(tmp: Path, url: str) -> dict[str, str]:
    """The hook's environment, with two of the service's variables set as a shell that
    configures the service would have them (checked once, then remembered)."""
    env = hook_env(tmp, url, MEMORY_PLUGIN_TOOL_CAPTURE="Bash", MEMORY_HOOK_BUDGET_S="20",
                   MEMORY_DEVICE="cpu", MEMORY_PORT="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the first run leaves the byte-code, as installed
    return env


@pytest.mark.parametrize("case", ["claude-code recall", "claude-code tool", "claude-code flush",
                                  "claude-code long flush", "claude-code resume", "codex recall",
                                  "kimi-code recall"])
def test_hook_imports_only_what_it_needs(service: Service, tmp_path: Path, case: str) -> None:
    harness, event, payload, done = cases(tmp_path)[case]
    dump = tmp_path / "modules.txt"
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(dump)!r}, 'w').write('\\n'.join(sys.modules)))\n"
            f"sys.argv = ['memory-mcp', 'hook', {harness!r}, {event!r}]\n"
            "from semantic_memory.entry import main\nmain()\n")
    env = environment(tmp_path, service.url)
    for _ in range(2):  # the first run leaves byte-code and the settings check behind
        run = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload).encode(),
                             env=env, capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
    assert hook_log(tmp_path)[-1]["outcome"] in done.split(" ") or \
        hook_log(tmp_path)[-1]["outcome"] == "nothing relevant", hook_log(tmp_path)[-1]
    modules = set(dump.read_text().split("\n"))
    loaded = {name for name in modules if name.split(".")[0] in HEAVY or name in AVOIDED}
    assert not loaded, f"a {case} hook imported {sorted(loaded)}"


def test_a_spooled_write_imports_only_what_it_needs(tmp_path: Path) -> None:
    """A write the service cannot take goes to the spool: what a loaded machine runs most."""
    harness, event, payload, _ = cases(tmp_path)["claude-code tool"]
    dump = tmp_path / "modules.txt"
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(dump)!r}, 'w').write('\\n'.join(sys.modules)))\n"
            f"sys.argv = ['memory-mcp', 'hook', {harness!r}, {event!r}]\n"
            "from semantic_memory.entry import main\nmain()\n")
    env = environment(tmp_path, f"http://127.0.0.1:{closed_port()}")
    for expected in ("spooled", "spooled"):  # refused, then backing off
        run = subprocess.run([sys.executable, "-c", code], input=json.dumps(payload).encode(),
                             env=env, capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert hook_log(tmp_path)[-1]["outcome"] == expected
    modules = set(dump.read_text().split("\n"))
    loaded = {name for name in modules if name.split(".")[0] in HEAVY or name in AVOIDED}
    assert not loaded, f"a spooled write imported {sorted(loaded)}"
    assert len(list((tmp_path / "spool").glob("*.json"))) == 2


def test_injecting_non_ascii_memories_imports_only_what_it_needs(service: Service,
                                                                  tmp_path: Path) -> None:
    """Recalled text with dashes, accents and a "<" escapes the harness's tags without the
    wrapper's folding: that is imported only for a tag name spelt with other characters."""
    with service.client() as http:
        assert http.post("/ingest", json={
            "content": "The Redis database of the checkout fixture on CI is db 3 — set in "
                       "conftest.py (café); a<b ≤ c, <system-reminder> and ‹ b › stay data",
            "project": "hook-cpu-non-ascii"}).json()["status"] == "new"
    harness, event, payload, _ = cases(tmp_path)["claude-code recall"]
    dump = tmp_path / "modules.txt"
    code = ("import atexit, sys\n"
            f"atexit.register(lambda: open({str(dump)!r}, 'w').write('\\n'.join(sys.modules)))\n"
            f"sys.argv = ['memory-mcp', 'hook', {harness!r}, {event!r}]\n"
            "from semantic_memory.entry import main\nmain()\n")
    env = environment(tmp_path, service.url) | {"MEMORY_PROJECT": "hook-cpu-non-ascii"}
    for session in ("a", "b"):  # the first run leaves byte-code and the settings check behind
        data = json.dumps(payload | {"session_id": session}).encode()
        run = subprocess.run([sys.executable, "-c", code], input=data, env=env,
                             capture_output=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert hook_log(tmp_path)[-1]["outcome"] == "injected", hook_log(tmp_path)[-1]
        assert "&lt;system-reminder>" in run.stdout.decode()
    modules = set(dump.read_text().split("\n"))
    loaded = {name for name in modules if name.split(".")[0] in HEAVY or name in AVOIDED}
    assert not loaded, f"injecting non-ASCII text imported {sorted(loaded)}"


def cpu_ms(cmd: list[str], data: bytes, env: dict[str, str]) -> float:
    """User + system CPU time of one run of `cmd`, in ms."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None
    proc.stdin.write(data)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0
    return (usage.ru_utime + usage.ru_stime) * 1000


def test_hook_cpu_is_a_few_bare_interpreters(service: Service, tmp_path: Path) -> None:
    """Best of 5, the bare interpreter measured in the same loop (the goal is 2x; 3x leaves a
    loaded machine its noise)."""
    env = environment(tmp_path, service.url)
    bare = [sys.executable, "-c", "pass"]
    hooks = {name: ([*memory_mcp_command(), "hook", harness, event],
                    json.dumps(payload).encode())
             for name, (harness, event, payload, _) in cases(tmp_path).items()}
    for cmd, data in hooks.values():  # warm-up: byte-code, page cache
        cpu_ms(cmd, data, env)
    floor = math.inf
    best = dict.fromkeys(hooks, math.inf)
    for _ in range(5):
        floor = min(floor, cpu_ms(bare, b"", env))
        for name, (cmd, data) in hooks.items():
            best[name] = min(best[name], cpu_ms(cmd, data, env))
    ratios = {name: round(ms / floor, 2) for name, ms in best.items()}
    assert max(ratios.values()) <= 3, f"hook CPU / bare interpreter CPU: {ratios}"


# --- the stand-ins agree with what they stand in for ------------------------------------------

JSON_TEXTS = ['{"a": [1, 2.5, -3e5, true, false, null], "b": {"c": "d\\u00e9\\n"}}', " [] ",
              '"x"', "1", "NaN", "-Infinity", '{"a": 1} x', "", "{", '{"a": "\x01"}',
              "\ufeff{}", '[1, 2]\n\n', "123456789012345678901234567890", '"\\ud800"']


@pytest.mark.parametrize("text", JSON_TEXTS)
def test_lite_loads_is_json_loads(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16")):
        try:
            expected: Any = json.loads(data)
        except ValueError as exc:
            with pytest.raises(type(exc)) as raised:
                lite.loads(data)
            assert str(raised.value) == str(exc)
        else:
            got = lite.loads(data)
            assert json.dumps(got) == json.dumps(expected) and type(got) is type(expected)


@pytest.mark.parametrize("value", [
    {"a": [1, 2.5, float("inf"), None, True], "é": "\u2028<\"q\">", 3: "int key"},
    "plain", [], {"nested": {"deep": [{"x": -0.0}]}}, 10**30, (1, 2), {"set": {1}}])
def test_lite_dumps_is_json_dumps(value: Any) -> None:
    for default in (None, str):
        try:
            expected = json.dumps(value, ensure_ascii=False, default=default)
        except TypeError as exc:
            with pytest.raises(TypeError, match=re.escape(str(exc))):
                lite.dumps(value, default=default)
        else:
            assert lite.dumps(value, default=default) == expected


def test_hookimpl_is_pluggys_marker() -> None:
    def ours() -> None: ...

    def theirs() -> None: ...

    pluggy_hookimpl = pluggy.HookimplMarker("semantic_memory")  # what hookspecs.hookimpl is
    assert hookimpl(ours).semantic_memory_impl == \
        pluggy_hookimpl(theirs).semantic_memory_impl  # type: ignore[attr-defined]


def test_hook_settings_are_the_settings_fields() -> None:
    defaults = Settings()
    fields = Settings.__dataclass_fields__
    for name, (kind, default) in FIELDS.items():
        assert str(fields[name].type) == kind, name
        assert getattr(HookSettings(), name) == getattr(defaults, name), name
        if name != "db_path":
            assert default == getattr(defaults, name), name
    env = {"MEMORY_PLUGIN_LIMIT": "7", "MEMORY_PLUGIN_DEBUG": "yes", "MEMORY_HOOK_BUDGET_S": "2.5",
           "MEMORY_DB_PATH": "~/x.db", "MEMORY_PLUGIN_TOOL_CAPTURE": "Bash, Edit"}
    hook, full = HookSettings.from_env(env), Settings.from_env(env)
    for name in FIELDS:
        assert getattr(hook, name) == getattr(full, name), name
    assert hook.tool_capture() == full.tool_capture()
    assert (hook.spool_path, hook.backoff_path, hook.discovery_path, hook.resolved_db_path) == (
        full.spool_path, full.backoff_path, full.discovery_path, full.resolved_db_path)
    assert hook.rrf_k == full.rrf_k  # any other setting: read through Settings


@pytest.mark.parametrize("env", [{"MEMORY_PLUGIN_LIMIT": "many"}, {"MEMORY_PLUGIN_LIMIT": "0"},
                                 {"MEMORY_HOOK_BUDGET_S": "nan"}, {"MEMORY_PLUGIN_DEBUG": "maybe"},
                                 {"MEMORY_HOOK_BACKOFF_S": "-1"}, {"MEMORY_PORT": "many"},
                                 {"MEMORY_PLUGIN_BUDGET_CHARS": "300"},
                                 {"MEMORY_DB_PATH": "data/memory.db"},
                                 {"MEMORY_DISCOVERY_FILE": "run/server.json"}])
def test_hook_settings_refuse_what_settings_refuse(env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as expected:
        Settings.from_env(env)
    with pytest.raises(ValueError) as got:
        HookSettings.from_env(env)
    assert str(got.value) == str(expected.value)


def test_other_variables_are_checked_once_per_value(tmp_path: Path) -> None:
    env = {"MEMORY_DB_PATH": str(tmp_path / "memory.db"), "MEMORY_RRF_K": "60"}
    HookSettings.from_env(env)
    assert (tmp_path / "hooks.settings-checked").is_file()
    with pytest.raises(ConfigError, match="MEMORY_RRF_K"):
        HookSettings.from_env({**env, "MEMORY_RRF_K": "many"})
    with pytest.raises(ConfigError, match="MEMORY_DEVICE"):
        HookSettings.from_env({**env, "MEMORY_DEVICE": "tpu"})
    HookSettings.from_env(env)


SCP = re.compile(r"^(?:[^@/]+@)?(\[[^\]/\n]*\]|[^:/]+):(?!//)(.+)$")


def test_scp_like_is_the_pattern() -> None:
    rng = random.Random(7)
    samples = ["git@github.com:Acme/web.git", "host:path", "a@b@c:d", "@x:y", "a/b@c:d",
               "h://x", "h:", ":x", "u@:x", "h:x\n", "h:x\n\n", "h:\n",
               "git@[fd00::1]:team/app.git", "[::1]:x", "[a]b:c", "[:x"]
    samples += ["".join(rng.choice("a@/:\n[]") for _ in range(rng.randint(0, 9)))
                for _ in range(20_000)]
    for url in samples:
        match = SCP.match(url)
        assert scp_like(url) == (match.groups() if match else None), repr(url)


def test_plain_git_config_reads_as_configparser() -> None:
    rng = random.Random(11)
    pieces = ['[remote "origin"]', '\turl = git@h:o/r.git', "\tfetch = +refs/*:refs/*",
              '[remote "up"]', "  url=https://h/o/r", "[core]", "\tbare = false", "# c", "; c",
              "", "\t\tcontinued", "novalue", "[DEFAULT]", "url = d", " [x]y] ", "k: v", "= v",
              "[]", "[remote \"origin\"]", "URL = upper"]
    for _ in range(5_000):
        text = "\n".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        # the reference keeps an option's first value, as git fetches from a remote's first url
        parser = configparser.RawConfigParser(strict=False, dict_type=_FirstValues)
        try:
            parser.read_string(text)
            expected: Any = {s: parser.get(s, "url", fallback="") for s in parser.sections()}
        except configparser.Error:
            expected = None
        plain = _plain_config(text)
        if plain is not None:  # None: configparser reads it
            assert {s: v.get("url", "") for s, v in plain.items()} == expected, repr(text)


def test_a_second_adapter_for_a_harness_is_refused() -> None:
    class Adapter:
        def __init__(self, name: str) -> None:
            self.name = name

    first, second, other = Adapter("claude-code"), Adapter("claude-code"), Adapter("codex")
    lines: list[str] = []
    kept = _keep_first([(first, "dist-a"), (other, "dist-a"), (second, "dist-b")], lines)
    assert kept == {"claude-code": first, "codex": other}
    assert lines == [refusal("claude-code", "dist-a", "dist-b")]
    assert "dist-a" in lines[0] and "dist-b" in lines[0] and "\n" not in lines[0]


def test_the_harness_tag_folding_is_the_wrappers() -> None:
    """escape_tags folds ASCII as the wrapper's `fold` and gaps do (it imports those only for
    other characters; both take what reads as "<" from tag_chars.LESS_THAN)."""
    from semantic_memory.default_plugins.injection import NAME_GAP, fold
    from semantic_memory.harness.adapter import _fold_tag

    for c in map(chr, range(128)):
        assert _fold_tag(c) == NAME_GAP.sub("", fold(c)), repr(c)


@pytest.mark.parametrize("text", JSON_TEXTS)
def test_lite_try_loads_is_json_loads_or_none(text: str) -> None:
    for data in (text, text.encode("utf-8", "surrogatepass"), text.encode("utf-16"),
                 b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")):
        try:
            expected: Any = json.loads(data)
        except ValueError:
            expected = None
        assert json.dumps(lite.try_loads(data)) == json.dumps(expected)


def test_the_adapter_map_is_kept_until_an_import_folder_changes(tmp_path: Path) -> None:
    cache = str(tmp_path / "hooks.adapters.json")
    found = _cached_entry_points("claude-code", cache)
    assert found == _named_entry_points("claude-code") and found
    Path(cache).write_text(json.dumps({"key": _path_key(), "found": {
        "claude-code": [["claude_code", "no_such_module_here", "x"]]}}))
    settings = HookSettings(db_path=str(tmp_path / "memory.db"))
    assert find_adapter("claude-code", settings).name == "claude-code"  # stale: looked again
    assert json.loads(Path(cache).read_text())["found"]["claude-code"] == \
        [list(item) for item in found]
