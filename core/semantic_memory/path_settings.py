"""The checks a file-path setting (MEMORY_DB_PATH, MEMORY_DISCOVERY_FILE) gets in every
process that reads it, the service's (config.py) and a hook's (harness/settings.py), with one
wording. Standard library `os` only: a hook imports it."""

from __future__ import annotations

import os


def path_problem(name: str, path: str) -> str | None:
    """Why `path` cannot be the file setting `name` names, in one line; None when it can (or
    is unset, or `off`). Every process must find the same files: a relative path is read
    against each one's working folder, and a hook's is the agent's repository (its spool,
    holding text not yet redacted, would land there, where the service never replays it)."""
    if not path or path.lower() == "off":
        return None
    expanded = os.path.expanduser(path)
    if expanded.startswith("~"):  # `~user/…` of no such user
        return (f"{name}: {path.split('/', 1)[0]!r} names no user of this machine (~/… is "
                f"your home), in {path!r}")
    if not os.path.isabs(expanded):
        return f"{name} must be an absolute path (~/… is fine), not {path!r}"
    if path.endswith(("/", os.sep)):  # a folder: the file would be made named like it
        return f"{name} names a file, not a folder: {path!r} ends with '/' (name the file in it)"
    return None
