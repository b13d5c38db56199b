"""Every folder an agent works in is a project, and only that project's memories reach it:
the filesystem root and a folder named with blanks get a name of their own (else recall
there reached every project and what was remembered there became global), a remote with
several urls is named by the first (the one git fetches from), and the name `import` files
under is the one `doctor` and the hooks use (real hook processes against a real service,
the real CLI)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from harness_support import hook_env, hook_log, run_hook
from test_opencode_plugin import BUNDLE, IN_FOLDER, node_eval, plugin_log
from test_service_support import Service, memory_mcp_command, start_service

ELSEWHERE = "github.com/acme/web"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def memories(service: Service) -> list[dict[str, Any]]:
    with service.client() as client:
        return client.get("/api/memories", params={"limit": 200}).json()["items"]


def prompt(env: dict[str, str], cwd: Path | str, text: str) -> str:
    """Claude Code's UserPromptSubmit hook in `cwd`: what it injects."""
    payload = {"session_id": f"s-{abs(hash((str(cwd), text))) % 10**8}", "transcript_path": "",
               "cwd": str(cwd), "hook_event_name": "UserPromptSubmit", "prompt": text}
    done = run_hook("claude-code", "UserPromptSubmit", payload, env)
    assert done.returncode == 0, done.stderr
    return done.stdout


def doctor_project(env: dict[str, str], folder: Path | str) -> str:
    done = subprocess.run([*memory_mcp_command(), "doctor", "--project", str(folder)], env=env,
                          capture_output=True, text=True, timeout=60)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("project ")]
    return line.split(None, 1)[1]


def test_the_filesystem_root_is_a_project_of_its_own(tmp_path: Path) -> None:
    """A container without WORKDIR runs the agent at `/`: its recall gets no other project's
    memories, and what it remembers is filed under "/" (not global: every other project's
    recall would bring it). A folder named with blanks, which the service would strip to no
    name, is named by its path the same way."""
    service = start_service(tmp_path / "service")
    try:
        with service.client() as client:
            assert client.post("/ingest", json={
                "content": "the web canary codename is bluefalcon", "project": ELSEWHERE
            }).json()["status"] == "new"
        env = hook_env(tmp_path, service.url)
        assert "bluefalcon" not in prompt(env, "/", "what is the canary codename")
        assert hook_log(tmp_path)[-1]["project"] == "/"
        prompt(env, "/", "remember the root canary codename is greenmoth")
        assert hook_log(tmp_path)[-1]["outcome"] == "stored", hook_log(tmp_path)[-1]
        blank = tmp_path / "spaces" / " "
        blank.mkdir(parents=True)
        prompt(env, blank, "remember the blank folder canary codename is ochre")
        assert hook_log(tmp_path)[-1]["outcome"] == "stored", hook_log(tmp_path)[-1]
        stored = {m["content"]: m["project"] for m in memories(service)}
        assert stored["the root canary codename is greenmoth"] == "/"
        assert stored["the blank folder canary codename is ochre"] == str(blank).strip()

        other = tmp_path / "y" / "app"
        other.mkdir(parents=True)
        git(other, "init", "-q")
        injected = prompt(env, other, "what is the canary codename")
        assert "greenmoth" not in injected and "ochre" not in injected
        assert "greenmoth" in prompt(env, "/", "what is the root canary codename")
        assert doctor_project(env, "/") == "/"
    finally:
        service.stop()


