"""MEMORY_PROJECT as a setting: the one rule the hooks (`harness.settings`) and the service
(`config.Settings`) read it by. Standard library only, and it imports neither of them."""

from __future__ import annotations

from .limits import MAX_PROJECT_CHARS


def read_project_setting(raw: str) -> str:
    """MEMORY_PROJECT without the blanks around it, "" (unset: the project is detected) when
    blank, as the opencode plugin reads it; ValueError for a name the service refuses, as a
    repository file's `[project] name` is refused: every write would be refused and kept in
    spool/rejected/. The reason never echoes the name (it may be private)."""
    name = raw.strip()
    if not name:
        return ""
    if len(name) > MAX_PROJECT_CHARS:
        raise ValueError(f"MEMORY_PROJECT must be 1..{MAX_PROJECT_CHARS} characters")
    if any(c in name for c in "\n\r\t\x00"):
        raise ValueError("MEMORY_PROJECT must be one line (no newline, tab or NUL)")
    from .private import has_private

    if has_private(name):
        raise ValueError("MEMORY_PROJECT must not hold <private> text")
    return name
