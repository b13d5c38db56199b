"""`memory-mcp install` is a fixed point: what it writes, run through install again, is left
byte for byte as it is ("nothing to install", and `--dry-run` shows no diff), for every harness
and scope, from a home with no config files and from config files that hold only comments or
only blank lines; uninstall then gives back every file (and folder) as it was. (A second
install into a fresh home used to rewrite Codex's config.toml, a blank line more each time.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from semantic_memory.harness.install import ConfigFile, apply, plan
from test_service_support import memory_mcp_command

HARNESSES = ["claude-code", "codex", "kimi-code", "opencode"]
#: The files each harness's install writes, by scope: (path under the test folder, format).
#: `--project` for Codex and Kimi Code still writes the user's files (their hooks are per user).
FILES = {
    ("claude-code", "user"): [("home/.claude/settings.json", "json"),
                              ("home/.claude.json", "json")],
    ("claude-code", "project"): [("project/.claude/settings.local.json", "json"),
                                 ("home/.claude.json", "json")],
    ("codex", "user"): [("home/.codex/hooks.json", "json"), ("home/.codex/config.toml", "toml")],
    ("kimi-code", "user"): [("home/.kimi-code/config.toml", "toml"),
                            ("home/.kimi-code/mcp.json", "json")],
    ("opencode", "user"): [("home/.config/opencode/opencode.json", "jsonc")],
    ("opencode", "project"): [("project/opencode.json", "jsonc")],
}
FILES[("codex", "project")] = FILES[("codex", "user")]
FILES[("kimi-code", "project")] = FILES[("kimi-code", "user")]
#: A starting file holding nothing but comments or blank lines, in each format that has them
#: (plain JSON has no comments: only its blank file).
STARTS = {
    "comments": {"toml": "# my settings\n\n# more later\n", "jsonc": "// my settings\n"},
    "blank lines": {"toml": "\n\n", "jsonc": "\n\n", "json": "\n"},
}


def fresh_env(tmp: Path) -> dict[str, str]:
    """A home with only `~/.config` in it; no harness home moved out of it, no MEMORY_*."""
    (tmp / "home/.config").mkdir(parents=True)
    (tmp / "project").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")
           and k not in ("CODEX_HOME", "KIMI_CODE_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR")}
    env.update(HOME=str(tmp / "home"), MEMORY_DB_PATH=str(tmp / "db/memory.db"))
    return env


def memory_mcp(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([*memory_mcp_command(), *args], env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tree(tmp: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes, backups included) of the home and project."""
    return {str(p.relative_to(tmp)): None if p.is_dir() else p.read_bytes()
            for top in ("home", "project") for p in sorted((tmp / top).rglob("*"))}


def install_twice_then_uninstall(tmp: Path, env: dict[str, str], harness: str,
                                 scope: str) -> None:
    args = [harness, "--project", str(tmp / "project")] if scope == "project" else [harness]
    before = tree(tmp)
    memory_mcp(env, "install", *args)
    installed = tree(tmp)
    assert installed != before
    dry = memory_mcp(env, "install", *args, "--dry-run")
    assert "nothing to install" in dry and "---" not in dry and "+++" not in dry, dry
    again = memory_mcp(env, "install", *args)
    assert "nothing to install" in again and "installed:" not in again, again
    assert tree(tmp) == installed  # not one byte changed
    memory_mcp(env, "uninstall", *args)
    assert tree(tmp) == before  # byte for byte, no backup left, no folder added


@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("harness", HARNESSES)
def test_a_second_install_into_a_fresh_home_changes_nothing(tmp_path: Path, harness: str,
                                                            scope: str) -> None:
    install_twice_then_uninstall(tmp_path, fresh_env(tmp_path), harness, scope)


@pytest.mark.parametrize("start", sorted(STARTS))
@pytest.mark.parametrize("scope", ["user", "project"])
@pytest.mark.parametrize("harness", HARNESSES)
def test_a_second_install_over_a_file_of_comments_or_blank_lines_changes_nothing(
        tmp_path: Path, harness: str, scope: str, start: str) -> None:
    env = fresh_env(tmp_path)
    texts = STARTS[start]
    for name, kind in FILES[(harness, scope)]:
        if kind in texts:
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(texts[kind].encode())
    install_twice_then_uninstall(tmp_path, env, harness, scope)


def test_codex_reinstalled_over_other_options_is_what_a_first_install_writes(
        tmp_path: Path) -> None:
    """Installing again with other options (tool capture, then without) over a fresh home's
    config.toml writes exactly what one install with those options writes: no blank line
    gathers at the top, none goes missing before `[mcp_servers.memory]`."""
    env = fresh_env(tmp_path)
    config = tmp_path / "home/.codex/config.toml"
    memory_mcp(env, "install", "codex")
    first = config.read_bytes()
    memory_mcp({**env, "MEMORY_PLUGIN_TOOL_CAPTURE": "Bash"}, "install", "codex")
    text = config.read_text()
    assert text.startswith("[hooks.state.") and ":post_tool_use:0:0" in text
    assert text.count("\n[") == text.count("\n\n[") == 6  # each table after one blank line
    memory_mcp(env, "install", "codex")
    assert config.read_bytes() == first


def test_an_adapter_that_adds_its_tables_anew_each_time_still_installs_once(
        tmp_path: Path) -> None:
    """An adapter's install edit may take its TOML tables out and add them again (Codex's did
    with its trust entries; a third-party one may): tomlkit lays the re-added tables out with
    other blank lines, which a file install created holds nothing else to tell from. A file
    already as install writes it is left alone, however the edit gets there."""
    def add_anew(doc: Any) -> None:
        state = doc.setdefault("hooks", tomlkit.table(is_super_table=True)).setdefault(
            "state", tomlkit.table(is_super_table=True))
        for key in ("a", "b"):
            state.pop(key, None)
            state[key] = tomlkit.table().add("trusted_hash", key)
        servers = doc.setdefault("servers", tomlkit.table(is_super_table=True))
        servers["memory"] = tomlkit.table().add("url", "http://127.0.0.1/mcp")

    def take_out(doc: Any) -> None:
        doc.pop("hooks", None)
        doc.pop("servers", None)

    config = ConfigFile(tmp_path / "harness/config.toml", "toml", add_anew, take_out,
                        lambda doc: {"hooks": "hooks" in doc})
    apply(plan([config]))
    installed = config.path.read_bytes()
    for _ in range(2):
        assert plan([config]) == []
    assert installed.startswith(b"[hooks.state.a]\n") and b"\n\n[servers.memory]\n" in installed
    apply(plan([config], uninstall=True))
    assert not (tmp_path / "harness").exists()  # the file install created, and its folder