def opencode(env: dict[str, str], cwd: Path | str, *prompts: str) -> dict[str, Any]:
    """The opencode plugin from the shipped bundle in `cwd`: each prompt's chat.message and
    system transform; the project it used and the systems it built."""
    done = subprocess.run(["node", "--input-type=module", "-e",
                           IN_FOLDER % json.dumps(BUNDLE.as_uri())],
                          input=json.dumps({"env": env, "cwd": str(cwd), "prompts": list(prompts)}),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_opencode_at_the_filesystem_root_is_a_project_of_its_own(tmp_path: Path) -> None:
    """The plugin names folders as the hooks do: at `/` its recall gets no other project's
    memories and "remember" files under "/"; the TypeScript rule names the root and a blank
    folder as Python's does."""
    blank = tmp_path / "spaces" / " "
    blank.mkdir(parents=True)
    from semantic_memory.harness.project import detect_project

    folders = ["/", str(blank), str(blank / "deeper-but-missing")]
    assert node_eval("detectProject", [[f] for f in folders]) == \
        [detect_project(f) for f in folders] == ["/", str(blank).strip(), "deeper-but-missing"]

    service = start_service(tmp_path / "service")
    try:
        with service.client() as client:
            assert client.post("/ingest", json={
                "content": "the web canary codename is bluefalcon", "project": ELSEWHERE
            }).json()["status"] == "new"
        env = {"MEMORY_PLUGIN_URL": service.url, "MEMORY_DB_PATH": str(tmp_path / "memory.db")}
        result = opencode(env, "/", "remember the root canary codename is greenmoth",
                          "what is the canary codename")
        assert result["project"] == "/"
        assert not any("bluefalcon" in part for part in result["systems"][1]), result
        assert [e["project"] for e in plugin_log(tmp_path)] == ["/", "/"]
        stored = {m["content"]: m["project"] for m in memories(service)}
        assert stored["the root canary codename is greenmoth"] == "/"
    finally:
        service.stop()


def mirrored(path: Path) -> Path:
    """A clone whose `origin` has a second url (a push mirror): git fetches from the first."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "remote", "add", "origin", "https://github.com/acme/web")
    git(path, "remote", "set-url", "--add", "origin", "https://gitlab.com/acme/web-mirror")
    return path


def test_a_remote_with_several_urls_is_named_by_the_first(tmp_path: Path) -> None:
    """`git remote set-url --add origin <mirror>`: the clone is still github.com/acme/web for
    the hooks, doctor and the opencode plugin, and recalls what another clone stored (the
    last url, which configparser keeps, made it gitlab.com/acme/web-mirror)."""
    from semantic_memory.harness.project import detect_project

    clone = mirrored(tmp_path / "webmirror")
    (clone / "src").mkdir()
    assert detect_project(clone / "src") == ELSEWHERE
    assert node_eval("detectProject", [[str(clone / "src")]]) == [ELSEWHERE]
    service = start_service(tmp_path / "service")
    try:
        with service.client() as client:
            assert client.post("/ingest", json={
                "content": "the web release train leaves on thursdays", "project": ELSEWHERE
            }).json()["status"] == "new"
        env = hook_env(tmp_path, service.url)
        assert "thursdays" in prompt(env, clone / "src", "when does the web release train leave")
        assert hook_log(tmp_path)[-1]["project"] == ELSEWHERE
        assert doctor_project(env, clone) == ELSEWHERE
    finally:
        service.stop()


#: Lines of git configs: remotes with one url or several, continuation lines (which send the
#: Python side to configparser), comments, blank lines, repeated sections.
CONFIG_LINES = ['[remote "origin"]', "\turl = https://first.example/o/r.git",
                "\turl = https://second.example/o/r", "url = git@third.example:o/r.git",
                "\t\tcontinued.example/x", '[remote "up"]', "  URL=https://up.example/u/p",
                "\tfetch = +refs/heads/*:refs/remotes/origin/*", "[core]", "\tbare = false",
                "# c", "; c", "", "[remote \"origin\"]", "\turl : https://colon.example/c/d"]


def test_every_reader_keeps_a_remotes_first_url(tmp_path: Path) -> None:
    """The small reader, the configparser fallback (a config with continuation lines) and
    the opencode plugin's reader name each config's project alike, by the first url of the
    remote; a fixed config that only configparser reads says which one that is."""
    import random

    from semantic_memory.harness.project import _configparser_sections, _plain_config, \
        detect_project

    rng = random.Random(20260611)
    texts = ['[remote "origin"]\n\turl = https://github.com/acme/web\n'
             '\turl = https://gitlab.com/acme/web-mirror\n\t\tits continuation\n']
    texts += ["\n".join(rng.choice(CONFIG_LINES) for _ in range(rng.randint(1, 9)))
              for _ in range(300)]
    folders = []
    for i, text in enumerate(texts):
        folder = tmp_path / f"r{i}"
        (folder / ".git").mkdir(parents=True)
        (folder / ".git" / "config").write_text(text)
        folders.append(folder)
        plain = _plain_config(text)
        if plain is not None:  # configparser reads it alike
            fallback = _configparser_sections(str(folder / ".git" / "config")) or {}
            assert {s: v.get("url", "") for s, v in plain.items()} == \
                {s: v["url"] for s, v in fallback.items()}, repr(text)
    expected = [detect_project(folder) for folder in folders]
    assert _plain_config(texts[0]) is None and expected[0] == ELSEWHERE
    assert node_eval("detectProject", [[str(f)] for f in folders]) == expected
    assert len(set(expected)) > 5  # the configs name several projects


def test_stdio_browsing_obeys_the_repositorys_recall_switch(tmp_path: Path) -> None:
    """`memory-mcp --stdio` in a repository whose file turns recall off: the `recall` prompt,
    the resources (list and read) and completion refuse as memory_recall does, with its
    reason; with recall on, the prompt recalls for the repository's project unless given
    one (memory_store files under it likewise). The HTTP /mcp serves every folder: its
    prompt without a project still reaches every project."""
    import anyio
    import pytest
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_REQUEST, PromptReference
    from test_service_mcp import call, call_error
    from test_service_support import http_session, service_env, stdio_session

    off = tmp_path / "off"
    off.mkdir()
    git(off, "init", "-q")
    git(off, "remote", "add", "origin", "https://github.com/acme/off")
    config = off / ".semantic-memory.toml"
    env = service_env(tmp_path)
    for content, project in (("the web canary codename is bluefalcon", ELSEWHERE),
                             ("the off canary codename is redheron", "github.com/acme/off")):
        done = subprocess.run([*memory_mcp_command(), "store", content, "--project", project],
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    uid = json.loads(subprocess.run([*memory_mcp_command(), "list", "--json"], env=env,
                                    capture_output=True, text=True, timeout=60).stdout)[0]["uid"]

    async def refused(session: Any, ask: Any, refused: str) -> None:
        with pytest.raises(MCPError) as info:
            await ask
        assert info.value.error.code == INVALID_REQUEST
        assert info.value.error.message == (f"recall is off for this repository ({config}: "
                                            f"[recall] enabled = false); {refused}")

    async def main() -> None:
        async with stdio_session(tmp_path, cwd=off) as session:
            config.write_text("[recall]\nenabled = false\n")
            assert "recall is off" in await call_error(session, "memory_recall",
                                                       {"query": "canary codename"})
            await refused(session, session.get_prompt("recall", {"task": "canary codename"}),
                          "nothing recalled")
            await refused(session, session.read_resource("memory://recent"), "nothing read")
            await refused(session, session.read_resource(f"memory://recent/{ELSEWHERE}"),
                          "nothing read")
            await refused(session, session.read_resource(f"memory://memories/{uid}"),
                          "nothing read")
            await refused(session, session.list_resources(), "nothing listed")
            await refused(session, session.complete(PromptReference(name="recall"),
                                                    {"name": "project", "value": ""}),
                          "nothing completed")

            config.write_text("[recall]\nenabled = true\n")
            got = await session.get_prompt("recall", {"task": "canary codename"})
            text = got.messages[0].content.text
            assert "redheron" in text and "bluefalcon" not in text, text
            asked = await session.get_prompt("recall", {"task": "canary codename",
                                                        "project": ELSEWHERE})
            assert "bluefalcon" in asked.messages[0].content.text
            assert "bluefalcon" in (await session.read_resource("memory://recent")
                                    ).contents[0].text
            stored = await call(session, "memory_store", {"content": "the off repo builds "
                                                                     "with make"})
            assert stored["status"] == "new"

        service = start_service(tmp_path)
        try:
            async with http_session(service.mcp_url) as session:
                got = await session.get_prompt("recall", {"task": "canary codename"})
                text = got.messages[0].content.text
                assert "redheron" in text and "bluefalcon" in text, text
        finally:
            service.stop()

    anyio.run(main)
    assert "Traceback" not in (tmp_path / "stdio-stderr.log").read_text()
    listed = json.loads(subprocess.run([*memory_mcp_command(), "list", "--json"], env=env,
                                       capture_output=True, text=True, timeout=60).stdout)
    assert {m["content"]: m["project"] for m in listed}["the off repo builds with make"] == \
        "github.com/acme/off"


def test_import_with_db_files_under_the_name_its_approvals_allow(tmp_path: Path) -> None:
    """`memory-mcp --db PATH import claude-code --project DIR` reads the approvals beside that
    db, as `allow` and `doctor` with --db do: a repository file's project name allowed there
    is the name the notes are filed under, which the hooks (MEMORY_DB_PATH=PATH) recall
    from; the approvals of the environment's (default) db are not read."""
    toml = tmp_path / "toml"
    toml.mkdir()
    git(toml, "init", "-q")
    git(toml, "remote", "add", "origin", "https://github.com/acme/toml")
    (toml / ".semantic-memory.toml").write_text('[project]\nname = "acme-shared"\n')
    (toml / "CLAUDE.md").write_text("- toml builds with the quokka toolchain\n")
    db = tmp_path / "memory.db"
    cli_env = {k: v for k, v in hook_env(tmp_path, None).items() if k != "MEMORY_DB_PATH"}

    def cli(*args: str) -> str:
        done = subprocess.run([*memory_mcp_command(), "--db", str(db), *args], env=cli_env,
                              cwd=toml, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "to name the project 'acme-shared'" in cli("allow")
    assert doctor_project({**cli_env, "MEMORY_DB_PATH": str(db)}, toml) == "acme-shared"
    cli("import", "claude-code", "--project", str(toml))
    stored = [m["project"] for m in json.loads(cli("list", "--json")) if "quokka" in m["content"]]
    assert stored == ["acme-shared"]
    service = start_service(tmp_path)
    try:
        env = hook_env(tmp_path, service.url)
        prompt(env, toml, "which toolchain does toml build with")
        assert hook_log(tmp_path)[-1]["project"] == "acme-shared"
    finally:
        service.stop()


def test_what_memory_store_says_of_an_omitted_project_is_what_stdio_does(tmp_path: Path) -> None:
    """The schema the agent reads and docs/service.md both say that `--stdio`, like the proxy,
    files a memory_store without a project under the repository's project (it does: the
    stdio browsing test above), where they said "none"."""
    import anyio
    from test_service_support import stdio_session

    async def main() -> str:
        async with stdio_session(tmp_path) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            return tools["memory_store"].input_schema["properties"]["project"]["description"]

    described = anyio.run(main)
    assert "(a server started in the agent's folder, `memory-mcp proxy` or `--stdio`, fills it in" \
        in described, described
    docs = (Path(__file__).resolve().parent.parent / "docs" / "service.md").read_text()
    [row] = [line for line in docs.splitlines() if line.startswith("| `memory_store` |")]
    assert "through `memory-mcp proxy` and `--stdio`, the project of the repository" in row
    assert "over `/mcp`, none" in row
