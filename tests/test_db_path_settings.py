"""MEMORY_DB_PATH values a user's shell or config makes by mistake (QA report fs, finding 10):
`~someone/…` of no such user was a `RuntimeError` traceback, a trailing slash silently made a
db *file* named like the folder, and a file name that fits but whose `-journal` does not was
`unable to open database file` with a 0-byte file left behind. Each is one line naming the
variable, exit code 2 for a command and the same line for a hook (which exits 0), and nothing
is created."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from test_service_support import memory_mcp_command


def env_with(tmp: Path, db_path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(HOME=str(tmp / "home"), MEMORY_DB_PATH=db_path,
               MEMORY_PLUGIN_URL="http://127.0.0.1:9")
    return env


CASES = [
    ("~no-such-user-here/memory.db", "MEMORY_DB_PATH: '~no-such-user-here' names no user of "
                                     "this machine (~/… is your home)"),
    ("{tmp}/data/", "MEMORY_DB_PATH names a file, not a folder: '{tmp}/data/' ends with '/' "
                    "(name the file in it)"),
    ("{tmp}/" + "n" * 250 + ".db", "MEMORY_DB_PATH's file name is 253 bytes long; with the "
                                   "'-journal' SQLite adds to it, at most 247 fit a folder"),
]


@pytest.mark.parametrize(("value", "said"), CASES)
def test_a_db_path_mistake_is_one_line_and_creates_nothing(tmp_path: Path, value: str,
                                                            said: str) -> None:
    value, said = value.format(tmp=tmp_path), said.format(tmp=tmp_path)
    done = subprocess.run([*memory_mcp_command(), "stats"], capture_output=True, text=True,
                          env=env_with(tmp_path, value), timeout=60, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"Error: {said}" or \
        done.stderr.strip().startswith(f"Error: {said}"), done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no db, no folder named `data`


@pytest.mark.parametrize(("value", "said"), CASES[:2])
def test_a_hook_names_the_same_mistake_and_exits_0(tmp_path: Path, value: str,
                                                   said: str) -> None:
    value, said = value.format(tmp=tmp_path), said.format(tmp=tmp_path)
    prompt = {"session_id": "s", "cwd": str(tmp_path), "prompt": "where does it deploy?"}
    done = subprocess.run([*memory_mcp_command(), "hook", "claude-code", "UserPromptSubmit"],
                          input=json.dumps(prompt), capture_output=True, text=True,
                          env=env_with(tmp_path, value), timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == ""
    assert f"memory-mcp hook: {said}" in done.stderr, done.stderr


def test_a_relative_model_path_is_refused_as_the_db_path_is(tmp_path: Path) -> None:
    """MEMORY_MODEL_PATH was taken relative to each process's folder: a service and a CLI
    command run from different folders disagreed on whether there is a model."""
    env = {**env_with(tmp_path, str(tmp_path / "memory.db")), "MEMORY_MODEL_PATH": "models/x.gguf"}
    done = subprocess.run([*memory_mcp_command(), "stats"], capture_output=True, text=True,
                          env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == ("Error: MEMORY_MODEL_PATH must be an absolute path (~/… is "
                                   "fine), not 'models/x.gguf'"), done.stderr
