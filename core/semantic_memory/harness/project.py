"""Which project an agent works in: its git repository, named so that every checkout of one
repository gets the same name (its remote), else the repository's top-level folder name.

Read straight from `.git` (no `git` process: a hook has no time to spare), worktrees and
submodules included. Every recall runs this, so it uses `os.path` and reads a plain git config
itself: pathlib, `re` and `configparser` would cost the hook more than its own work. A config
the small reader does not fully understand goes to `configparser`, so the result is its. Both
keep the first value of an option given twice: a remote with several `url` lines (`git remote
set-url --add`) is named by the first, the one git fetches from, not by a push mirror.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def detect_project(cwd: str | Path) -> str:
    """The project for a working directory: normalised remote URL, else the repository's
    top-level folder name, else the folder's own name. A folder without a name (the
    filesystem root `/`, a name of blanks, which the service would strip to nothing) is
    named by its path: without a project, recall there would reach every project and what
    is remembered there would be global."""
    start = os.path.realpath(os.path.expanduser(os.fspath(cwd)))
    top, git_dir = _find_repository(start)
    if git_dir is not None:
        remote = remote_url(git_dir)
        if remote and (named := normalise_remote(remote)).strip():  # not `https:///`
            return named
    folder = top or start
    name = os.path.basename(folder)
    return name if name.strip() else folder.strip()


def find_repository(start: Path) -> tuple[Path | None, Path | None]:
    """(top-level folder, git dir) of the repository holding `start`, or (None, None)."""
    from pathlib import Path

    top, git_dir = _find_repository(os.fspath(start))
    return (None if top is None else Path(top)), (None if git_dir is None else Path(git_dir))


def _find_repository(start: str) -> tuple[str | None, str | None]:
    """`find_repository` on strings."""
    folder = start
    while True:
        dot_git = os.path.join(folder, ".git")
        if os.path.isdir(dot_git):
            return folder, dot_git
        if os.path.isfile(dot_git):  # worktree or submodule: "gitdir: <path>"
            try:
                with open(dot_git, encoding="utf-8", errors="replace") as handle:
                    text = handle.read().strip()
            except OSError:
                return folder, None
            if text.startswith("gitdir:"):
                target = text[len("gitdir:"):].strip()
                return folder, os.path.realpath(os.path.join(folder, target))
            return folder, None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None, None
        folder = parent


def remote_url(git_dir: str | Path) -> str | None:
    """The `origin` remote's URL (else the first remote's) from the repository's config."""
    common = os.fspath(git_dir)
    commondir = os.path.join(common, "commondir")  # worktrees keep their config in the main git dir
    if os.path.isfile(commondir):
        try:
            with open(commondir, encoding="utf-8") as handle:
                common = os.path.realpath(os.path.join(common, handle.read().strip()))
        except OSError:
            pass
    config = os.path.join(common, "config")
    try:
        with open(config, encoding="utf-8") as handle:  # universal newlines, as configparser
            sections = _plain_config(handle.read())
    except OSError:
        return None
    except UnicodeDecodeError:
        sections = None
    if sections is None:
        sections = _configparser_sections(config)
        if sections is None:
            return None
    remotes = [s for s in sections if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = sections[section].get("url", "").strip()
        if url:
            return url
    return None


def _configparser_sections(config: str) -> dict[str, dict[str, str]] | None:
    """section -> {key: value} as `configparser.RawConfigParser(strict=False)` reads the file,
    the first value of an option given twice kept; None when it cannot."""
    import configparser

    parser = configparser.RawConfigParser(strict=False, dict_type=_FirstValues)
    try:
        parser.read(config, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    return {section: {"url": parser.get(section, "url", fallback="")}
            for section in parser.sections()}


class _FirstValues(dict):  # type: ignore[type-arg]
    """The dicts `configparser` reads a file into (`dict_type`), keeping an option's first
    value: the parser sets a repeated option's value as a new list, then appends its
    continuation lines to `self[name]`; that list is kept aside (`spare`) until the next
    option is set, then dropped. The values joined at the end of the read (strings) replace
    the lists as usual."""

    spare: tuple[str, list[str]] | None = None

    def __setitem__(self, key: str, value: object) -> None:
        self.spare = None
        if isinstance(value, list) and key in self:
            self.spare = (key, value)
        else:
            super().__setitem__(key, value)

    def __getitem__(self, key: str) -> object:
        if self.spare is not None and self.spare[0] == key:
            return self.spare[1]
        return super().__getitem__(key)


def _plain_config(text: str) -> dict[str, dict[str, str]] | None:
    """section -> {key: value} of a config file the way `RawConfigParser(strict=False)` reads
    it (the first value of an option given twice kept, as `_configparser_sections` keeps it),
    for files with nothing but section headers, `key = value` lines, comments and blank
    lines; None for anything else (a continued value, a key without a value, a DEFAULT
    section, a line before any section), which `configparser` then reads."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    indent = -1  # the indentation of the last header or option line
    option = False  # whether an option line came since the last header
    for line in text.split("\n"):
        value = line.strip()
        if not value or value.startswith(("#", ";")):
            continue
        level = len(line) - len(line.lstrip())
        if option and level > indent:
            return None  # a continuation line
        indent = level
        if value.startswith("["):
            close = value.rfind("]")
            if close < 2:
                return None
            name = value[1:close]
            if name == "DEFAULT":
                return None
            current = sections.setdefault(name, {})
            option = False
            continue
        if current is None:
            return None
        cut = min((i for i in (value.find("="), value.find(":")) if i >= 0), default=-1)
        key = value[:cut].rstrip().lower() if cut > 0 else ""
        if not key:
            return None
        current.setdefault(key, value[cut + 1:].strip())
        option = True
    return sections


#: Hosts whose owner and repository names are case-insensitive (`models.CASELESS_HOSTS`,
#: which a hook must not import: its dataclasses and `re` cost more than this module's work).
CASELESS_HOSTS = ("github.com", "gitlab.com", "bitbucket.org")


def normalise_remote(url: str) -> str:
    """`host/owner/repo`: no scheme, credentials, port or `.git`, so SSH and HTTPS clones of one
    repository agree (git@github.com:Acme/web.git == https://github.com/Acme/web); on a host
    where names are case-insensitive (CASELESS_HOSTS) in lower case, so clones whose remotes
    differ only in letter case agree too (https://github.com/Acme/App == github.com/acme/app).
    Other hosts' paths are kept as written: a self-hosted server may tell cases apart."""
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]  # credentials and port go
    elif (match := scp_like(url)) is not None:
        host, path = match
    else:  # a local path remote
        return url.rstrip("/").removesuffix(".git").rstrip("/") or url
    path = path.strip("/").removesuffix(".git").rstrip("/")
    host = host.lower()
    if host in CASELESS_HOSTS:
        path = path.lower()
    return f"{host}/{path}" if host else path


def scp_like(url: str) -> tuple[str, str] | None:
    """(host, path) of an scp-like address (`git@host:owner/repo.git`), else None: the
    pattern `^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$`, matched by hand (tests compare the two)."""
    at = url.find("@")
    if at > 0 and "/" not in url[:at]:
        found = _host_and_path(url, at + 1)
        if found is not None:
            return found
    return _host_and_path(url, 0)


def _host_and_path(url: str, start: int) -> tuple[str, str] | None:
    """`([^:/]+):(?!//)(.+)$` matched at `start`."""
    end = start
    while end < len(url) and url[end] not in ":/":
        end += 1
    if end == start or end == len(url) or url[end] != ":" or url.startswith("//", end + 1):
        return None
    rest = url[end + 1:]
    if rest.endswith("\n"):  # `$` matches before a final newline
        rest = rest[:-1]
    if not rest or "\n" in rest:
        return None
    return url[start:end], rest
