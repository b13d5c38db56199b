"""MEMORY_PROJECT as the hooks read it: blank is unset (the repository's project, as the opencode
plugin already read it), where every write was refused with 422 for the project "   " and kept
in spool/rejected/; a name the service would refuse turns the hooks off with one line in the
hook log saying why, as a malformed repository file's `[project] name` does (real hook
processes against a real service)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness_support import hook_env, hook_log, run_hook
from test_service_support import Service, start_service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    running = start_service(tmp_path / "svc")
    yield running
    running.stop()


def clone(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run(["git", "remote", "add", "origin", "https://github.com/acme/shop.git"],
                   cwd=path, check=True)
    return path


def prompt(env: dict[str, str], cwd: Path, text: str) -> str:
    """Claude Code's UserPromptSubmit hook, each prompt a session of its own: what it injects."""
    done = run_hook("claude-code", "UserPromptSubmit", {
        "session_id": f"s-{abs(hash(text))}", "cwd": str(cwd), "hook_event_name": "UserPromptSubmit",
        "prompt": text}, env, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rejected(tmp: Path) -> list[Path]:
    return sorted((tmp / "spool" / "rejected").glob("*"))


@pytest.mark.parametrize("blank", ["   ", "\t \t"])
def test_a_blank_memory_project_is_the_repositorys_project(service: Service, tmp_path: Path,
                                                          blank: str) -> None:
    shop = clone(tmp_path / "shop")
    env = hook_env(tmp_path, service.url, MEMORY_PROJECT=blank, MEMORY_HOOK_BUDGET_S="5")
    prompt(env, shop, "remember: the shop checkout uses stripe elements")
    assert "stripe elements" in prompt(env, shop, "what does the shop checkout use?")
    assert [e["project"] for e in hook_log(tmp_path)] == ["github.com/acme/shop"] * 2
    assert [e["outcome"] for e in hook_log(tmp_path)][:1] == ["stored"]
    assert rejected(tmp_path) == []
    with service.client() as client:
        items = client.get("/api/memories", params={"project": "github.com/acme/shop"}).json()
    assert [m["content"] for m in items["items"]] == ["the shop checkout uses stripe elements"]


@pytest.mark.parametrize(("value", "reason"), [
    ("x" * 257, "MEMORY_PROJECT must be 1..256 characters"),
    ("shop\nother", "MEMORY_PROJECT must be one line (no newline, tab or NUL)"),
    ("<private>the secret shop</private>", "MEMORY_PROJECT must not hold <private> text"),
])
def test_a_memory_project_the_service_refuses_turns_the_hooks_off(
        service: Service, tmp_path: Path, value: str, reason: str) -> None:
    """One line says why (never the name: it may be private); nothing is sent or spooled."""
    shop = clone(tmp_path / "shop")
    env = hook_env(tmp_path, service.url, MEMORY_PROJECT=value)
    assert prompt(env, shop, "remember: the shop checkout uses stripe elements") == ""
    [entry] = hook_log(tmp_path)
    assert (entry["outcome"], entry["detail"]) == (
        "error", f"invalid setting, hooks are off: {reason}")
    assert "secret" not in (tmp_path / "hooks.jsonl").read_text()
    assert rejected(tmp_path) == [] and not list((tmp_path / "spool").glob("*.json"))
    with service.client() as client:
        assert client.get("/api/memories").json()["items"] == []
    ok = hook_env(tmp_path, service.url, MEMORY_PROJECT="é" * 256, MEMORY_HOOK_BUDGET_S="5")
    prompt(ok, shop, "remember: the shop checkout uses stripe elements")
    assert hook_log(tmp_path)[-1]["project"] == "é" * 256
