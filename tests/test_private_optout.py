"""Control what is remembered: `<private>…</private>` never reaches a channel, log or spool
(the rule, hook processes with the service down, the MCP proxy's spool, real REST and MCP
writes), and a repository's `.semantic-memory.toml` turns capture or recall off and names the
project, another project than its own only once the user allowed it with `memory-mcp allow`
(real hook processes and the MCP proxy against a real service, and `memory-mcp doctor`)."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from harness_support import closed_port, hook_env, hook_log, run_hook
from semantic_memory.harness.repo_config import APPROVALS_FILE, load_repo_config
from semantic_memory.private import strip_private
from test_core_cli import run
from test_service_mcp import call, call_error
from test_service_mcp_proxy import proxy_session, spooled
from test_service_support import (
    Service,
    http_session,
    memory_mcp_command,
    service_env,
    start_service,
)

SECRET = "hunter2-swordfish"
FACT = "the staging database listens on port 6543"


# --- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "kept"), [
    ("no tags at all", "no tags at all"),
    (f"port 6543 <private>{SECRET}</private> ok", "port 6543  ok"),
    (f"a <PRIVATE>{SECRET}</Private> b", "a  b"),
    (f"a < private >{SECRET}</ private\n> b", "a  b"),
    (f'a <private reason="pw">{SECRET}</private> b', "a  b"),
    (f"a <private>x <private>{SECRET}</private> {SECRET}</private> b", "a  b"),
    (f"a <private>{SECRET}\nto the end", "a "),
    ("a </private> b <private/> c", "a  b  c"),
    ("<privateer> and <private-notes> are other tags", "<privateer> and <private-notes> are "
                                                      "other tags"),
    (f"1<private>{SECRET}</private>2<private>{SECRET}</private>3", "123"),
    # what the tag reads as: invisible characters and other forms inside it do not hide it
    (f"a <pri\u200bvate>{SECRET}</pri\u200bvate> b", "a  b"),
    (f"a <pri\u00advate>{SECRET}</private\u2060> b", "a  b"),
    (f"a <\u3000private>{SECRET}</private\u3000> b", "a  b"),
    (f"a \uff1c\uff50rivate\uff1e{SECRET}\uff1c/private\uff1e b", "a  b"),
    (f"a <\u0440rivate>{SECRET}</private> b", "a  b"),  # Cyrillic р
    # ... and are cut from the text as written, whose other invisible characters stay
    (f"\ufeff👩\u200d💻 <private>{SECRET}\u200b</private>\u200f ok", "\ufeff👩\u200d💻 \u200f ok"),
    ("<pri\u200bvateer> is another tag", "<pri\u200bvateer> is another tag"),
])
def test_private_spans_are_removed(text: str, kept: str) -> None:
    assert strip_private(text) == kept


def test_cli_store_strips_a_tag_with_an_invisible_character_in_its_name(tmp_path: Path) -> None:
    """The QA repro: a zero-width space in the name kept the span, and the injection block,
    which drops invisible characters, then showed the agent a real `<private>` tag."""
    db = tmp_path / "private.db"
    stored = run(db, "store", f"port 6543 <pri\u200bvate>{SECRET}</pri\u200bvate> ok", "--json")
    assert stored.returncode == 0, stored.stderr
    memory = json.loads(run(db, "list", "--json").stdout)[0]
    assert memory["content"] == "port 6543  ok"
    block = run(db, "recall", "port 6543", "--block", "2000").stdout
    assert "port 6543" in block and SECRET not in block and "private" not in block


def test_text_without_tags_is_returned_as_is() -> None:
    text = "x < y and y > z"
    assert strip_private(text) is text


# --- hooks with the service down: the spool and the log never hold it ------------------------


def test_hooks_spool_no_private_text(tmp_path: Path) -> None:
    env = hook_env(tmp_path, f"http://127.0.0.1:{closed_port()}")
    session = {"session": "s1", "cwd": str(tmp_path)}
    runs = [
        run_hook("example", "prompt",
                 {**session, "prompt": f"remember that {FACT} <private>{SECRET}</private>"}, env),
        run_hook("example", "compact", {**session, "history": [
            {"role": "user", "text": f"How do I log in? <private>password {SECRET}</private>"},
            {"role": "assistant", "text": "Use the staging account."}]}, env),
        run_hook("example", "tool", {**session, "tool": "Bash", "input": {"command": "cat .env"},
                                     "output": f"DB=staging <private>{SECRET}"}, env),
        # A recall whose private part is not sent (the service is down: nothing answers).
        run_hook("example", "prompt", {**session, "prompt": f"<private>{SECRET}</private>"}, env),
    ]
    assert all(run.returncode == 0 for run in runs)
    files = spooled(tmp_path)
    assert len(files) >= 2  # remember and compact (tool capture is off by default)
    bodies = "".join(f.read_text() for f in files)
    assert FACT in bodies and "Use the staging account." in bodies
    assert SECRET not in bodies and "private>" not in bodies
    log = (tmp_path / "hooks.jsonl").read_text()
    assert SECRET not in log
    assert hook_log(tmp_path)[-1]["outcome"] == "skipped"  # nothing left to recall for


def test_tool_capture_spools_no_private_text(tmp_path: Path) -> None:
    env = hook_env(tmp_path, f"http://127.0.0.1:{closed_port()}",
                   MEMORY_PLUGIN_TOOL_CAPTURE="bash")
    run = run_hook("example", "tool", {"session": "s1", "cwd": str(tmp_path), "tool": "Bash",
                                       "input": {"command": f"echo <private>{SECRET}</private>"},
                                       "output": f"DB=staging <private>{SECRET}"}, env)
    assert run.returncode == 0
    [record] = spooled(tmp_path)
    text = record.read_text()
    assert "DB=staging" in text and SECRET not in text


def test_proxy_spools_no_private_text(tmp_path: Path) -> None:
    async def main() -> None:
        async with proxy_session(tmp_path, f"http://127.0.0.1:{closed_port()}") as session:
            answer = await call(session, "memory_store",
                                {"content": f"{FACT} <private>{SECRET}</private>",
                                 "tags": [f"<private>{SECRET}</private>", "db"]})
            assert answer["status"] == "spooled"

    anyio.run(main)
    [record] = spooled(tmp_path)
    text = record.read_text()
    assert FACT in text and SECRET not in text


# --- the service: REST and MCP writes ---------------------------------------------------------


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    svc = start_service(tmp_path_factory.mktemp("private"))
    yield svc
    svc.stop()


def memories(service: Service, **params: Any) -> list[dict[str, Any]]:
    with service.client() as client:
        answer = client.get("/api/memories", params={"limit": 200, **params})
        return answer.json()["items"]


def test_service_strips_private_text_from_rest_and_mcp_writes(service: Service) -> None:
    with service.client() as client:
        stored = client.post("/ingest", json={
            "content": f"REST: {FACT} <private>{SECRET}</private>", "project": "p-rest",
            "tags": [f"<private>{SECRET}</private>"]}).json()
        assert stored["status"] == "new"
        refused = client.post("/ingest", json={
            "content": f"<private>{SECRET}</private>", "project": "p-rest"}).json()
        assert refused["status"] == "rejected" and "private" in refused["reason"]

    async def mcp() -> None:
        async with http_session(service.mcp_url, service.token) as session:
            answer = await call(session, "memory_store", {
                "content": f"MCP: {FACT} <Private >{SECRET}", "project": "p-mcp"})
            assert answer["status"] == "new"

    anyio.run(mcp)
    items = memories(service, project="p-rest") + memories(service, project="p-mcp")
    assert sorted(i["content"] for i in items) == [f"MCP: {FACT} ", f"REST: {FACT} "]
    assert all(SECRET not in json.dumps(i) for i in items)


def test_every_stored_field_is_cleaned_not_only_content_and_tags(service: Service) -> None:
    """A project, a session and an injection report's fields kept private spans (and the
    report's harness, hook and session kept secrets) verbatim, into stats and the block's
    attributes."""
    token = "ghp_R8x2kQ9mZ4vT7nW1pL6sY3cB5hJ0dF8gA2eK"
    with service.client() as client:
        stored = client.post("/ingest", json={
            "content": f"private fields: {FACT}", "project": f"p-fields<private>{SECRET}</private>",
            "session": f"s-fields <private>{SECRET}</private> {token}"}).json()
        assert stored["status"] == "new"
        only_private = client.post("/ingest", json={
            "content": FACT + " again, elsewhere", "project": f"<private>{SECRET}</private>"})
        assert only_private.json()["status"] == "rejected"  # never made global instead
        memory = client.get(f"/api/memories/{stored['uid']}").json()
        assert memory["project"] == "p-fields"
        assert SECRET not in memory["session"] and token not in memory["session"]
        client.post("/inject/report", json={
            "harness": token, "hook": token, "project": f"p<private>{SECRET}</private>",
            "query": f"hello <private>{SECRET}</private> there", "session": token,
            "uids": [stored["uid"]], "chars": 10})
        recorded = client.get("/api/injections", params={"limit": 50}).json()
        # the session recorded cleaned is the one a recall with the raw session looks up
        query = {"query": "staging database listens on port", "project": "p-fields"}
        elsewhere = client.post("/recall", json={**query, "session": "s-other"}).json()
        again = client.post("/recall", json={**query, "session": token}).json()
    assert SECRET not in json.dumps(recorded) and token not in json.dumps(recorded)
    assert stored["uid"] in json.dumps(elsewhere) and stored["uid"] not in json.dumps(again)


def test_a_prompts_private_part_is_not_the_query(service: Service, tmp_path: Path) -> None:
    """The recall runs for the rest of the prompt; the query the service records for the
    injection holds no private text."""
    with service.client() as client:
        client.post("/ingest", json={"content": "The quiet-harbor queue drains every ten "
                                                "minutes", "project": "p-query"})
    env = hook_env(tmp_path, service.url, MEMORY_PROJECT="p-query")
    run = run_hook("example", "prompt", {
        "session": "s-query", "cwd": str(tmp_path),
        "prompt": f"how often does the quiet-harbor queue drain? <private>{SECRET}</private>"},
        env)
    assert "quiet-harbor queue drains" in run.stdout
    with service.client() as client:
        injections = client.get("/api/injections", params={"project": "p-query"}).json()
    [injection] = injections["items"]
    assert injection["query"] == "how often does the quiet-harbor queue drain?"


# --- .semantic-memory.toml ----------------------------------------------------------------------


def repository(root: Path, config: str | None, remote: str = "git@github.com:acme/web.git"
               ) -> Path:
    """A git repository (read from `.git` as the hooks read it) with the file at its top, and
    a sub-folder to run hooks in."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {remote}\n')
    if config is not None:
        (root / ".semantic-memory.toml").write_text(config)
    (root / "src").mkdir()
    return root / "src"


