"""Which project an agent works in: its git repository, named so that every checkout of one
repository gets the same name (its remote), else the repository's top-level folder name.

Read straight from `.git` (no `git` process: a hook has no time to spare), worktrees and
submodules included.
"""

from __future__ import annotations

import re
from pathlib import Path

_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")  # git@host:owner/repo.git


def detect_project(cwd: str | Path) -> str | None:
    """The project for a working directory: normalised remote URL, else the repository's
    top-level folder name, else the folder's own name; None for the filesystem root."""
    start = Path(cwd).expanduser().resolve()
    top, git_dir = find_repository(start)
    if git_dir is not None:
        remote = remote_url(git_dir)
        if remote:
            return normalise_remote(remote)
    return (top or start).name or None


def find_repository(start: Path) -> tuple[Path | None, Path | None]:
    """(top-level folder, git dir) of the repository holding `start`, or (None, None)."""
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder, dot_git
        if dot_git.is_file():  # worktree or submodule: "gitdir: <path>"
            try:
                text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                return folder, None
            if text.startswith("gitdir:"):
                target = Path(text[len("gitdir:"):].strip())
                return folder, (target if target.is_absolute() else folder / target).resolve()
            return folder, None
    return None, None


def remote_url(git_dir: Path) -> str | None:
    """The `origin` remote's URL (else the first remote's) from the repository's config."""
    common = git_dir
    commondir = git_dir / "commondir"  # worktrees keep their config in the main git dir
    if commondir.is_file():
        try:
            common = (git_dir / commondir.read_text(encoding="utf-8").strip()).resolve()
        except OSError:
            pass
    import configparser

    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(common / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = parser.get(section, "url", fallback="").strip()
        if url:
            return url
    return None


def normalise_remote(url: str) -> str:
    """`host/owner/repo`: no scheme, credentials, port or `.git`, so SSH and HTTPS clones of one
    repository agree (git@github.com:Acme/web.git == https://github.com/Acme/web)."""
    url = url.strip()
    if "://" in url:
        rest = url.split("://", 1)[1]
        host, _, path = rest.partition("/")
        host = host.rsplit("@", 1)[-1].split(":", 1)[0]  # credentials and port go
    elif match := _SCP_LIKE.match(url):
        host, path = match.group(1), match.group(2)
    else:  # a local path remote
        return url.rstrip("/").removesuffix(".git").rstrip("/") or url
    path = path.strip("/").removesuffix(".git").rstrip("/")
    return f"{host.lower()}/{path}" if host else path
