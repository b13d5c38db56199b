"""opencode wired while its adapter is uninstalled (QA F3, from wheels): the bundle the
adapter's wheel shipped goes with it, but opencode's config still names it and the
`mcp.memory` server. `doctor` says so (NO ADAPTER INSTALLED, the plugin file MISSING) and
`uninstall opencode` takes out exactly what install added, without the adapter, giving the
files back byte for byte. Real CLI subprocesses: the adapter installed as a wheel installs
it (its package and the bundle in a venv's site-packages), then deleted as pip deletes it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from harness_support import closed_port, hook_env
from test_core_cli import venv_like_this

import semantic_memory_opencode
from semantic_memory_opencode import plugin_path

#: The user's own config: comments, a plugin and an MCP server of theirs, all kept.
USER_CONFIG = """{
  // my opencode settings
  "$schema": "https://opencode.ai/config.json",
  "plugin": ["opencode-wakatime"],
  "mcp": {
    "docs": {"type": "remote", "url": "https://example.com/mcp"} // theirs
  }
}
"""


def memory_mcp(program: Path, env: dict[str, str], *args: str,
               cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(program), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def wheel_install(folder: Path) -> tuple[Path, list[Path]]:
    """A venv whose opencode adapter is installed as its wheel installs it (the package with
    the bundle inside, and its dist-info): its `memory-mcp`, and what `pip uninstall` of the
    adapter deletes."""
    script = venv_like_this(folder, ("opencode",))
    site = folder / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / \
        "site-packages"
    package = site / "semantic_memory_opencode"
    shutil.copytree(Path(semantic_memory_opencode.__file__).parent, package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(plugin_path(), package / plugin_path().name)
    [info] = Path(sysconfig.get_paths()["purelib"]).glob("semantic_memory_opencode-*.dist-info")
    shutil.copytree(info, site / info.name)
    return script, [package, site / info.name]


@pytest.mark.parametrize("xdg", [True, False], ids=["XDG_CONFIG_HOME", "default"])
def test_opencode_wiring_without_its_adapter_is_reported_and_taken_out(
        tmp_path: Path, xdg: bool) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config_home = tmp_path / "xdg" if xdg else home / ".config"
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()), CLAUDE_CONFIG_DIR="",
                   CODEX_HOME="", KIMI_CODE_HOME="", XDG_CONFIG_HOME=str(config_home))
    if not xdg:
        del env["XDG_CONFIG_HOME"]
    user = config_home / "opencode" / "opencode.jsonc"
    user.parent.mkdir(parents=True)
    user.write_text(USER_CONFIG)
    project = tmp_path / "proj"
    project.mkdir()
    program, adapter = wheel_install(tmp_path / "venv")

    for where in ([], ["--project", str(project)]):
        done = memory_mcp(program, env, "install", "opencode", *where, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    bundle = adapter[0] / plugin_path().name
    shared = project / "opencode.json"
    for path in (user, shared):
        text = path.read_text()
        assert bundle.as_uri() in text and '"memory"' in text, text
    assert json.loads(shared.read_text())["mcp"]["memory"]["command"] == [str(program), "proxy"]

    for gone in adapter:  # `pip uninstall semantic-memory-opencode`
        shutil.rmtree(gone)
    doctor = memory_mcp(program, env, "doctor", "--project", str(project), cwd=tmp_path)
    lines = doctor.stdout.splitlines()
    assert ("opencode  (NO ADAPTER INSTALLED: opencode cannot load the plugin its config "
            "names)") in lines, doctor.stdout
    assert f"  user     plugin wired in {user}" in lines, doctor.stdout
    assert f"  project  plugin wired in {shared}" in lines, doctor.stdout
    for path in (user, shared):
        line = f"  MISSING  {bundle}, the plugin {path} loads: the harness cannot load it"
        assert line in lines, (line, doctor.stdout)
    assert doctor.stdout.count("MISSING") == 2  # the MCP command, `memory-mcp`, is there
    assert (f"  fix: `memory-mcp uninstall opencode` and `memory-mcp uninstall opencode "
            f"--project {project}` take them out, or install its adapter again "
            "(semantic-memory-opencode)") in lines, doctor.stdout
    report = json.loads(memory_mcp(program, env, "doctor", "--json", cwd=tmp_path).stdout)
    [orphan] = report["without_adapter"]
    assert orphan["harness"] == "opencode" and orphan["wired"] == {"user": [str(user)]}
    assert orphan["missing"] == {"user": [{"program": str(bundle), "file": str(user),
                                           "kind": "module"}]}

    for where in ([], ["--project", str(project)]):
        removed = memory_mcp(program, env, "uninstall", "opencode", *where, cwd=tmp_path)
        assert removed.returncode == 0, removed.stderr
        assert "its plugin entry (…/semantic-memory.js) and its `mcp.memory` server entry " \
            "only" in removed.stderr, removed.stderr
    assert user.read_text() == USER_CONFIG  # byte for byte, the user's entries kept
    assert not shared.exists() and project.is_dir()  # install created it; the folder stays
    doctor = memory_mcp(program, env, "doctor", "--project", str(project), cwd=tmp_path)
    assert not any(line.startswith("opencode") for line in doctor.stdout.splitlines())
    assert "wired in" not in doctor.stdout and "MISSING" not in doctor.stdout, doctor.stdout
    again = memory_mcp(program, env, "uninstall", "opencode", cwd=tmp_path)
    assert again.returncode == 1 and "no harness adapter named 'opencode'" in again.stderr
    assert "no plugin entry naming …/semantic-memory.js in " in again.stderr, again.stderr


def test_an_emptied_opencode_config_goes_with_its_folder(tmp_path: Path) -> None:
    """As the adapter's own uninstall: the config install created, and the opencode folder
    it created for it, go; the shared config folder (XDG_CONFIG_HOME) stays."""
    (tmp_path / "home").mkdir()
    config_home = tmp_path / "xdg"
    config_home.mkdir()
    env = hook_env(tmp_path, None, MEMORY_PORT=str(closed_port()), CLAUDE_CONFIG_DIR="",
                   CODEX_HOME="", KIMI_CODE_HOME="", XDG_CONFIG_HOME=str(config_home))
    program, adapter = wheel_install(tmp_path / "venv")
    done = memory_mcp(program, env, "install", "opencode", "--mcp", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (config_home / "opencode" / "opencode.json").is_file()
    for gone in adapter:
        shutil.rmtree(gone)
    dry = memory_mcp(program, env, "uninstall", "opencode", "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0 and "-    [" in dry.stdout, dry
    removed = memory_mcp(program, env, "uninstall", "opencode", cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert list(config_home.iterdir()) == []
