"""`.semantic-memory.toml`: what a repository says about being remembered, committed at its root.

    [capture]
    enabled = false        # hooks store nothing from this repository
    [recall]
    enabled = false        # hooks inject nothing into sessions in it
    [project]
    name = "acme/web"      # the project name for every checkout, fork and worktree, once allowed

The file is looked for at the top of the repository that holds the hook's cwd (found as
`project.py` finds it; a folder outside any repository: in that folder). Read only when it
exists, with the standard library's `tomllib`, imported only then: a hook has no start-up time
to spare. A file that cannot be read or parsed, or holds a table or key not listed above, is
a warning, and it stops capture (it may be an opt-out whose typo must not leak the
repository) while recall goes on as usual; so is a project name the service would refuse.

A `[project] name` other than the detected one (`project.py`) is used only once the user has
allowed that file with that name (`memory-mcp allow`, direnv-style): a repository anyone can
clone must not file what a session in it captures under, and be given the memories of, a
project of the user's it names (`github.com/mycompany/secret`). A fork or a monorepo folder
that shares its upstream's name looks just the same, so only the user can tell. The approvals
live in `repo-approvals.json` beside the db, `{"allowed": {file's path: name}}`; until then
the name is `ignored` (the detected one is used), and the file names the folder to allow.
`[capture]`/`[recall] enabled = false` need no approval: they only take away.

The opencode plugin reads the same files the same way (`opencode-plugin/src/repoconfig.ts`).
"""

from __future__ import annotations

import os

from .project import _find_repository, as_text

# No dataclasses, typing or pathlib at import: every hook run asks for this file, and most
# repositories have none (pathlib is imported only when one exists).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ..config import Settings
    from .settings import HookSettings

FILE_NAME = ".semantic-memory.toml"
#: Longest file read (a config file, not data).
MAX_BYTES = 64 * 1024
#: The user's approvals, beside the db (`approvals_file`).
APPROVALS_FILE = "repo-approvals.json"
#: Longest approvals file read (one line per allowed repository).
MAX_APPROVALS_BYTES = 4 * 1024 * 1024


class RepoConfig:
    """The settings in effect for one working directory (the defaults when no file).
    `project`: the file's `[project] name` when in effect; `ignored`: that name when it is
    not, for want of the user's approval (`memory-mcp allow`). `error`: why the file could
    not be used (then capture is off, recall on, no project name)."""

    __slots__ = ("path", "capture", "recall", "project", "error", "ignored")

    def __init__(self, path: Path | None = None, capture: bool = True, recall: bool = True,
                 project: str | None = None, error: str | None = None,
                 ignored: str | None = None) -> None:
        self.path, self.capture, self.recall = path, capture, recall
        self.project, self.error, self.ignored = project, error, ignored

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
        if self.ignored:
            parts.append(f"project name {self.ignored!r} ignored until allowed "
                         f"(`memory-mcp allow {_quote(os.path.dirname(self.path))}`)")
        return f"{self.path}: {', '.join(parts)}"

    def warning(self) -> str | None:
        """One line for the hook log (and an MCP server's stderr) when part of the file is
        not used: it is unreadable, or its project name awaits the user's approval."""
        if self.error:
            return f"{self.path}: {self.error}"
        if self.ignored:
            return (f'{self.path}: [project] name "{self.ignored}" is ignored until you allow '
                    f"it: run `memory-mcp allow {_quote(os.path.dirname(self.path))}`")
        return None


def _quote(folder: str) -> str:
    """`shlex.quote(folder)`, so the advice can be pasted; without `re` at import."""
    safe = "@%+=:,./-_"
    if folder and all(c.isascii() and (c.isalnum() or c in safe) for c in folder):
        return folder
    return "'" + folder.replace("'", "'\"'\"'") + "'"


def project_for(cwd: str | Path, repo: RepoConfig, configured: str | None) -> str | None:
    """The project memories made in `cwd` are stored under and recalled for: `configured`
    (MEMORY_PROJECT: the person's environment wins over the repository), else the file's
    `[project] name` if the user allowed it (`load_repo_config` leaves it out otherwise),
    else the detected one (remote, top folder; `project.py`). The one place of that order:
    the hooks (`HookCall.project`), `doctor` and the MCP servers an agent starts in its
    folder (`memory-mcp proxy`, `--stdio`)."""
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


def load_repo_config(cwd: str | Path, approvals: str | None = None) -> RepoConfig:
    """The settings for `cwd`, the file's project name only if the user allowed it in
    `approvals` (default: `approvals_file()`); never raises. Only a file that is there and
    cannot be read is `unreadable`: a folder that cannot be resolved (deleted, a path with a
    NUL) has no file, as a folder outside any repository has none."""
    try:
        file = _config_file(cwd)
    except (OSError, ValueError):  # `realpath(".")` of a deleted folder; no file is there
        return RepoConfig()
    if not os.path.isfile(file):
        return RepoConfig()
    from pathlib import Path

    path = Path(file)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        return RepoConfig(path=path, capture=False, error=exc.strerror or str(exc))
    if len(raw) > MAX_BYTES:
        return RepoConfig(path=path, capture=False, error=f"larger than {MAX_BYTES} bytes")
    try:
        config = parse(path, raw.decode("utf-8-sig"))  # a BOM, as Windows editors write: read past
    except ValueError as exc:  # tomllib.TOMLDecodeError and UnicodeDecodeError are ValueErrors
        return RepoConfig(path=path, capture=False, error=str(exc).splitlines()[0][:200])
    if config.project is not None and not _allowed(config, cwd, approvals):
        config.project, config.ignored = None, config.project
    return config