def every_write(env: dict[str, str], cwd: Path, fact: str) -> list[Any]:
    session = {"session": f"s-{cwd.parent.name}", "cwd": str(cwd)}
    return [
        run_hook("example", "prompt", {**session, "prompt": f"remember that {fact}"}, env),
        run_hook("example", "compact", {**session, "history": [
            {"role": "user", "text": f"What about {fact}?"},
            {"role": "assistant", "text": f"Yes: {fact}."}]}, env),
        run_hook("example", "tool", {**session, "tool": "Bash", "input": {"command": "ls"},
                                     "output": fact}, env),
    ]


def allow(env: dict[str, str], folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`memory-mcp allow [ARGS]` run in `folder`, as the user runs it there."""
    return subprocess.run([*memory_mcp_command(), "allow", *args], env=env, cwd=folder,
                          capture_output=True, text=True, timeout=60)


def test_capture_off_stores_nothing_from_the_repository(service: Service,
                                                         tmp_path: Path) -> None:
    cwd = repository(tmp_path / "optout", "[capture]\nenabled = false\n")
    env = hook_env(tmp_path, service.url, MEMORY_PLUGIN_TOOL_CAPTURE="bash")
    runs = every_write(env, cwd, "the opted-out cache lives in /var/cache/optout")
    assert all(run.returncode == 0 for run in runs)
    log = hook_log(tmp_path)
    assert [e["outcome"] for e in log] == ["skipped"] * 3
    assert all(".semantic-memory.toml" in e["detail"] and "[capture] enabled = false"
               in e["detail"] for e in log)
    assert not [m for m in memories(service) if "optout" in m["content"]]
    assert not spooled(tmp_path)


def test_recall_off_injects_nothing_and_the_file_names_the_project(service: Service,
                                                                   tmp_path: Path) -> None:
    config = '[recall]\nenabled = false\n[project]\nname = "acme/pinned"\n'
    cwd = repository(tmp_path / "norecall", config)
    env = hook_env(tmp_path, service.url)
    assert allow(env, cwd).returncode == 0  # not the detected name: the user allows it
    fact = "the pinned service deploys from the release branch"
    [remember, *_] = every_write(env, cwd, fact)
    assert remember.returncode == 0
    stored = [m for m in memories(service, project="acme/pinned") if "pinned" in m["content"]]
    assert stored, "capture stays on and the file's name is the project"
    asked = run_hook("example", "prompt", {"session": "s2", "cwd": str(cwd),
                                           "prompt": "which branch does the pinned service "
                                                     "deploy from?"}, env)
    assert asked.stdout == ""
    assert hook_log(tmp_path)[-1]["outcome"] == "skipped"
    assert "[recall] enabled = false" in hook_log(tmp_path)[-1]["detail"]
    # The same repository without the file recalls it (the project name from the file and
    # the environment's MEMORY_PROJECT, which wins over the file).
    (cwd.parent / ".semantic-memory.toml").write_text('[project]\nname = "acme/pinned"\n')
    asked = run_hook("example", "prompt", {"session": "s3", "cwd": str(cwd),
                                           "prompt": "which branch does the pinned service "
                                                     "deploy from?"}, env)
    assert fact in asked.stdout
    other = {**env, "MEMORY_PROJECT": "elsewhere"}
    run_hook("example", "prompt", {"session": "s4", "cwd": str(cwd), "prompt": "hello"}, other)
    assert hook_log(tmp_path)[-1]["project"] == "elsewhere"


def test_a_malformed_file_stops_capture_and_keeps_recall(service: Service,
                                                         tmp_path: Path) -> None:
    cwd = repository(tmp_path / "broken", "[capture\nenabled = nope\n")
    env = hook_env(tmp_path, service.url)
    run_hook("example", "prompt", {"session": "s1", "cwd": str(cwd),
                                   "prompt": "remember that the broken repo uses tabs"}, env)
    run_hook("example", "prompt", {"session": "s1", "cwd": str(cwd), "prompt": "tabs?"}, env)
    stored, asked = hook_log(tmp_path)
    assert stored["outcome"] == "skipped" and "unreadable" in stored["detail"]
    assert asked["outcome"] != "skipped"  # recall went ahead
    assert all(".semantic-memory.toml" in e["warning"] for e in (stored, asked))
    assert "\n" not in stored["warning"]
    assert not [m for m in memories(service) if "broken repo" in m["content"]]


def test_a_typo_in_the_opt_out_stops_capture_and_says_why(service: Service,
                                                          tmp_path: Path) -> None:
    cwd = repository(tmp_path / "typo", "[capure]\nenabled = false\n")
    env = hook_env(tmp_path, service.url)
    run_hook("example", "prompt", {"session": "s1", "cwd": str(cwd),
                                   "prompt": "remember that the typo repo ships on Mondays"}, env)
    [entry] = hook_log(tmp_path)
    assert entry["outcome"] == "skipped" and "unknown table [capure]" in entry["detail"]
    assert "unknown table [capure]" in entry["warning"]
    assert not [m for m in memories(service) if "typo repo" in m["content"]]
    done = subprocess.run([*memory_mcp_command(), "doctor", "--project", str(cwd)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert "unreadable (unknown table [capure]" in done.stdout


PRIVATE_PROJECT = "github.com/mycompany/secret"


def test_a_file_naming_another_project_is_ignored_until_the_user_allows_it(
        service: Service, tmp_path: Path) -> None:
    """A cloned repository whose file names a private project of the user's: its sessions
    are given nothing of that project and file nothing under it (the detected name is used)
    until the user runs `memory-mcp allow` there; a changed name needs a new allow, and
    `--revoke` takes it back. The approval is recorded beside the db, readable by the user
    only."""
    with service.client() as client:
        assert client.post("/ingest", json={
            "content": "The mycompany deploy key rotates every Tuesday at noon",
            "project": PRIVATE_PROJECT}).json()["status"] == "new"
    cwd = repository(tmp_path / "bait", f'[project]\nname = "{PRIVATE_PROJECT}"\n',
                     remote="git@github.com:evil/bait.git")
    config = cwd.parent / ".semantic-memory.toml"
    env = hook_env(tmp_path, service.url, MEMORY_PLUGIN_TOOL_CAPTURE="bash")
    question = "when does the mycompany deploy key rotate?"

    def ask(session: str) -> tuple[str, dict[str, Any]]:
        run = run_hook("example", "prompt",
                       {"session": session, "cwd": str(cwd), "prompt": question}, env)
        assert run.returncode == 0, run.stderr
        return run.stdout, hook_log(tmp_path)[-1]

    said, entry = ask("s-bait-1")
    assert "Tuesday" not in said and entry["project"] == "github.com/evil/bait", entry
    assert entry["warning"] == (f'{config}: [project] name "{PRIVATE_PROJECT}" is ignored until '
                                f"you allow it: run `memory-mcp allow {cwd.parent}`"), entry
    runs = every_write(env, cwd, "the bait repo's build writes to /tmp/bait-out")
    assert all(run.returncode == 0 for run in runs)
    assert {e["outcome"] for e in hook_log(tmp_path)[-3:]} == {"stored"}
    assert not [m for m in memories(service, project=PRIVATE_PROJECT) if "bait" in m["content"]]
    assert len([m for m in memories(service, project="github.com/evil/bait")
                if "bait-out" in m["content"]]) >= 3

    done = allow(env, cwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"allowed {config} to name the project {PRIVATE_PROJECT!r} (in "
                           f"{tmp_path / APPROVALS_FILE}; a new name needs a new allow, "
                           "`memory-mcp allow --revoke` takes it back)\n")
    assert (tmp_path / APPROVALS_FILE).stat().st_mode & 0o777 == 0o600
    assert json.loads((tmp_path / APPROVALS_FILE).read_text()) == {
        "allowed": {str(config): PRIVATE_PROJECT}}
    said, entry = ask("s-bait-2")
    assert "Tuesday" in said and entry["project"] == PRIVATE_PROJECT
    assert "warning" not in entry

    config.write_text('[project]\nname = "github.com/mycompany/other"\n')
    _, entry = ask("s-bait-3")
    assert entry["project"] == "github.com/evil/bait"  # a changed name needs a new allow
    assert allow(env, cwd.parent).returncode == 0  # DIR: any folder of the repository
    assert ask("s-bait-4")[1]["project"] == "github.com/mycompany/other"

    revoked = allow(env, tmp_path, "--revoke", str(cwd))
    assert revoked.stdout == (f"revoked {config}: its project name "
                              "'github.com/mycompany/other' is ignored again\n")
    assert ask("s-bait-5")[1]["project"] == "github.com/evil/bait"
    assert json.loads((tmp_path / APPROVALS_FILE).read_text()) == {"allowed": {}}
    # MEMORY_PROJECT, the user's own environment, needs no approval; nor does a file that
    # names the detected project.
    run_hook("example", "prompt", {"session": "s-bait-6", "cwd": str(cwd), "prompt": "hi"},
             {**env, "MEMORY_PROJECT": "mine"})
    assert hook_log(tmp_path)[-1]["project"] == "mine"
    config.write_text('[project]\nname = "github.com/evil/bait"\n')
    assert load_repo_config(cwd, str(tmp_path / APPROVALS_FILE)).project == \
        "github.com/evil/bait"


@pytest.mark.parametrize(("setup", "message"), [
    ("none", "no .semantic-memory.toml for . (looked for {top}/.semantic-memory.toml)"),
    ("nameless", "{top}/.semantic-memory.toml names no project: nothing to allow"),
    ("broken", "{top}/.semantic-memory.toml is unreadable: "),
    ("approvals", "{approvals}: not an approvals file"),
])
def test_allow_refuses_with_a_reason(tmp_path: Path, setup: str, message: str) -> None:
    """Nothing to allow, or an approvals file it cannot read: exit 1 and one line, never a
    traceback, and the approvals file is left as it was."""
    files = {"none": None, "nameless": "[capture]\nenabled = false\n",
             "broken": "[capure]\n"}
    cwd = repository(tmp_path / "repo", files.get(setup, '[project]\nname = "x/y"\n'))
    approvals = tmp_path / APPROVALS_FILE
    if setup == "approvals":
        approvals.write_text("[not json")
    done = allow(hook_env(tmp_path, None), cwd)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("Error: " + message.format(top=cwd.parent,
                                                               approvals=approvals)), done.stderr
    assert approvals.exists() == (setup == "approvals")


def test_the_repositorys_file_binds_the_proxys_tools(service: Service, tmp_path: Path) -> None:
    """The agent starts the proxy in its repository, and its `.semantic-memory.toml` binds the
    tools as it binds the hooks: capture off, memory_store and memory_update refuse, naming the
    file, and nothing reaches the service or the spool; recall off, memory_recall and
    memory_list refuse. The file is read at each call."""
    cwd = repository(tmp_path / "optout", "[capture]\nenabled = false\n")
    config = cwd.parent / ".semantic-memory.toml"
    with service.client() as client:
        uid = client.post("/ingest", json={"content": "The opt-out fixture's port is 7341",
                                           "project": "github.com/acme/web"}).json()["uid"]

    async def main() -> None:
        async with proxy_session(tmp_path / "db", service.url, cwd=cwd) as session:
            for name, args, refused in (
                    ("memory_store", {"content": "the opted-out cache lives in /var/optout"},
                     "not stored"),
                    ("memory_store", {"content": "the opted-out cache lives in /var/optout",
                                      "project": "elsewhere"}, "not stored"),
                    ("memory_update", {"uid": uid, "content": "the opted-out port is 7342"},
                     "not updated")):
                message = await call_error(session, name, args)
                assert message.endswith(f"capture is off for this repository ({config}: "
                                        f"[capture] enabled = false); {refused}"), message
            found = await call(session, "memory_recall", {"query": "opt-out fixture port 7341"})
            assert found["items"][0]["uid"] == uid  # recall stays on

            config.write_text("[recall]\nenabled = false\n")
            for name, args, refused in (("memory_recall", {"query": "opt-out port"},
                                         "nothing recalled"),
                                        ("memory_list", {}, "nothing listed")):
                message = await call_error(session, name, args)
                assert message.endswith(f"recall is off for this repository ({config}: "
                                        f"[recall] enabled = false); {refused}"), message
            stored = await call(session, "memory_store", {"content": "the recall-off repo "
                                                                     "builds with make"})
            assert stored["status"] == "new"

            config.write_text("[capure]\nenabled = false\n")  # a typo stops capture too
            message = await call_error(session, "memory_store", {"content": "typo'd repo"})
            assert f"capture is off for this repository ({config} is unreadable: unknown " \
                   "table [capure]" in message and "\n" not in message

    anyio.run(main)
    with service.client() as client:
        contents = [m["content"] for m in client.get("/api/memories",
                                                     params={"limit": 100}).json()["items"]]
        assert client.get(f"/api/memories/{uid}").json()["content"] == \
            "The opt-out fixture's port is 7341"
    assert not [c for c in contents if "opted-out" in c or "typo'd" in c], contents
    assert "the recall-off repo builds with make" in contents
    assert spooled(tmp_path / "db") == []


def test_the_repositorys_file_binds_the_stdio_servers_tools_too(tmp_path: Path) -> None:
    """An agent may register `memory-mcp --stdio` instead of the proxy: started in the
    repository, it obeys the file the same way, and a store without a project gets the
    repository's project."""
    from semantic_memory.harness.repo_config import project_for
    from test_service_support import stdio_session

    optout = repository(tmp_path / "optout", "[capture]\nenabled = false\n")
    web = repository(tmp_path / "web", None, remote="git@github.com:Acme/web.git")
    db = tmp_path / "db"
    db.mkdir()

    async def main() -> None:
        async with stdio_session(db, cwd=optout) as session:
            message = await call_error(session, "memory_store",
                                       {"content": "the opted-out cache lives in /var/optout"})
            assert "capture is off for this repository" in message, message
        async with stdio_session(db, cwd=web) as session:
            stored = await call(session, "memory_store", {"content": "web pins node 22"})
            assert stored["status"] == "new"
            listed = await call(session, "memory_list", {})
            assert [(m["content"], m["project"]) for m in listed["items"]] == [
                ("web pins node 22", project_for(web, load_repo_config(web), None))]

    anyio.run(main)


def test_a_proxy_store_gets_the_project_the_hooks_give(service: Service, tmp_path: Path) -> None:
    """A memory_store without a project is stored under the project a hook run in the same
    folder uses (the detected remote here; the file's name; MEMORY_PROJECT over both), not as
    a global memory; `""` stores a global one, and another project is refused (the server
    writes only to its own: tests/test_mcp_workspace_writes.py)."""
    cwd = repository(tmp_path / "web", None, remote="git@github.com:Acme/web.git")
    run_hook("example", "prompt", {"session": "s-proj", "cwd": str(cwd),
                                   "prompt": "remember that the web repo pins node 22"},
             hook_env(tmp_path, service.url))
    [hooked] = hook_log(tmp_path)
    assert hooked["outcome"] == "stored" and hooked["project"] == "github.com/acme/web"

    def stored_under(content: str, env: dict[str, str] | None = None, **args: Any) -> Any:
        async def main() -> str:
            async with proxy_session(tmp_path / "db", service.url, cwd=cwd,
                                     **(env or {})) as session:
                return (await call(session, "memory_store", {"content": content, **args}))["uid"]

        uid = anyio.run(main)
        with service.client() as client:
            return client.get(f"/api/memories/{uid}").json()["project"]

    assert stored_under("the web repo deploys on Fridays") == hooked["project"]
    assert stored_under("the web repo's owner is Ana", project=hooked["project"]) \
        == hooked["project"]
    assert stored_under("Ana prefers tabs everywhere", project="") is None
    (cwd.parent / ".semantic-memory.toml").write_text('[project]\nname = "acme/pinned"\n')
    # Another project than the detected one: ignored until the user allows the file (the
    # proxy's approvals are beside its db, as the hooks' are beside theirs).
    assert stored_under("the unpinned repo uses npm") == hooked["project"]
    assert allow(service_env(tmp_path / "db"), cwd).returncode == 0
    assert stored_under("the pinned repo uses pnpm") == "acme/pinned"
    assert stored_under("the env repo uses yarn", {"MEMORY_PROJECT": "from-env"}) == "from-env"


@pytest.mark.parametrize(("text", "capture", "recall", "name", "error"), [
    ("", True, True, None, False),
    ("[capture]\nenabled = false\n", False, True, None, False),
    ('[recall]\nenabled = false\n[project]\nname = " x/y "\n', True, False, "x/y", False),
    ('[capture]\nenabled = "no"\n', False, True, None, True),
    ("[project]\nname = 3\n", False, True, None, True),
    ("capture = 1\n[capture\n", False, True, None, True),
    # A typo in a table or key name is an error too: capture off, not silently on.
    ("[capure]\nenabled = false\n", False, True, None, True),
    ("[capture]\nenable = false\n", False, True, None, True),
    ("[Capture]\nenabled = false\n", False, True, None, True),
    ("[capture]\nEnabled = false\n", False, True, None, True),
    ('[project]\nname = "a/b"\n[[hooks]]\nx = 1\n', False, True, None, True),
    # A byte order mark (Windows editors, PowerShell 5) is read past, as the plugin reads it:
    # it made the file unreadable, so recall stayed on against the file's word.
    ("\ufeff[recall]\nenabled = false\n", True, False, None, False),
])
def test_repo_file_keys(tmp_path: Path, text: str, capture: bool, recall: bool,
                        name: str | None, error: bool) -> None:
    cwd = repository(tmp_path, text)
    config = load_repo_config(cwd, str(tmp_path / APPROVALS_FILE))  # nothing allowed
    assert (config.capture, config.recall, config.ignored, bool(config.error)) == (
        capture, recall, name, error)
    assert config.project is None  # not the detected name (github.com/acme/web)
    assert config.path == tmp_path / ".semantic-memory.toml"


def test_no_file_is_the_defaults(tmp_path: Path) -> None:
    config = load_repo_config(repository(tmp_path, None))
    assert (config.path, config.capture, config.recall, config.project) == (
        None, True, True, None)


def test_doctor_shows_the_file_in_effect(service: Service, tmp_path: Path) -> None:
    """doctor shows the file, and whether its project name is in use or awaits `allow`."""
    cwd = repository(tmp_path / "repo", '[capture]\nenabled = false\n[project]\nname = "a/b"\n')
    env = hook_env(tmp_path, service.url)

    def doctor(*args: str) -> str:
        done = subprocess.run([*memory_mcp_command(), "doctor", *args, "--project", str(cwd)],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    [line] = [ln for ln in doctor().splitlines() if ln.startswith("repo file")]
    assert line == (f"repo file {cwd.parent / '.semantic-memory.toml'}: capture off, recall on, "
                    f"project name 'a/b' ignored until allowed (`memory-mcp allow {cwd.parent}`)")
    assert "project   github.com/acme/web" in doctor()
    data = json.loads(doctor("--json"))["repository"]
    assert (data["capture"], data["project"], data["project_name"], data["ignored_name"]) == (
        False, "github.com/acme/web", None, "a/b")
    assert "memory-mcp allow" in data["warning"]

    assert allow(env, cwd).returncode == 0
    text = doctor()
    [line] = [ln for ln in text.splitlines() if ln.startswith("repo file")]
    assert line.endswith("capture off, recall on, project name 'a/b'"), line
    assert "project   a/b" in text
    data = json.loads(doctor("--json"))["repository"]
    assert (data["project"], data["ignored_name"], data["warning"]) == ("a/b", None, None)


# --- the opencode plugin's twins of both rules --------------------------------------------------


def test_the_plugins_private_rule_matches_python() -> None:
    from test_opencode_plugin import node_eval

    rng = random.Random(24)
    pieces = ["<private>", "</private>", "< PRIVATE >", "</ private\n>", "<private/>",
              '<private a="b">', "<privateer>", "<", ">", "x", " ", "\n", "é", "🙂", SECRET,
              "<private\t>", "</Private>", "text with words"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 25))) for _ in range(400)]
    assert sum(strip_private(t) != t for t in texts) > 200
    assert node_eval("stripPrivate", [[t] for t in texts]) == [strip_private(t) for t in texts]


