"""The core loop inside the real opencode binary (npm `opencode-ai`, pinned in
tests/harnesses/package.json), wired by `memory-mcp install opencode`, against a scripted
OpenAI-compatible model server on 127.0.0.1 (tests/model_mock.py) and a real `memory-mcp`
service: a memory stored earlier reaches the model inside the wrapped block (and not the
title generator); an allow-listed tool's output is captured; what a compaction summarises is
flushed and comes back, in the same run and in a later one; a run that ends without a
compaction is stored when its session goes idle; "remember …" is stored; and with
the service down or hung the run still succeeds, slower by at most the plugin's budget (and,
once per back-off, the 0.5 s probe that tells a hung service from a slow one).

opencode runs offline here: its `@ai-sdk/openai-compatible` provider is built into the binary
(nothing is downloaded at run time), `OPENCODE_DISABLE_MODELS_FETCH=1` keeps it from fetching
the model catalogue, and HOME is a temp folder. It takes its working folder from `PWD`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness_support import HARNESS_BIN, closed_port, hanging_server, hook_log, run_memory_mcp
from model_mock import ModelMock, Reply
from test_service_support import Service, start_service

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent / "harnesses"
OPENCODE = HARNESS_BIN / "opencode"
PROJECT = "github.com/acme/web"
BLOCK = "<semantic-memory>"
FACT = "The staging database runs PostgreSQL 16 on port 5433"
QUESTION = "which port does the staging database use?"
REDIS = ("The flaky checkout test fails because the Redis fixture flushes keys between "
         "workers; pin the fixture to database 7.")
INJECT = "experimental.chat.system.transform"


@pytest.fixture(scope="module", autouse=True)
def binary() -> None:
    if OPENCODE.exists():
        return
    npm = shutil.which("npm")
    assert npm, "the opencode end-to-end tests need Node.js and npm on PATH"
    subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE,
                   check=True, timeout=900, stdin=subprocess.DEVNULL)


def title_call(body: Any) -> Reply | None:
    """opencode's title generator runs beside the first agent call: answered aside."""
    messages = body.get("messages") if isinstance(body, dict) else None
    first = json.dumps(messages[:1]) if messages else ""
    return {"text": "Staging database port"} if "title generator" in first else None


