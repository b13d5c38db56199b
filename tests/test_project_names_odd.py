"""Project names detected on odd file systems (QA report fs, findings 5-7): a folder whose
name is not UTF-8, a name longer than the service takes, a worktree of a repository without a
remote. Each detected name is one the service stores and recalls by; each path that detects
one (hooks, `proxy`, `--stdio`, `import`) is run as a real process, against a real service
or with the service down (spooled)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import closed_port, hook_env, hook_log, run_hook
from test_service_support import Service, memory_mcp_command, start_service

from semantic_memory import spool
from semantic_memory.harness.project import bounded, detect_project
from semantic_memory.limits import MAX_PROJECT_CHARS
from semantic_memory.models import project_name
from semantic_memory.remotes import looks_like_remote

#: A folder name in Latin-1 bytes (`café repo` from an old archive): not UTF-8.
LATIN1 = os.fsdecode(b"caf\xe9 repo")
#: Its project name: the byte that is not UTF-8 read as U+FFFD, as Node spells the folder.
LATIN1_NAME = "caf\ufffd repo"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "odd-names-test", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
REMEMBER = "remember: the kiwi staging cluster runs on eu-west-1"
ASK = "where does the kiwi staging cluster run?"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd,
                   check=True, capture_output=True, timeout=60)


def repository(path: Path, remote: str | None = None, commit: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    if remote is not None:
        git(path, "remote", "add", "origin", remote)
    if commit:
        git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """No MEMORY_* from the caller; the store in `tmp`, the service down."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp / "db" / "memory.db"), HOME=str(tmp / "home"),
               MEMORY_PORT=str(closed_port()), NO_COLOR="1", **extra)
    return env


def memory_mcp(env: dict[str, str], *args: str, cwd: Path, stdin: str = "",
               timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*memory_mcp_command(), *args], env=env, cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def spooled_projects(db: Path) -> list[str | None]:
    return [record["body"].get("project")
            for _, record in spool.records(db / "spool") if record]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


def remember_then_ask(tmp_path: Path, service: Service, here: Path, there: Path) -> str:
    """A hook's "remember" in `here`, then a prompt in `there`: what the second injected."""
    env = {**hook_env(tmp_path, service.url), "MEMORY_HOOK_BUDGET_S": "5"}
    stored = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "s-a", "cwd": str(here), "hook_event_name": "UserPromptSubmit",
        "prompt": REMEMBER}, env, cwd=here)
    assert stored.returncode == 0 and "stored this" in stored.stdout, (stored, hook_log(tmp_path))
    asked = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "s-b", "cwd": str(there), "hook_event_name": "UserPromptSubmit",
        "prompt": ASK}, env, cwd=there)
    assert asked.returncode == 0, asked.stderr
    return asked.stdout


# --- 5. a folder whose name is not UTF-8 ---------------------------------------------------

def test_a_folder_name_that_is_not_utf8_is_named_as_valid_text(tmp_path: Path) -> None:
    """It kept the surrogate escape (`caf\\udce9 repo`), which no JSON or MCP answer can
    encode."""
    plain = tmp_path / LATIN1
    plain.mkdir()
    assert ascii(detect_project(plain)) == ascii(LATIN1_NAME)  # (a surrogate breaks xdist)
    repo = repository(tmp_path / "r" / LATIN1)
    (repo / "src").mkdir()
    assert ascii(detect_project(repo)) == ascii(detect_project(repo / "src")) == ascii(LATIN1_NAME)
    relative = repository(tmp_path / LATIN1 / "app", remote="../shared.git")
    assert ascii(detect_project(relative)) == ascii(f"{tmp_path}/{LATIN1_NAME}/shared")
    for name in (detect_project(plain), detect_project(relative)):
        assert ascii(project_name(name)) == ascii(name)


def test_the_node_spelling_of_such_a_folder_is_the_same_project(tmp_path: Path) -> None:
    """Claude Code and opencode (Node) send the folder's name with U+FFFD in its `cwd`."""
    folder = tmp_path / LATIN1
    folder.mkdir()
    assert ascii(detect_project(str(tmp_path / LATIN1_NAME))) == ascii(detect_project(folder))


def test_a_worktree_under_a_folder_not_utf8_finds_its_remote(tmp_path: Path) -> None:
    """The worktree's `.git` file names its git dir in the folder's own bytes: read as UTF-8
    with replacement it named no folder, so the worktree lost its remote."""
    main = repository(tmp_path / LATIN1 / "app", "https://github.com/Acme/App.git", commit=True)
    git(main, "worktree", "add", "-q", str(tmp_path / LATIN1 / "feature"))
    assert detect_project(tmp_path / LATIN1 / "feature") == "github.com/acme/app"


