"""Hooks on a machine too loaded to run them in time (QA concurrency findings 1-3): a "remember"
is never lost to the budget running out at the wrong moment, a write the grace ran out on is an
`error` the model hears of, and a hook's own lateness never starts the shared back-off.

Each runs real `memory-mcp hook …` processes. A starved machine is stood in for by stopping the
process (SIGSTOP) or by one import that sleeps until a point past the budget (a
`sitecustomize` on PYTHONPATH: the rest of the hook runs as installed), so the budget runs out
exactly where the finding says; the load test runs two busy loops beside the hooks."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_support import closed_port, hook_env, hook_log, run_hook
from lock_support import write_lock_held
from semantic_memory import spool
from semantic_memory.harness import transcript
from semantic_memory.harness.client import ServiceClient, ServiceTimeout
from semantic_memory.harness.runner import WRITE_GRACE_S
from test_plugin_isolation import install
from test_service_support import Service, memory_mcp_command, start_service

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="the watchdog is POSIX")

#: The hooks' budget in these tests, and the write grace past it.
BUDGET_S = 1.5
GRACE_S = WRITE_GRACE_S

#: Makes the first import of $SLOW_IMPORT sleep until $SLOW_IMPORT_UNTIL_S past the start of
#: the interpreter, inside the module's own execution (the module half-imported meanwhile).
SLOW_IMPORT = """
import os, sys, time

_NAME = os.environ["SLOW_IMPORT"]
_UNTIL = time.monotonic() + float(os.environ["SLOW_IMPORT_UNTIL_S"])


class _SlowLoader:
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module):
        while time.monotonic() < _UNTIL:
            time.sleep(0.01)
        self.real.exec_module(module)


class _SlowFinder:
    def find_spec(self, name, path=None, target=None):
        if name != _NAME:
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _SlowLoader(spec.loader)
        return spec


sys.meta_path.insert(0, _SlowFinder())
"""


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("hook-load"))
    yield svc
    svc.stop()


def slow_import(tmp: Path, env: dict[str, str], module: str, until_s: float) -> dict[str, str]:
    """`env` with `module`'s first import sleeping until `until_s` past the process start."""
    folder = tmp / "slow-import"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(SLOW_IMPORT)
    path = os.pathsep.join(filter(None, (str(folder), env.get("PYTHONPATH"))))
    return env | {"PYTHONPATH": path, "SLOW_IMPORT": module,
                  "SLOW_IMPORT_UNTIL_S": str(until_s)}


def down_env(tmp: Path, **extra: str) -> dict[str, str]:
    return hook_env(tmp, f"http://127.0.0.1:{closed_port()}", MEMORY_HOOK_BUDGET_S=str(BUDGET_S),
                    **extra)


def remember(session: str, fact: str, cwd: Path) -> dict[str, Any]:
    return {"hook_event_name": "UserPromptSubmit", "session_id": session, "cwd": str(cwd),
            "transcript_path": "/nonexistent", "prompt": f"remember that {fact}"}


def spooled_facts(tmp: Path) -> list[str]:
    bodies = [record["body"] for _, record in spool.records(tmp / "spool") if record]
    return [item["content"] for body in bodies for item in body.get("items", [body])]


def process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0].decode()


# --- 1: the budget runs out while `re` is first imported ----------------------------------


def test_a_remember_whose_budget_ends_inside_the_first_import_of_re_is_spooled(
        tmp_path: Path) -> None:
    """The watchdog fires while the prompt's "remember" test imports `re` for the first time.
    Its handler asked the same test, met the half-imported module (`partially initialized
    module 're' has no attribute 'I'`), and the remember was lost as an `error`, the model
    not told. It only reads what the run noted now: the run goes on offline and spools it."""
    env = slow_import(tmp_path, down_env(tmp_path), "re", BUDGET_S + GRACE_S / 4)
    done = run_hook("claude-code", "UserPromptSubmit",
                    remember("r1", "the ledger service listens on port 7311", tmp_path), env)
    entry = hook_log(tmp_path)[-1]
    assert done.returncode == 0, done.stderr
    assert entry["outcome"] == "spooled", entry
    assert "before the write was made" in entry["detail"], entry  # the budget did run out
    assert spooled_facts(tmp_path) == ["the ledger service listens on port 7311"]
    assert "will store this as a memory" in done.stdout


