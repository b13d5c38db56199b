"""An older release of this repository, run beside this one: its packages, from a detached git
worktree of this checkout, on PYTHONPATH ahead of this release's (the same venv; every
package is pure Python, so nothing is built).

(No tests here: helpers for the tests that put an older release next to this one.)
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Schema v8 on SQLite (before v9's normalized names), v5 on PostgreSQL; a Claude Code
#: project install that put the MCP server into the project's `.mcp.json`.
OLD_REV = "472fb81"
REPO = Path(__file__).resolve().parents[1]


@contextmanager
def worktree(folder: Path, rev: str = OLD_REV) -> Iterator[str]:
    """The PYTHONPATH that runs `rev`'s packages, from a worktree made in `folder` (which must
    not exist) and removed on the way out."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(folder), rev],
                   check=True, capture_output=True)
    try:
        packages = [folder / "core", *sorted(p for p in (folder / "plugins").glob("*/*")
                                             if (p / "pyproject.toml").exists())]
        yield os.pathsep.join(map(str, packages))
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)],
                       check=True, capture_output=True)