def _allowed(config: RepoConfig, cwd: str | Path, approvals: str | None) -> bool:
    """Whether the file's project name may be used: it is the detected one (no other project
    is named), or the user allowed this file with this name."""
    from .project import detect_project

    if config.project == detect_project(cwd):
        return True
    try:
        names = read_approvals(approvals_file() if approvals is None else approvals)
    except ValueError:  # a broken approvals file allows nothing
        return False
    return names.get(_key(config.path)) == config.project


def _key(path: str | Path | None) -> str:
    """A file's key in the approvals: its path as a UTF-8 locale reads it (`as_text`), so an
    approval holds under every locale."""
    return as_text(str(path))


def approvals_file(settings: Settings | HookSettings | None = None) -> str:
    """`repo-approvals.json` beside the db of `settings` (the CLI's, with --db), else of the
    environment, found as a hook finds the db (MEMORY_DB_PATH, else the default)."""
    from .settings import HookSettings, beside_db

    if settings is None:
        settings = HookSettings(db_path=os.environ.get("MEMORY_DB_PATH", ""))
    return beside_db(settings, APPROVALS_FILE)


def read_approvals(approvals: str) -> dict[str, str]:
    """file's path -> allowed name; {} when there is no file yet. ValueError for one that
    cannot be read, and for a relative path: it would be read in the agent's folder, where
    a repository could bring its own."""
    if not os.path.isabs(approvals):
        raise ValueError(f"{approvals}: not an absolute path")
    try:
        with open(approvals, "rb") as handle:
            raw = handle.read(MAX_APPROVALS_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ValueError(f"{approvals}: {exc.strerror or exc}") from None
    from ..lite import try_loads

    data = try_loads(raw) if len(raw) <= MAX_APPROVALS_BYTES else None
    allowed = data.get("allowed") if isinstance(data, dict) else None
    if not isinstance(allowed, dict) or not all(isinstance(v, str) for v in allowed.values()):
        raise ValueError(f"{approvals}: not an approvals file ({{\"allowed\": {{path: name}}}})")
    return allowed


def write_approvals(approvals: str, names: dict[str, str]) -> None:
    """Replace the approvals file at once (no reader sees half of one), readable by the
    user only; OSError when it cannot be written, ValueError for a path not in UTF-8."""
    from ..lite import dumps, replace_private

    # UnicodeEncodeError (a ValueError) for a path that is not UTF-8, before any file exists
    data = (dumps({"allowed": dict(sorted(names.items()))}) + "\n").encode("utf-8")
    os.makedirs(os.path.dirname(approvals), mode=0o700, exist_ok=True)
    replace_private(approvals, data, durable=True)


def allow(cwd: str | Path, approvals: str) -> str:
    """Let the file for `cwd` name the project as it does now (`memory-mcp allow`): the line
    that says what was recorded. ValueError when there is nothing to allow; OSError when the
    approvals file cannot be written."""
    config = load_repo_config(cwd, approvals)
    if config.path is None:
        raise ValueError(f"no {FILE_NAME} for {cwd} (looked for {config_path(cwd)})")
    if config.error:
        raise ValueError(f"{config.path} is unreadable: {config.error}")
    if config.project is None and config.ignored is None:
        raise ValueError(f"{config.path} names no project: nothing to allow")
    names = read_approvals(approvals)
    if config.project is not None:
        why = "allowed before" if names.get(_key(config.path)) == config.project else \
            "the detected name, which needs no approval"
        return f"{config.path}: project name {config.project!r} is already in use ({why})"
    names[_key(config.path)] = config.ignored
    write_approvals(approvals, names)
    return f"allowed {config.path} to name the project {config.ignored!r} (in {approvals}; " \
           "a new name needs a new allow, `memory-mcp allow --revoke` takes it back)"


def revoke(cwd: str | Path, approvals: str) -> str:
    """Take back the approval of the file for `cwd` (`memory-mcp allow --revoke`): the line
    that says what was removed. ValueError/OSError as `allow`."""
    path = str(config_path(cwd))
    names = read_approvals(approvals)
    name = names.pop(_key(path), None)
    if name is None:
        return f"{path} was not allowed: nothing to revoke"
    write_approvals(approvals, names)
    return f"revoked {path}: its project name {name!r} is ignored again"


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
    """`name`, or ValueError for one the service would refuse (`project_setting`)."""
    from ..project_setting import checked_project_name

    return checked_project_name(name, "project.name")


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
