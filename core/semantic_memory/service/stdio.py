"""What an MCP server an agent starts over stdio (`memory-mcp --stdio`, runner.py; the proxy's
front, mcp_front.py) needs from its process: the wire, taken private, and a folder to read its
workspace from. Standard library only: the front must start with nothing else."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    from ..config import Settings

#: What a command run in a folder deleted since says (the CLI's, and a server's that cannot go on).
FOLDER_GONE = "the current folder no longer exists (deleted?): cd to a project folder"


class StdioClosed(OSError):
    """The agent started this server with stdin or stdout closed: there is no wire."""


def claim_stdio() -> tuple[BinaryIO, BinaryIO]:
    """The protocol's stdin and stdout, private; fd 0 then reads nothing and fd 1 writes to
    stderr, so nothing else in this process can corrupt the stream. StdioClosed when either
    is closed (`<&-`), before anything is moved."""
    check_stdio()
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out


def check_stdio() -> None:
    """StdioClosed, in one line, when standard input or output is closed."""
    for fd, name in ((0, "standard input"), (1, "standard output")):
        try:
            os.fstat(fd)
        except OSError:
            raise StdioClosed(f"{name} is closed: an MCP server over stdio needs both "
                              "(the agent starts it with pipes)") from None


def settle_workspace(settings: Settings) -> tuple[Settings, str | None]:
    """(the settings to serve with, a line for stderr or None). A server reads its workspace
    (`.semantic-memory.toml`, the project its stores get) from its current folder, with
    `os.getcwd()`, which fails once that folder is deleted under it (a worktree removed while
    the agent runs there). It then moves to the nearest folder above that still exists, whose
    repository's file binds it as it binds the hooks, and keeps the project the hooks file
    this folder's memories under (`project_for` of the deleted path) as MEMORY_PROJECT would.
    ValueError (FOLDER_GONE) when the store's path is relative: it named a file in that
    folder."""
    from ..harness.project import deleted_folder, working_folder

    if working_folder() is not None:
        return settings, None
    if not settings.resolved_db_path.is_absolute():
        raise ValueError(f"{FOLDER_GONE} (MEMORY_DB_PATH {settings.db_path} is relative)")
    gone = deleted_folder()
    refuge = _nearest_existing(gone) if gone else os.sep
    os.chdir(refuge)
    if gone is None:
        return settings, f"the current folder no longer exists: serving from {refuge}"
    from ..harness.repo_config import approvals_file, load_repo_config, project_for

    project = project_for(gone, load_repo_config(gone, approvals_file(settings)),
                          settings.project or None)
    return (replace(settings, project=project or ""),
            f"the current folder {gone} no longer exists: serving from {refuge}, its "
            f"memories filed under its project {project!r}")


def _nearest_existing(path: str) -> str:
    """`path`'s nearest folder (itself or above) that exists; the root at worst."""
    folder = path
    while not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.sep
        folder = parent
    return folder