REPO_FILES = [
    "", "# nothing\n", "[capture]\nenabled = false\n", "[recall]\nenabled = false # off\n",
    '[project]\nname = "acme/web"\n', "[project]\nname = 'lit/eral'\n",
    "capture.enabled = false\n", '[project]\nname = "  "\n',
    '[capture]\nenabled = "no"\n', "[project]\nname = 3\n", "[capture\nenabled = false\n",
    "[other]\nx = 1\n[capture]\nenabled = true\n[recall]\nenabled = false\n",
    "[capure]\nenabled = false\n", "[capture]\nenable = false\n", "[Capture]\nenabled = false\n",
    "[capture]\nEnabled = false\n", "[recall]\nenabled = true\n[[hooks]]\nx = 1\n",
    "[ capture ]\nenabled = false\n", "enabled = false\n", "[capture.x]\ny = 1\n",
    "\ufeff[recall]\nenabled = false\n",
]


#: Project names against the approvals (the remote is github.com/acme/web): allowed, allowed
#: under another name (changed since), the detected one, never allowed; in folders whose
#: names need quoting in the advice.
NAMED_FILES = {
    "allowed": '[project]\nname = "team/allowed"\n',
    "changed": '[project]\nname = "team/renamed"\n',
    "detected": '[project]\nname = "github.com/acme/web"\n',
    "not allowed": '[project]\nname = "github.com/mycompany/secret"\n',
    "it's here": "[recall]\nenabled = false\n[project]\nname = 'x/y'\n",
}


