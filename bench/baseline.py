"""A module of the safety code as a git revision had it, loaded beside today's in one process,
for the benchmarks that time a baseline in the same run (`injection_filter.py`, `hygiene.py`).

The module is loaded inside the package it lived in, under another name, so its relative
imports resolve; the `textnorm.py` of the same revision is loaded with it where the module
imports one (a baseline must not read today's normalisation)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Where the safety modules lived: `safety/` since d52109d, `default_plugins/` before.
LAYOUTS = (("semantic_memory.safety", "core/semantic_memory/safety"),
           ("semantic_memory.default_plugins", "core/semantic_memory/default_plugins"))


def git_show(rev: str, path: str) -> str:
    return subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout


def exists(rev: str, path: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{rev}:{path}"], cwd=REPO,
                          capture_output=True).returncode == 0


def load(package: str, name: str, source: str) -> types.ModuleType:
    """`source` as module package.name, so its relative imports resolve in the package."""
    spec = importlib.util.spec_from_loader(f"{package}.{name}", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__package__ = package
    sys.modules[spec.name] = module  # dataclasses look their module up there
    exec(compile(source, f"<baseline:{name}>", "exec"), module.__dict__)  # noqa: S102
    return module


def baseline(rev: str, *file_names: str) -> types.ModuleType:
    """The first of `file_names` (the module's name then, e.g. "injection_filter.py",
    "hygiene.py") that `rev` holds in one of LAYOUTS, with that revision's `textnorm.py`."""
    package, base, name = next(
        ((package, base, name) for package, base in LAYOUTS for name in file_names
         if exists(rev, f"{base}/{name}")), (None, None, None))
    if package is None or base is None or name is None:
        raise SystemExit(f"{rev} holds none of {', '.join(file_names)}")
    source = git_show(rev, f"{base}/{name}")
    if exists(rev, f"{base}/textnorm.py"):
        load(package, "_bench_textnorm", git_show(rev, f"{base}/textnorm.py"))
        source = source.replace("from .textnorm import", "from ._bench_textnorm import")
    return load(package, f"_bench_{Path(name).stem}", source)
