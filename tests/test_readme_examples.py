"""Every `uv run memory-mcp <command>` the README prints works as printed in the default
install (BM25-only, a fresh db, a fresh HOME), in the README's order."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
PREFIX = "uv run memory-mcp "


def readme_commands() -> list[list[str]]:
    """The argument lists of the README's `uv run memory-mcp <command> …` shell lines."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.S):
        for line in block.splitlines():
            if line.startswith(PREFIX):
                args = shlex.split(line[len(PREFIX):], comments=True)
                if args and not args[0].startswith("-"):  # `uv run memory-mcp` alone serves
                    commands.append(args)
    return commands


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    out = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    # A closed port: no service runs here, so `doctor` reports it down (as printed, exit 1).
    return {**out, "HOME": str(home), "MEMORY_DB_PATH": str(tmp_path / "memory.db"),
            "MEMORY_PLUGIN_URL": "http://127.0.0.1:9"}


def test_the_readme_prints_the_commands_this_test_runs() -> None:
    names = [args[0] for args in readme_commands()]
    assert names[:3] == ["store", "recall", "recall"]
    assert {"install", "doctor"} <= set(names)


def test_every_readme_command_works_as_printed(env: dict[str, str], tmp_path: Path) -> None:
    outputs = {}
    for args in readme_commands():
        result = subprocess.run([sys.executable, "-m", "semantic_memory", *args], env=env,
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        expected = 1 if args[0] == "doctor" else 0  # doctor: exit 1 says the service is down
        assert result.returncode == expected, (args, result.stdout, result.stderr)
        outputs[" ".join(args)] = result.stdout
    recall, block = [out for cmd, out in outputs.items() if cmd.startswith("recall")]
    assert "preference" in recall and "pnpm" in recall
    assert block.startswith("<semantic-memory>") and "package manager, not npm" in block
    assert "NOT REACHABLE" in outputs["doctor"]
