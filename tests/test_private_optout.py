"""Control what is remembered: `<private>…</private>` never reaches a channel, log or spool
(the rule, hook processes with the service down, the MCP proxy's spool, real REST and MCP
writes), and a repository's `.semantic-memory.toml` turns capture or recall off and names the
project (real hook processes and the MCP proxy against a real service, and `memory-mcp
doctor`)."""

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
from semantic_memory.harness.repo_config import load_repo_config
from semantic_memory.private import strip_private
from test_core_cli import run
from test_service_mcp import call, call_error
from test_service_mcp_proxy import proxy_session, spooled
from test_service_support import Service, http_session, memory_mcp_command, start_service

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
    a global memory; the agent's own project wins, and `""` stores a global one."""
    cwd = repository(tmp_path / "web", None, remote="git@github.com:Acme/web.git")
    run_hook("example", "prompt", {"session": "s-proj", "cwd": str(cwd),
                                   "prompt": "remember that the web repo pins node 22"},
             hook_env(tmp_path, service.url))
    [hooked] = hook_log(tmp_path)
    assert hooked["outcome"] == "stored" and hooked["project"] == "github.com/Acme/web"

    def stored_under(content: str, env: dict[str, str] | None = None, **args: Any) -> Any:
        async def main() -> str:
            async with proxy_session(tmp_path / "db", service.url, cwd=cwd,
                                     **(env or {})) as session:
                return (await call(session, "memory_store", {"content": content, **args}))["uid"]

        uid = anyio.run(main)
        with service.client() as client:
            return client.get(f"/api/memories/{uid}").json()["project"]

    assert stored_under("the web repo deploys on Fridays") == hooked["project"]
    assert stored_under("the web repo's owner is Ana", project="team/ana") == "team/ana"
    assert stored_under("Ana prefers tabs everywhere", project="") is None
    (cwd.parent / ".semantic-memory.toml").write_text('[project]\nname = "acme/pinned"\n')
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
])
def test_repo_file_keys(tmp_path: Path, text: str, capture: bool, recall: bool,
                        name: str | None, error: bool) -> None:
    cwd = repository(tmp_path, text)
    config = load_repo_config(cwd)
    assert (config.capture, config.recall, config.project, bool(config.error)) == (
        capture, recall, name, error)
    assert config.path == tmp_path / ".semantic-memory.toml"


def test_no_file_is_the_defaults(tmp_path: Path) -> None:
    config = load_repo_config(repository(tmp_path, None))
    assert (config.path, config.capture, config.recall, config.project) == (
        None, True, True, None)


def test_doctor_shows_the_file_in_effect(service: Service, tmp_path: Path) -> None:
    cwd = repository(tmp_path / "repo", '[capture]\nenabled = false\n[project]\nname = "a/b"\n')
    env = hook_env(tmp_path, service.url)
    done = subprocess.run([*memory_mcp_command(), "doctor", "--project", str(cwd)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [line] = [ln for ln in done.stdout.splitlines() if ln.startswith("repo file")]
    assert str(cwd.parent / ".semantic-memory.toml") in line
    assert "capture off, recall on, project name 'a/b'" in line
    assert "project   a/b" in done.stdout
    data = json.loads(subprocess.run(
        [*memory_mcp_command(), "doctor", "--json", "--project", str(cwd)], env=env,
        capture_output=True, text=True, timeout=60).stdout)
    assert data["repository"]["capture"] is False and data["repository"]["project"] == "a/b"


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
]


def test_the_plugins_repo_file_reader_matches_python(tmp_path: Path) -> None:
    from test_opencode_plugin import node_eval

    folders = []
    for i, text in enumerate(REPO_FILES):
        folders.append(repository(tmp_path / f"r{i}", text))
    folders.append(repository(tmp_path / "none", None))
    expected = []
    for folder in folders:
        config = load_repo_config(folder)
        expected.append([str(config.path) if config.path else None, config.capture,
                         config.recall, config.project, config.error is not None])
    got = [[c["path"], c["capture"], c["recall"], c["project"], c["error"] is not None]
           for c in node_eval("loadRepoConfig", [[str(f)] for f in folders])]
    assert got == expected
