"""The distributions as a user gets them: built by `uv build` (an sdist, then the wheel from
that sdist, as an index or `pip install` of an sdist builds it), offline: hatchling comes from
uv's cache, where the workspace's own `uv sync` put it."""

from __future__ import annotations

import subprocess
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

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
