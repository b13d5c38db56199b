"""`memory-mcp install` where a config folder cannot be written (a read-only home, config
folder or harness folder): one line naming the path, exit code 1, and nothing changed, not
even the files it could have written."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_ops_support import as_anyone, run_cli


@contextmanager
def read_only(*folders: Path) -> Iterator[None]:
    """`folders` without write permission (the CLI runs `as_anyone`, so a root run meets it
    too)."""
    for folder in folders:
        folder.chmod(0o555)
    try:
        yield
    finally:
        for folder in folders:
            folder.chmod(0o755)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes (and every folder, as b"/")."""
    out: dict[str, bytes] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), folder)] = b"/"
        for name in files:
            out[os.path.relpath(os.path.join(root, name), folder)] = \
                Path(root, name).read_bytes()
    return out


def install(tmp: Path, harness: str, **env: str) -> tuple[int, list[str]]:
    # the harness's folders in the home (not the caller's CODEX_HOME or KIMI_CODE_HOME)
    env = {"HOME": str(tmp / "home"), "CODEX_HOME": "", "KIMI_CODE_HOME": "", **env}
    done = run_cli(tmp, "install", harness, preexec=as_anyone, **env)
    assert "Traceback" not in done.stderr
    return done.returncode, done.stderr.strip().splitlines()


@pytest.mark.parametrize("harness", ["claude-code", "codex", "kimi-code"])
def test_install_into_a_read_only_home_says_so_in_one_line(tmp_path: Path, harness: str
                                                           ) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"XDG_CONFIG_HOME": str(home / ".config")}
    with read_only(home):
        code, err = install(tmp_path, harness, **env)
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(f"Error: cannot create the folder {home}/"), err
    assert err[0].endswith(": Permission denied; nothing was changed"), err
    assert tree(home) == {}


def test_install_opencode_into_a_read_only_config_folder(tmp_path: Path) -> None:
    home, config = tmp_path / "home", tmp_path / "config"
    home.mkdir()
    config.mkdir()
    with read_only(config):
        code, err = install(tmp_path, "opencode", XDG_CONFIG_HOME=str(config))
    assert (code, err) == (1, [f"Error: cannot create the folder {config}/opencode: "
                                  "Permission denied; nothing was changed"])
    assert tree(config) == {}


def test_a_backup_that_cannot_be_written_changes_nothing(tmp_path: Path) -> None:
    """~/.claude read-only, its settings.json one install keeps a backup of (`{}`): the backup
    cannot be written, so ~/.claude.json, which could, is not written either."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("{}\n")
    before = tree(home)
    with read_only(home / ".claude"):
        code, err = install(tmp_path, "claude-code")
    assert code == 1 and len(err) == 1, err
    assert err[0].startswith(
        f"Error: cannot write the backup {home}/.claude/settings.json.bak-"), err
    assert err[0].endswith(": Permission denied; nothing was changed"), err
    assert tree(home) == before  # no ~/.claude.json, no backup, no temporary file
    # writable again, the same command installs
    code, err = install(tmp_path, "claude-code")
    assert code == 0, err
    assert (home / ".claude.json").exists()
    assert [p.name for p in (home / ".claude").iterdir() if ".bak-" in p.name]


def test_a_file_install_cannot_replace_changes_nothing(tmp_path: Path) -> None:
    """settings.json itself needs no backup; its folder refuses the new file."""
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text('{\n  "theme": "dark"\n}\n')
    before = tree(home)
    with read_only(home / ".claude"):
        code, err = install(tmp_path, "claude-code")
    assert (code, err) == (1, [f"Error: cannot write {home}/.claude/settings.json: "
                                  "Permission denied; nothing was changed"])
    assert tree(home) == before
