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
