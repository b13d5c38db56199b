"""One-shot runs of the real agent binaries, wired by `memory-mcp install` as a user wires them,
against the scripted model server (model_mock.py) and a memory service URL that a caller can
switch between runs (a healthy service, one that is down, one that hangs). Used by the
no-stall tests (test_no_stall_e2e.py) and bench/no_stall.py. (No tests here.)"""

from __future__ import annotations

import time
from pathlib import Path

import test_harness_e2e as e2e
import test_opencode_e2e as oc
from model_mock import ModelMock

HARNESSES = ("claude-code", "opencode", "codex", "kimi-code")
PROMPT = "which port does the staging database use?"


class OneShot:
    """`harness` installed in a temp HOME (its project in `tmp`), MCP registered as `mcp`
    ("proxy", install's default, or "http", "stdio", "none"), hook budget the default 1.5 s."""

    def __init__(self, harness: str, tmp: Path, mock: ModelMock, url: str,
                 mcp: str = "proxy") -> None:
        if harness not in HARNESSES:
            raise ValueError(f"unknown harness {harness!r}")
        self.harness, self.mock = harness, mock
        tmp.mkdir(parents=True, exist_ok=True)
        env = {"MEMORY_PLUGIN_URL": url, "MEMORY_HOOK_BUDGET_S": "1.5"}
        if harness == "opencode":
            self.world: e2e.World | oc.World = oc.World(tmp, None, mock, **env)
        else:
            self.world = e2e.World(tmp, None, **env)
            if harness == "codex":
                e2e.codex_world(self.world, mock)
            elif harness == "kimi-code":
                e2e.kimi_world(self.world, mock)
        project = ["--project", str(self.world.project)] \
            if harness in ("claude-code", "opencode") else []
        self.install_args = ["install", harness, *project, "--mcp", mcp]
        self.installed_for = ""

    @property
    def backoff_file(self) -> Path:
        return self.world.tmp / "svc" / "hooks.backoff.json"

    def run(self, url: str, prompt: str = PROMPT) -> float:
        """Seconds one one-shot prompt takes with the memory service at `url` (installed for
        it, as a user with MEMORY_PLUGIN_URL would), from a fresh back-off state: a session
        that meets the service's state first."""
        if self.installed_for != url:  # an HTTP registration holds the URL: wire it anew
            if self.installed_for:
                self.world.memory_mcp("uninstall", *self.install_args[1:-2])
            self.world.env["MEMORY_PLUGIN_URL"] = url
            self.world.memory_mcp(*self.install_args)
            self.installed_for = url
        self.backoff_file.unlink(missing_ok=True)
        started = time.monotonic()
        if self.harness == "opencode":
            done = self.world.opencode(prompt)  # type: ignore[union-attr]
        elif self.harness == "claude-code":
            done = e2e.claude(self.world, self.mock, prompt)  # type: ignore[arg-type]
        elif self.harness == "codex":
            done = e2e.codex(self.world, prompt)  # type: ignore[arg-type]
        else:
            done = e2e.kimi(self.world, "-p", prompt)  # type: ignore[arg-type]
        seconds = time.monotonic() - started
        assert "MOCK-REPLY" in done.stdout, (done.stdout[-1000:], done.stderr[-2000:])
        return seconds


def model_mock() -> ModelMock:
    """A model server answering opencode's title calls aside (harmless for the others)."""
    return ModelMock(aside=oc.title_call)