@pytest.mark.parametrize("prompt", [
    "remember that the port is 5432", "Remember: use pnpm", "REMEMBER — tabs, not spaces",
    "  remember：端口 5432", '"remember that x is 1"', "\u201cremember: y\u201d", "'remember z'",
    '"\\"remember that w is 2\\""', "merk dir, dass x", "запомни, что x", "记住：端口 5432",
    "覚えておいて：x", "기억해줘: x"])
def test_a_remember_is_told_from_a_recall_without_a_pattern(prompt: str) -> None:
    """The run tells a recall from a possible "remember" before any `import re`
    (`may_remember`), so a recall is stopped at its budget at once, and a starved remember is
    named as one. Every prompt that `remembered` takes passes it."""
    assert transcript.remembered(prompt) is not None, prompt
    assert transcript.may_remember(prompt), prompt


def test_may_remember_is_false_only_where_remembered_never_looks() -> None:
    """False only for prompts whose text inside its quotes (`unquote`, as `remembered` reads
    them) does not start with a "remember" word: random prompts of quotes, spaces, escapes
    and those words."""
    parts = ["remember", "Remember", " ", "\t", "\u3000", '"', "'", "\u201c", "\u201d", "\u2018",
             "\u2019", "\\", '\\"', "that", "x", ":", "记住", "：", "merk", " dir", "what", "?"]
    rng = random.Random(20261207)
    for _ in range(20_000):
        prompt = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        if not transcript.may_remember(prompt):
            head = transcript.unquote(prompt).lstrip()[:8].lower()
            assert not head.startswith(transcript._REMEMBER_HEADS), repr(prompt)