def test_the_plugins_repo_file_reader_matches_python(tmp_path: Path) -> None:
    """The plugin reads the file, and the user's approvals of its project name, as Python
    does, and words the hook log's warning the same."""
    from test_opencode_plugin import node_eval

    folders = []
    for i, text in enumerate(REPO_FILES):
        folders.append(repository(tmp_path / f"r{i}", text))
    folders.append(repository(tmp_path / "none", None))
    for name, text in NAMED_FILES.items():
        folders.append(repository(tmp_path / name, text))
    approvals = tmp_path / APPROVALS_FILE
    approvals.write_text(json.dumps({"allowed": {
        str(tmp_path / "allowed" / ".semantic-memory.toml"): "team/allowed",
        str(tmp_path / "changed" / ".semantic-memory.toml"): "team/before"}}))
    expected = []
    for folder in folders:
        config = load_repo_config(folder, str(approvals))
        expected.append([str(config.path) if config.path else None, config.capture,
                         config.recall, config.project, config.ignored,
                         config.error is not None,
                         None if config.error else config.warning()])
    configs = node_eval("loadRepoConfig", [[str(f), str(approvals)] for f in folders])
    warnings = node_eval("repoWarning", [[c] for c in configs])
    got = [[c["path"], c["capture"], c["recall"], c["project"], c.get("ignored"),
            c["error"] is not None, None if c["error"] else warning]
           for c, warning in zip(configs, warnings, strict=True)]
    assert got == expected
    assert [row[3:5] for row in expected[-5:]] == [
        ["team/allowed", None], [None, "team/renamed"], ["github.com/acme/web", None],
        [None, "github.com/mycompany/secret"], [None, "x/y"]]
    assert f"`memory-mcp allow '{tmp_path}/it'\"'\"'s here'`" in expected[-1][-1]
    # No approvals file, or one that is not one: nothing is allowed on either side.
    for broken in (tmp_path / "missing.json", tmp_path / "r0" / ".semantic-memory.toml"):
        allowed = folders[-5]
        assert load_repo_config(allowed, str(broken)).project is None
        [config] = node_eval("loadRepoConfig", [[str(allowed), str(broken)]])
        assert (config["project"], config["ignored"]) == (None, "team/allowed")
