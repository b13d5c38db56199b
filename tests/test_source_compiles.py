"""Every module compiles on every Python the project supports (`requires-python >= 3.11`).

Python 3.13 encodes docstrings as strict UTF-8 when it compiles them: a `\\udcxx` escape in a
(non-raw) docstring is a lone surrogate, and the whole module fails to import there. One such
docstring in harness/project.py made every command and every hook crash on 3.13 and 3.14 (a
hook exiting 1 with a traceback on every prompt). Checked here on any interpreter, through the
syntax tree, for the project's own sources."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("core", "plugins", "bench", "tests", "scripts")


def docstrings(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                found.append((getattr(node, "lineno", 1), text))
    return found


def test_no_docstring_holds_a_lone_surrogate() -> None:
    files = [p for folder in SOURCES for p in (ROOT / folder).rglob("*.py")
             if "node_modules" not in p.parts and ".venv" not in p.parts]
    assert len(files) > 100
    bad = []
    for path in files:
        tree = ast.parse(path.read_bytes(), str(path))
        for line, text in docstrings(tree):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {exc.reason}")
    assert bad == [], "docstrings Python 3.13 cannot compile (make them raw strings): " + \
        "; ".join(bad)
