"""A project name a person configures (MEMORY_PROJECT, a repository file's `[project] name`):
the one rule the hooks (`harness.settings`, `harness.repo_config`) and the service
(`config.Settings`) read it by. Standard library only, and it imports none of them."""

from __future__ import annotations

from .limits import MAX_PROJECT_CHARS


def read_project_setting(raw: str) -> str:
    """MEMORY_PROJECT without the blanks around it, "" (unset: the project is detected) when
    blank, as the opencode plugin reads it; ValueError for a name the service refuses
    (`checked_project_name`)."""
    name = raw.strip()
    return checked_project_name(name, "MEMORY_PROJECT") if name else ""


def checked_project_name(name: str, setting: str) -> str:
    """`name`, or ValueError naming `setting` for one the service would refuse
    (`ingest.validate`): every write would be refused and kept in spool/rejected/, and a
    private one would land in the hook log. The reason never echoes the name."""
    if not 0 < len(name) <= MAX_PROJECT_CHARS:
        raise ValueError(f"{setting} must be 1..{MAX_PROJECT_CHARS} characters")
    if any(c in name for c in "\n\r\t\x00"):
        raise ValueError(f"{setting} must be one line (no newline, tab or NUL)")
    from .private import has_private

    if has_private(name):
        raise ValueError(f"{setting} must not hold <private> text")
    return name