@pytest.mark.parametrize("args", [["--stdio"], ["proxy"]])
def test_the_mcp_servers_answer_in_a_folder_not_utf8(tmp_path: Path, args: list[str]) -> None:
    """`proxy` and `--stdio` never answered `initialize` there (UnicodeEncodeError); the
    proxy's store is filed under the folder's project (spooled: the service is down)."""
    folder = tmp_path / LATIN1
    folder.mkdir()
    env = cli_env(tmp_path, MEMORY_MCP_PROXY_TIMEOUT_S="1")
    messages: list[dict[str, object]] = [INITIALIZE]
    if args == ["proxy"]:
        messages += [INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "memory_store", "arguments": {"content": "The deploy target is fly.io"}}}]
    done = memory_mcp(env, *args, cwd=folder, stdin="".join(json.dumps(m) + "\n"
                                                             for m in messages))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    answers = {a.get("id"): a for a in map(json.loads, done.stdout.splitlines())}
    assert f'project is "{LATIN1_NAME}"' in answers[1]["result"]["instructions"], answers
    if args == ["proxy"]:
        assert not answers[2]["result"].get("isError"), answers[2]
        assert spooled_projects(tmp_path / "db") == [LATIN1_NAME]


def test_import_in_a_folder_not_utf8(tmp_path: Path) -> None:
    """`import claude-code` printed a traceback (`importers._digest`)."""
    folder = tmp_path / LATIN1
    folder.mkdir()
    (folder / "CLAUDE.md").write_text("# X\n\n- never push on fridays\n")
    env = cli_env(tmp_path)
    done = memory_mcp(env, "import", "claude-code", cwd=folder)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "1 new" in done.stdout, done.stdout
    listed = json.loads(memory_mcp(env, "list", "--json", cwd=folder).stdout)
    assert [m["project"] for m in listed] == [LATIN1_NAME]


def test_a_hook_without_cwd_in_a_folder_not_utf8_spools_and_tells(tmp_path: Path) -> None:
    """With no `cwd` in its input (the process's folder is used) the "remember" was neither
    stored nor spooled, and the model was not told."""
    folder = tmp_path / LATIN1
    folder.mkdir()
    env = hook_env(tmp_path, f"http://127.0.0.1:{closed_port()}")
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": "nu", "hook_event_name": "UserPromptSubmit",
        "prompt": "remember: the kestrel fact"}, env, cwd=folder)
    assert done.returncode == 0, done.stderr
    told = done.json()["hookSpecificOutput"]["additionalContext"]
    assert "will store this" in told, told
    assert spooled_projects(tmp_path) == [LATIN1_NAME]
    assert [e["outcome"] for e in hook_log(tmp_path)] == ["spooled"]


# --- 6. a name longer than the service takes ------------------------------------------------

def gitlab_url(top: str) -> str:
    return f"https://gitlab.com/{top}/" + "/".join(f"subgroup-{i}" for i in range(30)) + "/app"


@pytest.mark.parametrize("name", [
    "gitlab.com/acme/" + "/".join(f"subgroup-{i}" for i in range(30)) + "/app",
    "/srv/" + "r" * 150 + "/" + "s" * 150 + "/origin",
    "x" * 300,  # one component
    "é" * 300,
    "e\u0301" * 200 + "z" * 60,  # 460 characters, 260 composed
    "\u0958" * 100,  # 100 characters, 200 composed (NFC decomposes it)
    "\u0958" * 200,
    "a" * 200 + "x@host:" + "p" * 100,  # would read as an scp-like remote
])
def test_a_long_name_is_shortened_to_fit_stably(name: str) -> None:
    """At most MAX_PROJECT_CHARS as sent and as the service composes it; the same each time;
    a name the service keeps as it is; its tail kept where it fits."""
    short = bounded(name)
    composed = unicodedata.normalize("NFC", name)
    assert len(short) <= MAX_PROJECT_CHARS
    assert len(unicodedata.normalize("NFC", short)) <= MAX_PROJECT_CHARS
    assert bounded(name) == short == bounded(short)
    assert project_name(short) == unicodedata.normalize("NFC", short)
    assert not looks_like_remote(short)
    if len(name) <= MAX_PROJECT_CHARS and len(composed) <= MAX_PROJECT_CHARS:
        assert short == name
    elif len(composed) <= MAX_PROJECT_CHARS:
        assert short == composed
    else:
        assert re.fullmatch(r"….*~[0-9a-f]{8}", short), short
        if "@" not in name:  # the tail, from a component's start where there is one
            assert composed.endswith(short[1:-9]) and len(short) > MAX_PROJECT_CHARS // 2
            assert short.startswith("…/") == ("/" in name)


def test_long_names_alike_but_for_their_start_stay_two_projects() -> None:
    one, two = gitlab_url("acme"), gitlab_url("umbrella")
    assert bounded(one[8:]) != bounded(two[8:])
    assert bounded(one[8:]).rsplit("~", 1)[0] == bounded(two[8:]).rsplit("~", 1)[0]
    assert bounded("github.com/acme/app") == "github.com/acme/app"
    assert bounded("a" * MAX_PROJECT_CHARS) == "a" * MAX_PROJECT_CHARS
    assert len(bounded("a" * (MAX_PROJECT_CHARS + 1))) <= MAX_PROJECT_CHARS


