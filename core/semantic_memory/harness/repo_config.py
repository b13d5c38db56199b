"""`.semantic-memory.toml`: what a repository says about being remembered, committed at its root.

    [capture]
    enabled = false        # hooks store nothing from this repository
    [recall]
    enabled = false        # hooks inject nothing into sessions in it
    [project]
    name = "acme/web"      # the project name for every checkout, fork and worktree

The file is looked for at the top of the repository that holds the hook's cwd (found as
`project.py` finds it; a folder outside any repository: in that folder). Read only when it
exists, with the standard library's `tomllib`, imported only then: a hook has no start-up time
to spare. A file that cannot be read or parsed, or holds a table or key not listed above, is
a warning, and it stops capture (it may be an opt-out whose typo must not leak the
repository) while recall goes on as usual; so is a project name the service would refuse.
The opencode plugin reads the same file the same way (`opencode-plugin/src/repoconfig.ts`).
"""

from __future__ import annotations

import os

from .project import _find_repository

# No dataclasses, typing or pathlib at import: every hook run asks for this file, and most
# repositories have none (pathlib is imported only when one exists).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

FILE_NAME = ".semantic-memory.toml"
#: Longest file read (a config file, not data).
MAX_BYTES = 64 * 1024


class RepoConfig:
    """The settings in effect for one working directory (the defaults when no file).
    `error`: why the file could not be used (then capture is off, recall on, no project
    name)."""

    __slots__ = ("path", "capture", "recall", "project", "error")

    def __init__(self, path: Path | None = None, capture: bool = True, recall: bool = True,
                 project: str | None = None, error: str | None = None) -> None:
        self.path, self.capture, self.recall = path, capture, recall
        self.project, self.error = project, error

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, f) for f in self.__slots__))

    def __repr__(self) -> str:
        return "RepoConfig(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__) + ")"

    def describe(self) -> str:
        """One line for `doctor` and the hook log."""
        if self.path is None:
            return f"no {FILE_NAME} (capture and recall on)"
        if self.error:
            return f"{self.path}: unreadable ({self.error}); capture off, recall on"
        parts = [f"capture {'on' if self.capture else 'off'}",
                 f"recall {'on' if self.recall else 'off'}"]
        if self.project:
            parts.append(f"project name {self.project!r}")
        return f"{self.path}: {', '.join(parts)}"


def project_for(cwd: str | Path, repo: RepoConfig, configured: str | None) -> str | None:
    """The project memories made in `cwd` are stored under and recalled for: `configured`
    (MEMORY_PROJECT: the person's environment wins over the repository), else the file's
    `[project] name`, else the detected one (remote, top folder; `project.py`). The one
    place of that order: the hooks (`HookCall.project`), `doctor` and the MCP servers an
    agent starts in its folder (`memory-mcp proxy`, `--stdio`)."""
    if configured or repo.project:
        return configured or repo.project
    from .project import detect_project

    return detect_project(cwd)


def config_path(cwd: str | Path) -> Path:
    """Where the file for `cwd` would be: the repository's top folder, else `cwd` itself."""
    from pathlib import Path

    return Path(_config_file(cwd))


def _config_file(cwd: str | Path) -> str:
    start = os.path.realpath(os.path.expanduser(os.fspath(cwd)))
    top, _ = _find_repository(start)
    return os.path.join(top or start, FILE_NAME)


def load_repo_config(cwd: str | Path) -> RepoConfig:
    """The settings for `cwd`; never raises."""
    try:
        file = _config_file(cwd)
        if not os.path.isfile(file):
            return RepoConfig()
        from pathlib import Path

        path = Path(file)
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        from pathlib import Path

        return RepoConfig(path=Path(cwd) / FILE_NAME, capture=False,
                          error=exc.strerror or str(exc))
    if len(raw) > MAX_BYTES:
        return RepoConfig(path=path, capture=False, error=f"larger than {MAX_BYTES} bytes")
    try:
        return parse(path, raw.decode("utf-8"))
    except ValueError as exc:  # tomllib.TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return RepoConfig(path=path, capture=False, error=str(exc).splitlines()[0][:200])


def parse(path: Path, text: str) -> RepoConfig:
    """The three keys from the file's text; ValueError for a malformed file or a wrong type."""
    import tomllib

    data = tomllib.loads(text)
    _known_keys_only(data)
    capture = _get(data, "capture", "enabled", bool, True)
    recall = _get(data, "recall", "enabled", bool, True)
    name = _get(data, "project", "name", str, None)
    if name is not None:
        name = _project_name(name.strip()) if name.strip() else None  # blank: no name
    return RepoConfig(path=path, capture=capture, recall=recall, project=name)


def _project_name(name: str) -> str:
    """`name`, or ValueError for one the service would refuse (`ingest.validate`): a file
    that names the project wrongly would only fill spool/rejected/, and a private one would
    land in the hook log. The reason never echoes the name."""
    from ..limits import MAX_PROJECT_CHARS
    from ..private import has_private

    if not 0 < len(name) <= MAX_PROJECT_CHARS:
        raise ValueError(f"project.name must be 1..{MAX_PROJECT_CHARS} characters")
    if any(c in name for c in "\n\r\t\x00"):
        raise ValueError("project.name must be one line (no newline, tab or NUL)")
    if has_private(name):
        raise ValueError("project.name must not hold <private> text")
    return name


#: Every table and key the file may hold. Anything else (`[capure]`, `enable`, `[Capture]`)
#: is a typo, most likely in an opt-out: treated as a malformed file, so capture is off.
KEYS = {"capture": ("enabled",), "recall": ("enabled",), "project": ("name",)}


def _known_keys_only(data: dict[str, Any]) -> None:
    """ValueError naming the first table or key that is not in KEYS."""
    for table, section in data.items():
        if table not in KEYS:
            raise ValueError(f"unknown table [{table}] (known: "
                             f"{', '.join(f'[{t}]' for t in KEYS)})")
        for key in section if isinstance(section, dict) else ():
            if key not in KEYS[table]:
                raise ValueError(f"unknown key {table}.{key} (known: "
                                 f"{', '.join(f'{table}.{k}' for k in KEYS[table])})")


def _get(data: dict[str, Any], table: str, key: str, kind: type, default: Any) -> Any:
    section = data.get(table, {})
    if not isinstance(section, dict):
        raise ValueError(f"[{table}] is not a table")
    value = section.get(key, default)
    if value is not default and not isinstance(value, kind):
        raise ValueError(f"{table}.{key} must be a {'boolean' if kind is bool else 'string'}")
    return value