# --- 2: input that was there when the budget ran out -------------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs /proc")
def test_input_that_came_while_the_hook_was_stopped_is_read_not_none_came(
        tmp_path: Path) -> None:
    """The hook waits on its empty stdin; the machine stops it (SIGSTOP) while the harness
    writes the whole input, until past the budget. The alarm then came between the bytes and
    the run noting them: logged `timeout … (none came)`, the remember dropped. The read now
    waits on its own deadline and the bytes are there: the remember is spooled."""
    proc = subprocess.Popen([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=down_env(tmp_path), cwd=tmp_path)
    assert proc.stdin is not None
    try:
        # Blocked on its stdin: nothing it does before reading it sleeps.
        deadline = time.monotonic() + 30
        while process_state(proc.pid) != "S" and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(proc.pid, signal.SIGSTOP)
        started = time.monotonic()
        proc.stdin.write(json.dumps(remember("p1", "the cache is warmed at 05:00",
                                             tmp_path)).encode())
        proc.stdin.close()
        time.sleep(max(BUDGET_S + GRACE_S / 4 - (time.monotonic() - started), 0))
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    proc.wait(timeout=30)  # it writes a line or two: no pipe fills up meanwhile
    assert proc.stdout is not None and proc.stderr is not None
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    entry = hook_log(tmp_path)[-1]
    assert proc.returncode == 0, err
    assert "none came" not in entry["detail"], entry
    assert entry["outcome"] == "spooled", entry
    assert spooled_facts(tmp_path) == ["the cache is warmed at 05:00"]
    assert b"will store this as a memory" in out


def test_input_that_stops_half_way_is_an_error_not_a_timeout(tmp_path: Path) -> None:
    """A harness that writes half its input and leaves stdin open: the hook waits for the
    rest through the budget and its grace, then logs an `error` (what the input held is not
    known), not a `timeout` as a recall that injected nothing."""
    proc = subprocess.Popen([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=down_env(tmp_path), cwd=tmp_path)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    data = json.dumps(remember("h1", "the queue drains at midnight", tmp_path)).encode()
    try:
        proc.stdin.write(data[:len(data) // 2])
        proc.stdin.flush()
        proc.wait(timeout=30)  # stdin stays open until the hook has exited
    finally:
        proc.stdin.close()
    with proc.stdout, proc.stderr:
        out, err = proc.stdout.read(), proc.stderr.read()
    entry = hook_log(tmp_path)[-1]
    assert proc.returncode == 0 and out == b"", err
    assert entry["outcome"] == "error", entry
    assert "the hook input did not all come within the budget and its write grace" \
        in entry["detail"], entry
    assert spooled_facts(tmp_path) == []


# --- 2: a write the grace ran out on -----------------------------------------------------


def test_a_remember_the_grace_ran_out_on_is_an_error_the_model_hears_of(
        tmp_path: Path) -> None:
    """Starved past its budget and its write grace before it made its write (here: reading
    the repository's settings), a remember was logged `timeout`, which `doctor` shows as a
    recall that injected nothing, and the model was not told. It is an `error` naming it
    now, and the model reads that it is not remembered (as when the disk is full)."""
    env = slow_import(tmp_path, down_env(tmp_path), "semantic_memory.harness.repo_config",
                      BUDGET_S + GRACE_S * 1.2)
    done = run_hook("claude-code", "UserPromptSubmit",
                    remember("g1", "the nightly export runs on runner-12", tmp_path), env)
    entry = hook_log(tmp_path)[-1]
    assert done.returncode == 0, done.stderr
    assert entry["outcome"] == "error", entry
    assert entry["detail"].endswith("before the write was made: the remember was not stored"), \
        entry
    assert "write grace" in entry["detail"], entry
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "could NOT store this" in context and "not remembered" in context, context
    assert "the remember was not stored" in done.stderr
    assert spooled_facts(tmp_path) == []


#: A harness adapter whose transcript reader takes QA_HANG_S (a transcript too long for a
#: machine this loaded, or a plugin that hangs).
SLOW_FLUSH_ADAPTER = """
    import os, time
    from semantic_memory.harness import HarnessAdapter, hookimpl

    class Adapter(HarnessAdapter):
        name = "qaslowflush"
        events = {"compact": "compact"}

        def compacted_turns(self, payload):
            time.sleep(float(os.environ["QA_HANG_S"]))
            return []

    @hookimpl
    def register_harnesses(register):
        register(Adapter())
    """


def test_a_flush_the_grace_ran_out_on_in_its_adapter_is_an_error_naming_both(
        tmp_path: Path) -> None:
    """A flush still reading its transcript when the budget and the grace ran out lost its
    write, and was logged `timeout`, as a recall that injected nothing would be. It is an
    `error` now, naming the adapter method it was in and the flush it did not write."""
    site = install(tmp_path / "site", "qaslowflush", SLOW_FLUSH_ADAPTER)
    env = down_env(tmp_path, QA_HANG_S=str((BUDGET_S + GRACE_S) * 3),
                   MEMORY_PLUGINS="bm25_porter,qaslowflush")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), env.get("PYTHONPATH"))))
    done = subprocess.run([*memory_mcp_command(), "hook", "qaslowflush", "compact"],
                          input=json.dumps({"session": "f1", "cwd": str(tmp_path)}), env=env,
                          capture_output=True, text=True, timeout=60)
    entry = hook_log(tmp_path)[-1]
    assert done.returncode == 0 and done.stdout == "", done
    assert entry["outcome"] == "error", entry
    assert entry["detail"].endswith("in the qaslowflush adapter's compacted_turns() "
                                    "(qaslowflush): the flush was not written"), entry
    assert "write grace" in entry["detail"], entry


# --- 3: a hook's own lateness starts no back-off -----------------------------------------