def test_a_long_gitlab_remote_names_a_project_that_fits(tmp_path: Path) -> None:
    work = repository(tmp_path / "work", gitlab_url("Acme"))
    named = detect_project(work)
    assert len(named) <= MAX_PROJECT_CHARS and named[:-8].endswith("/subgroup-29/app~")


def test_a_repository_with_a_long_local_remote_stores_and_recalls(tmp_path: Path,
                                                                  service: Service) -> None:
    """Every hook write was refused (422) and every recall an error, without a word."""
    deep = tmp_path / ("r" * 150) / ("s" * 150)
    deep.mkdir(parents=True)
    work = repository(tmp_path / "work", str(deep / "origin.git"))
    clone = repository(tmp_path / "clone", "file://" + str(deep / "origin.git"))
    assert len(str(deep / "origin")) > MAX_PROJECT_CHARS
    assert detect_project(work) == detect_project(clone)
    assert "eu-west-1" in remember_then_ask(tmp_path, service, work, clone)
    logged = hook_log(tmp_path)
    assert [e["outcome"] for e in logged][:1] == ["stored"], logged
    assert {e["project"] for e in logged} == {detect_project(work)}


def test_memory_project_over_the_limit_is_still_refused(tmp_path: Path) -> None:
    """A name a person sets is theirs to fix: exit 2, one line, as before."""
    env = cli_env(tmp_path, MEMORY_PROJECT="x" * (MAX_PROJECT_CHARS + 1))
    done = memory_mcp(env, "recall", "anything", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"Error: MEMORY_PROJECT must be 1..{MAX_PROJECT_CHARS} characters"]


# --- 7. a worktree of a repository without a remote ----------------------------------------

def test_a_worktree_without_a_remote_is_its_main_checkouts_project(tmp_path: Path) -> None:
    """It was named after its own folder (`app-feature`): another project."""
    main = repository(tmp_path / "app", commit=True)
    (main / "src").mkdir()
    git(main, "worktree", "add", "-q", str(tmp_path / "app-feature"))
    git(main, "worktree", "add", "-q", str(tmp_path / "elsewhere" / "fix"))
    assert {detect_project(folder) for folder in (
        main, main / "src", tmp_path / "app-feature", tmp_path / "elsewhere" / "fix")} == {"app"}


def test_a_bare_repositorys_worktrees_are_one_project(tmp_path: Path) -> None:
    source = repository(tmp_path / "source", commit=True)
    bare = tmp_path / "app.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(bare))
    git(bare, "remote", "remove", "origin")
    git(bare, "worktree", "add", "-q", "-b", "one", str(tmp_path / "one"))
    git(bare, "worktree", "add", "-q", "-b", "two", str(tmp_path / "two"))
    assert detect_project(tmp_path / "one") == detect_project(tmp_path / "two") == "app"


def test_a_worktree_with_a_remote_and_a_submodule_keep_their_names(tmp_path: Path) -> None:
    """A remote still names every checkout; a submodule (a `.git` file too, no common dir) is
    its own repository."""
    main = repository(tmp_path / "app", "git@github.com:Acme/App.git", commit=True)
    git(main, "worktree", "add", "-q", str(tmp_path / "feature"))
    assert detect_project(tmp_path / "feature") == "github.com/acme/app"
    lib = repository(tmp_path / "lib", commit=True)
    git(main, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor")
    assert detect_project(main / "vendor") == str(lib)


def test_importing_in_a_worktree_without_a_remote_duplicates_nothing(tmp_path: Path) -> None:
    """Its import stored the main checkout's memories again, under another project."""
    main = repository(tmp_path / "app")
    (main / "CLAUDE.md").write_text("# App\n\n- always run make lint before committing\n")
    git(main, "add", "CLAUDE.md")
    git(main, "commit", "-qm", "c")
    git(main, "worktree", "add", "-q", str(tmp_path / "app-feature"))
    env = cli_env(tmp_path)
    first = memory_mcp(env, "import", "claude-code", cwd=main)
    again = memory_mcp(env, "import", "claude-code", cwd=tmp_path / "app-feature")
    assert "1 new" in first.stdout and "1 unchanged" in again.stdout, (first, again)
    listed = json.loads(memory_mcp(env, "list", "--json", cwd=main).stdout)
    assert [m["project"] for m in listed] == ["app"]


def test_a_remember_in_the_main_checkout_is_recalled_in_its_worktree(tmp_path: Path,
                                                                    service: Service) -> None:
    main = repository(tmp_path / "app", commit=True)
    git(main, "worktree", "add", "-q", str(tmp_path / "app-feature"))
    assert "eu-west-1" in remember_then_ask(tmp_path, service, main, tmp_path / "app-feature")
    assert {e["project"] for e in hook_log(tmp_path)} == {"app"}