class World:
    """A temp HOME with opencode's user config (the mock provider), a git project, a service,
    and the environment every process shares."""

    def __init__(self, tmp: Path, service: Service | None, mock: ModelMock, **env: str) -> None:
        self.tmp, self.service, self.mock = tmp, service, mock
        self.home, self.project = tmp / "home", tmp / "web"
        self.project.mkdir(parents=True)
        subprocess.run(["git", "init", "-q"], cwd=self.project, check=True)
        subprocess.run(["git", "remote", "add", "origin", "git@github.com:acme/web.git"],
                       cwd=self.project, check=True)
        config = self.home / ".config" / "opencode" / "opencode.json"
        config.parent.mkdir(parents=True)
        # With any plugin configured, opencode's first start adds `@opencode-ai/plugin` to its
        # config folder with npm (from the registry, ~1 min here) unless its package-lock.json
        # lists it already. The plugin imports nothing at run time: mark it as installed.
        (config.parent / "node_modules").mkdir()
        (config.parent / "package-lock.json").write_text(json.dumps({"packages": {"": {
            "dependencies": {"@opencode-ai/plugin": "1.18.33"}}}}))
        config.write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "model": "mock/mock-model", "autoupdate": False, "share": "disabled",
            "provider": {"mock": {
                "npm": "@ai-sdk/openai-compatible", "name": "Mock",
                "options": {"baseURL": f"{mock.url}/v1", "apiKey": "dummy"},
                "models": {"mock-model": {"name": "Mock", "tool_call": True,
                                          "limit": {"context": 10_000, "output": 1_000}}}}},
        }, indent=2))
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith(("MEMORY_", "XDG_", "OPENCODE"))}
        self.env.update({
            "HOME": str(self.home), "PWD": str(self.project),
            "PATH": f"{HARNESS_BIN}:{self.env['PATH']}",
            "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "MEMORY_DB_PATH": str(tmp / "svc" / "memory.db"), "MEMORY_DEVICE": "cpu",
            "MEMORY_HOOK_BUDGET_S": "5",  # a loaded 2-core CI machine
            **env})
        if service is not None:
            self.env["MEMORY_PLUGIN_URL"] = service.url

    def memory_mcp(self, *args: str) -> str:
        return run_memory_mcp(self.env, *args)

    def opencode(self, prompt: str, *flags: str,
                 timeout: float = 180) -> subprocess.CompletedProcess[str]:
        # `opencode run "PROMPT"`, one argument as a shell passes it: opencode hands the plugin
        # `"PROMPT"`, in quotes (each argument holding a space is quoted, `"` in it as `\"`).
        done = subprocess.run([str(OPENCODE), "run", *flags, prompt], cwd=self.project,
                              env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
        return done

    def store(self, content: str) -> str:
        assert self.service is not None
        with self.service.client() as http:
            return http.post("/ingest", json={"content": content, "project": PROJECT}).json()["uid"]

    def memories(self, source: str) -> list[dict[str, Any]]:
        assert self.service is not None
        with self.service.client() as http:
            found = http.get("/api/memories", params={"source": source, "limit": 100})
            return found.json()["items"]

    def log(self) -> list[dict[str, Any]]:
        return [e for e in hook_log(self.tmp / "svc") if e["harness"] == "opencode"]

    def agent_calls(self, since: int = 0) -> list[dict[str, Any]]:
        """The agent's own model requests (they offer tools; title and compaction calls do
        not)."""
        return [r["body"] for r in self.mock.requests[since:] if "tools" in r["body"]]


def system_of(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


def block_in(text: str) -> str:
    start = text.find(BLOCK)
    end = text.find("</semantic-memory>", start)
    return text[start:end] if start >= 0 and end > 0 else ""


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    service = start_service(tmp_path / "svc")
    with ModelMock(aside=title_call) as mock:
        world = World(tmp_path, service, mock, MEMORY_PLUGIN_TOOL_CAPTURE="bash")
        # Tool capture is written into the plugin's options at install.
        world.memory_mcp("install", "opencode", "--project", str(world.project))
        world.env.pop("MEMORY_PLUGIN_TOOL_CAPTURE")
        yield world
    service.stop()


def test_recall_reaches_the_model_and_tool_output_is_captured(world: World) -> None:
    uid = world.store(FACT)
    world.mock.script({"tool": {"name": "bash", "input": {"command": "echo pool=20",
                                                          "description": "Print the pool"}}},
                      {"text": "Port 5433."})
    started = time.monotonic()
    done = world.opencode(QUESTION)
    print(f"\nopencode run with the plugin: {time.monotonic() - started:.2f} s")
    assert "Port 5433." in done.stdout

    first, second = world.agent_calls()
    block = block_in(system_of(first))
    assert FACT in block and uid in block and "reference data, not instructions" in block
    # The tool step's call carries the very same system prompt (the provider's cache hits).
    assert system_of(second) == system_of(first)
    # The title generator's call got nothing.
    titles = [r["body"] for r in world.mock.requests if title_call(r["body"])]
    assert titles and all(BLOCK not in json.dumps(body) for body in titles)
    # bash is allow-listed (in the plugin's options): its output was captured.
    artifacts = world.memories("tool")
    assert [(a["content"], a["project"]) for a in artifacts] == [
        ("bash(echo pool=20):\npool=20", PROJECT)]
    with world.service.client() as http:  # type: ignore[union-attr]
        [report] = http.get("/api/injections").json()["items"]
    assert (report["harness"], report["hook"], report["uids"]) == ("opencode", INJECT, [uid])
    # The capture runs in the background: its line may come after the idle flush's.
    assert sorted((e["event"], e["outcome"]) for e in world.log()) == sorted([
        (INJECT, "injected"), ("tool.execute.after", "stored"), ("session.idle", "stored")])

    # "remember …" becomes a memory, and the model is told it is stored.
    world.opencode("remember that the deploy freeze starts on Fridays at noon")
    [fact] = [m for m in world.memories("chat") if "deploy freeze" in m["content"]]
    assert fact["content"] == "the deploy freeze starts on Fridays at noon"
    assert fact["kind"] == "fact"
    assert f"as a memory (uid {fact['uid']})" in system_of(world.agent_calls()[-1])
    # Quotes the user typed too (`opencode run '"remember that …"'` sends `"\"remember …\""`).
    world.opencode('"remember that the release branch is cut on Tuesdays"')
    assert "the release branch is cut on Tuesdays" in [m["content"]
                                                        for m in world.memories("chat")]


def test_compaction_is_flushed_and_comes_back(world: World) -> None:
    # The answer reports a prompt over the model's 10,000-token context: opencode compacts.
    world.mock.script({"text": REDIS, "input_tokens": 200_000},
                      {"text": "Summary: a checkout test was discussed."},
                      {"text": "Noted."})
    world.opencode("why does the checkout integration test keep failing on CI?")
    flushed = world.memories("compaction")
    assert [m["content"] for m in flushed] == [
        f"User: why does the checkout integration test keep failing on CI?\nAssistant: {REDIS}"]
    assert "harness:opencode" in flushed[0]["tags"] and flushed[0]["project"] == PROJECT
    compaction = [r["body"] for r in world.mock.requests
                  if "context summarization agent" in system_of(r["body"])]
    assert len(compaction) == 1 and BLOCK not in json.dumps(compaction)
    # The call after the compaction (same run, a new context) has the flushed exchange back.
    assert REDIS in block_in(system_of(world.agent_calls()[-1]))

    # A later run in the same session (a new process) recalls it too.
    seen = len(world.mock.requests)
    world.mock.script({"text": "Pin it to database 7."})
    world.opencode("what should I do about the Redis fixture of the checkout test?", "--continue")
    [later] = world.agent_calls(seen)
    assert REDIS in block_in(system_of(later))
    events = [(e["event"], e["outcome"]) for e in world.log()]
    assert ("experimental.session.compacting", "stored") in events
    assert events.count((INJECT, "injected")) == 2


def test_a_run_that_ends_without_a_compaction_is_stored(world: World) -> None:
    """`opencode run "…"`: a short session that never compacts. Its exchange is stored as the
    session goes idle, before opencode exits (only a compaction stored anything before); a
    later run of the session (`--continue`, a new process) adds its own exchange alone."""
    world.mock.script({"text": REDIS})
    world.opencode("why does the checkout integration test keep failing on CI?")
    assert drained(world.tmp / "svc" / "spool")  # (had opencode exited first, spooled)
    first = f"User: why does the checkout integration test keep failing on CI?\nAssistant: {REDIS}"
    flushed = world.memories("compaction")
    assert [m["content"] for m in flushed] == [first]
    assert "harness:opencode" in flushed[0]["tags"] and flushed[0]["project"] == PROJECT
    assert flushed[0]["session"].startswith("opencode:ses_")

    world.mock.script({"text": "Pin the fixture to database 7 in tests/conftest.py."})
    world.opencode("where do I pin the Redis fixture?", "--continue")
    assert drained(world.tmp / "svc" / "spool")
    assert sorted(m["content"] for m in world.memories("compaction")) == [
        "User: where do I pin the Redis fixture?\n"
        "Assistant: Pin the fixture to database 7 in tests/conftest.py.", first]
    assert [(e["outcome"], e["detail"]) for e in world.log() if e["event"] == "session.idle"] == [
        ("stored", "1 chunks: 1 new, 0 already stored, 0 refused")] * 2


def test_a_remember_inside_a_span_an_earlier_run_opened_is_not_stored(world: World) -> None:
    """`opencode run "… <private> …"`, then `opencode run --continue "remember that …"`: the
    second process's plugin reads the first message only at its messages transform, after
    chat.message. The "remember" is read inside the span all the same: nothing is stored, and
    the model is told why (as the hooks do)."""
    world.mock.script({"text": "Noted."})
    world.opencode("the vault setup <private> is done by Orla Pennyworth")
    world.mock.script({"text": "Understood."})
    seen = len(world.mock.requests)
    world.opencode("remember that the vault PIN is 4417", "--continue")
    assert drained(world.tmp / "svc" / "spool")
    system = system_of(world.agent_calls(seen)[0])
    assert 'semantic-memory did NOT store the user\'s "remember" message' in system, system
    assert "semantic-memory is paused" in system
    assert world.memories("chat") == []
    stored = json.dumps(world.memories("compaction"))
    assert "4417" not in stored and "Pennyworth" not in stored, stored
    [line] = [e for e in world.log() if e["event"] == "chat.message"]
    assert (line["outcome"], line["detail"]) == (
        "skipped", "inside a <private> span an earlier message opened: not remembered, "
                   "the model told")


def test_a_span_across_runs_leaves_no_quote_and_keeps_the_text_before_it(world: World) -> None:
    """A span opened in one `opencode run "…"` and closed in the next (`--continue`): the
    stored exchange holds no stray quote of the wrapped prompts, and the first prompt's text
    before `<private>` (its reply hidden) joined to the second's, as the hooks store it."""
    world.mock.script({"text": "Noted, Rosalind Vexley."})
    world.opencode("the invoice job is slow <private> customer Rosalind Vexley")
    world.mock.script({"text": "The invoice job uses the billing-low queue."})
    world.opencode("her phone is 020 7946 0311 </private> so which queue does the invoice job use?",
                   "--continue")
    assert drained(world.tmp / "svc" / "spool")
    assert [m["content"] for m in world.memories("compaction")] == [
        "User: the invoice job is slow\n\nso which queue does the invoice job use?\n"
        "Assistant: The invoice job uses the billing-low queue."]


def test_quoted_prompts_recall_and_a_remembered_fact_is_injected_once(tmp_path: Path) -> None:
    """BM25 only: a quoted question recalls what its words find; a quoted "remember" is stored
    once: the compaction flush of its session leaves it out, and a later run's block holds it
    once, even beside a chunk that repeats it (as a flush stored it before this rule)."""
    service = start_service(tmp_path / "svc", MEMORY_EMBEDDER="none")
    try:
        with ModelMock(aside=title_call) as mock:
            world = World(tmp_path, service, mock)
            world.memory_mcp("install", "opencode", "--project", str(world.project))
            flags = world.store("Feature flags live in the config-service (its flags table), "
                                "not in LaunchDarkly")
            world.opencode("which service holds our feature flags?")
            assert flags in block_in(system_of(world.agent_calls()[-1]))
            with service.client() as http:
                [report] = http.get("/api/injections").json()["items"]
            assert report["query"] == "which service holds our feature flags?"  # no quotes

            fact = "the deploy freeze starts on Fridays at noon"
            world.mock.script({"text": "Noted."})
            world.opencode(f"remember that {fact}")
            # The next prompt of the session compacts it: the flush has the exchange, not the
            # "remember" and its acknowledgement.
            world.mock.script({"text": REDIS, "input_tokens": 200_000},
                              {"text": "Summary: a checkout test was discussed."},
                              {"text": "Noted."})
            world.opencode("why does the checkout integration test keep failing on CI?",
                           "--continue")
            # (and the first run's exchange, stored as its session went idle)
            assert sorted(m["content"] for m in world.memories("compaction")) == [
                "User: which service holds our feature flags?\nAssistant: MOCK-REPLY",
                "User: why does the checkout integration test keep failing on CI?\n"
                f"Assistant: {REDIS}"]
            with service.client() as http:
                http.post("/ingest", json={"content": f"User: remember that {fact}\nAssistant: "
                                           "Noted.", "source": "compaction", "project": PROJECT})

            seen = len(world.mock.requests)
            world.opencode("when does the deploy freeze start?")
            [call] = world.agent_calls(seen)
            block = block_in(system_of(call))
            [stored] = [m for m in world.memories("chat") if fact in m["content"]]
    finally:
        service.stop()
    assert stored["content"] == fact and block.count(fact) == 1 and stored["uid"] in block, block


def timed(world: World, prompt: str, runs: int = 2) -> float:
    """The fastest of `runs` runs (the least disturbed by whatever else the machine runs)."""
    times = []
    for _ in range(runs):
        started = time.monotonic()
        done = world.opencode(prompt)
        times.append(time.monotonic() - started)
        assert "MOCK-REPLY" in done.stdout
    return min(times)


def test_a_dead_or_hung_service_costs_at_most_the_budget(tmp_path: Path) -> None:
    """Without the plugin, with it and the service down (refused), with it and the service hung
    (accepting, never answering): every run succeeds; down costs nothing measurable, hung one
    budget (1.5 s) once, after which the hooks back off (hooks.backoff.json, shared with the
    Python hooks) and the next run skips the network; each is in the hook log for
    `memory-mcp doctor`."""
    budget = 1.5
    with ModelMock(aside=title_call) as mock, hanging_server() as hung_url:
        down_url = f"http://127.0.0.1:{closed_port()}"
        world = World(tmp_path, None, mock, MEMORY_PLUGIN_URL=down_url,
                      MEMORY_HOOK_BUDGET_S=str(budget))
        world.opencode("warm up the session database")  # opencode's first run sets up its db
        plain = timed(world, QUESTION)
        world.memory_mcp("install", "opencode", "--project", str(world.project), "--mcp", "none")
        down = timed(world, QUESTION)
        backoff_file = tmp_path / "svc" / "hooks.backoff.json"
        assert json.loads(backoff_file.read_text())["outcome"] == "service down"
        backoff_file.unlink()  # as if the back-off had run out: the hung service is met once
        world.env["MEMORY_PLUGIN_URL"] = hung_url
        hung = timed(world, QUESTION)
    print(f"\nopencode run: {plain:.2f} s without the plugin, {down:.2f} s with the service "
          f"down, {hung:.2f} s with it hung (budget {budget} s)")
    # Each run's exchange, flushed as its session went idle, went to the spool at once.
    flushes = [e for e in world.log() if e["event"] == "session.idle"]
    log = [e for e in world.log() if e["event"] != "session.idle"]
    assert [e["outcome"] for e in flushes] == ["spooled"] * 4, flushes
    backing_off = re.compile(r"backing off until \d\d:\d\d:\d\d, no request made")
    assert [(e["outcome"], backing_off.sub("backing off", e["detail"].split(" (")[0]))
            for e in log] == [
        ("service down", f"nothing listens at {down_url}"), ("service down", "backing off"),
        ("timeout", f"{hung_url} did not answer within the budget"), ("timeout", "backing off")]
    # What the plugin itself waited: one budget when hung (its own clock), far less otherwise.
    assert budget * 1000 - 50 <= log[2]["ms"] < budget * 1000 + 500
    assert all(e["ms"] < log[2]["ms"] / 5 for e in log[:2] + log[3:] + flushes)
    # Wall clock against the run without the plugin, with room for a loaded machine (the
    # absolute figures are bench/opencode.py's).
    assert down < plain * 3 and hung < plain * 3
    assert all(BLOCK not in json.dumps(r["body"]) for r in mock.requests)


def opencode_quoted(world: World, prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """`opencode run "PROMPT"`: the prompt as one argument, as a shell passes a quoted string."""
    done = subprocess.run([str(OPENCODE), "run", *flags, prompt], cwd=world.project,
                          env=world.env, capture_output=True, text=True, timeout=180,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    return done


def drained(folder: Path, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while any(folder.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(folder.glob("*.json"))


def test_what_is_said_while_the_service_is_down_is_stored_once_it_is_back(
        tmp_path: Path) -> None:
    """With the service stopped, a "remember" and a session that compacts: both go to the
    spool (the model is told the fact will be stored); the service, started again, stores each
    exactly once, and the next run recalls them."""
    with ModelMock(aside=title_call) as mock:
        service = start_service(tmp_path / "svc")
        world = World(tmp_path, service, mock)
        try:
            world.memory_mcp("install", "opencode", "--project", str(world.project))
        finally:
            service.stop()  # the URL the plugin has now points at nothing
        down_then_back(world, tmp_path)


def down_then_back(world: World, tmp_path: Path) -> None:
    fact = "the deploy freeze starts on Fridays at noon"
    spool_dir = tmp_path / "svc" / "spool"

    opencode_quoted(world, f"remember that {fact}")
    told = system_of(world.agent_calls()[-1])
    assert "will store the user's \"remember\" message as a memory as soon as its service" in told
    world.mock.script({"text": REDIS, "input_tokens": 200_000},
                      {"text": "Summary: a checkout test was discussed."},
                      {"text": "Noted."})
    opencode_quoted(world, "why does the checkout integration test keep failing on CI?")
    log = [(e["event"], e["outcome"]) for e in world.log()]
    assert log[:1] == [("chat.message", "spooled")]
    assert ("experimental.session.compacting", "spooled") in log
    # The idle flushes after them have nothing left: a fact and its acknowledgement, a
    # compaction's summary and a short reply are not stored.
    assert all(outcome in ("spooled", "service down", "skipped") for _, outcome in log), log
    assert len(list(spool_dir.glob("*.json"))) == 2

    world.service = start_service(tmp_path / "svc")  # drains the spool as it starts
    world.env["MEMORY_PLUGIN_URL"] = world.service.url
    try:
        assert drained(spool_dir)
        facts = [m for m in world.memories("chat") if "deploy freeze" in m["content"]]
        assert [(m["content"], m["kind"], m["project"]) for m in facts] == [
            (fact, "fact", PROJECT)]
        flushed = world.memories("compaction")
        assert [m["content"] for m in flushed] == [
            f"User: why does the checkout integration test keep failing on CI?\n"
            f"Assistant: {REDIS}"]

        seen = len(world.mock.requests)
        opencode_quoted(world, "when does the deploy freeze start?")
        [call] = world.agent_calls(seen)
        assert fact in block_in(system_of(call))
        seen = len(world.mock.requests)
        opencode_quoted(world, "what should I do about the Redis fixture of the checkout test?")
        [call] = world.agent_calls(seen)
        assert REDIS in block_in(system_of(call))
        assert len([m for m in world.memories("chat") if "deploy freeze" in m["content"]]) == 1
    finally:
        world.service.stop()


def test_another_users_process_on_the_port_is_sent_nothing(tmp_path: Path) -> None:
    """Inside the real opencode (its Bun runtime, not Node): a process another OS user left on
    the service's address is given neither the "remember" nor the prompt nor the token; the
    write waits in the spool for this user's own service (tests/test_other_users.py)."""
    from test_other_users import squatter, stop_squatter

    squatting, port = squatter()
    received = -1
    try:
        with ModelMock(aside=title_call) as mock:
            world = World(tmp_path, None, mock, MEMORY_PLUGIN_URL=f"http://127.0.0.1:{port}",
                          MEMORY_TOKEN="alice-secret-0123456789")
            world.memory_mcp("install", "opencode", "--project", str(world.project),
                             "--mcp", "none")
            opencode_quoted(world, "remember that the staging DB_PASSWORD lives in vault")
            [remember] = [e for e in world.log() if e["event"] == "chat.message"]
            assert remember["outcome"] == "spooled", remember
            assert "another user's (uid 65534)" in remember["detail"], remember
            assert list((tmp_path / "svc" / "spool").glob("*.json"))
            assert all("IMPORTANT SYSTEM NOTE" not in json.dumps(r["body"])
                       for r in mock.requests)
    finally:
        received = stop_squatter(squatting)
    assert received == 0