def test_a_hook_starved_past_its_grace_after_a_slow_write_starts_no_back_off(
        service: Service, tmp_path: Path) -> None:
    """A remember's write waits behind a long writer and times out; the machine then starves
    the hook (spooling it) past its budget and grace. Its probe of the service had no time
    at all, so "no answer" started the 30 s back-off for every agent though the service
    answers. A probe given less than its PROBE_S now tells nothing: no back-off, and the next
    recall asks the service."""
    project = "starved-hook"
    with service.client() as http:
        assert http.post("/ingest", json={
            "content": "The heron deploys are rolled back with heron-ctl rollback",
            "project": project}).json()["status"] == "new"
    env = hook_env(tmp_path, service.url, MEMORY_HOOK_BUDGET_S=str(BUDGET_S),
                   MEMORY_PROJECT=project)
    with write_lock_held(service.tmp / "memory.db"):
        said = run_hook("claude-code", "UserPromptSubmit",
                        remember("b1", "heron deploys freeze on fridays", tmp_path),
                        slow_import(tmp_path, env, "semantic_memory.spool",
                                    BUDGET_S + GRACE_S * 1.2))
    assert spooled_facts(tmp_path) == ["heron deploys freeze on fridays"]
    found = run_hook("claude-code", "UserPromptSubmit", {
        "hook_event_name": "UserPromptSubmit", "session_id": "b2", "cwd": str(tmp_path),
        "prompt": "how do we roll back the heron deploys?"}, env)
    remembered, recalled = hook_log(tmp_path)
    assert said.returncode == 0 and found.returncode == 0
    assert not (tmp_path / "hooks.backoff.json").exists(), remembered
    assert remembered["outcome"] == "spooled", remembered
    assert remembered["detail"].endswith("no time left to probe the service, no back-off"), \
        remembered
    assert recalled["outcome"] == "injected", recalled
    assert "heron-ctl rollback" in found.stdout


def test_a_request_there_was_no_time_to_send_is_not_the_services_failure(
        service: Service) -> None:
    """Raised before anything is sent, "no time left in the hook's budget" is a timeout to a
    write (it spools) but says nothing of the service: it is never the client's `failure`,
    which is what the back-off starts from."""
    client = ServiceClient(service.url, time.monotonic() - 0.001)
    with pytest.raises(ServiceTimeout, match="no time left in the hook's budget"):
        client.request("HEAD", "/")
    assert client.failure is None and not client.answered and not client.waiting


# --- all three, under load -----------------------------------------------------------------


def test_remembers_under_load_are_all_spooled_whatever_the_budget(tmp_path: Path) -> None:
    """QA's repro, kept short: two busy loops stand in for other agents on a 2-core machine,
    and remember hooks run with budgets from under their start-up to a few times it (stdin a
    regular file: the input is there from the start). Every one is spooled: none lost to the
    first `import re`, none taken for "no input", none logged as a timeout."""
    (tmp_path / ".git").mkdir()
    budgets = [round(0.10 + 0.03 * i, 2) for i in range(10)]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for i, budget in enumerate(budgets):
            payload = tmp_path / "in.json"
            payload.write_text(json.dumps(remember(f"l{i}", f"sweep {i} uses port {7000 + i}",
                                                   tmp_path)))
            with payload.open("rb") as stdin:
                done = subprocess.run([*memory_mcp_command(), "hook", "claude-code",
                                       "UserPromptSubmit"], stdin=stdin, capture_output=True,
                                      env=down_env(tmp_path) | {
                                          "MEMORY_HOOK_BUDGET_S": str(budget)},
                                      cwd=tmp_path, timeout=60)
            assert done.returncode == 0, done.stderr
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    log = hook_log(tmp_path)
    assert [e["outcome"] for e in log] == ["spooled"] * len(budgets), log
    assert sorted(spooled_facts(tmp_path)) == sorted(f"sweep {i} uses port {7000 + i}"
                                                      for i in range(len(budgets)))
