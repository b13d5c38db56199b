"""Which project an agent works in: its git repository, named so that every checkout of one
repository gets the same name (its remote, `remotes.normalise_remote`), else the repository's
top-level folder name.

Read straight from `.git` (no `git` process: a hook has no time to spare), worktrees and
submodules included. Every recall runs this, so it uses `os.path` and reads a plain git config
itself: pathlib, `re` and `configparser` would cost the hook more than its own work. A config
the small reader does not fully understand goes to `configparser`, so the result is its. Both
keep the first value of an option given twice: a remote with several `url` lines (`git remote
set-url --add`) is named by the first, the one git fetches from, not by a push mirror. What
they read is then taken as git takes it: section names in any case (`[Remote "origin"]`), a
value's quotes and trailing comment (`url = "…" ; mirror`), a shorthand's
`url.<base>.insteadOf`, and a relative local remote (`../shared.git`) from the repository's
top folder. `include.path` is not followed: `[project] name` names such a repository.

A detected name is always one the service takes: valid text (`name_text`) and at most
`MAX_PROJECT_CHARS` long (`bounded`), else every write and recall of the repository would be
refused without a word. A worktree without a remote is named after its main checkout.
"""

from __future__ import annotations

import os

from ..limits import MAX_PROJECT_CHARS
from ..remotes import local_path, looks_like_remote, normalise_remote, scp_like

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["as_text", "bounded", "deleted_folder", "detect_project", "find_repository",
           "harness_path", "hook_folder", "name_text", "normalise_remote", "remote_url",
           "scp_like", "working_folder"]


def harness_path(value: str) -> str:
    """A path a harness sent in its JSON input (`cwd`, `transcript_path`), as this process
    must spell it to reach that file. JSON is UTF-8, and harnesses write paths as UTF-8
    text; Python encodes a str path with the locale's codec, so under a locale that is not
    UTF-8 (`LC_ALL=en_US.ISO-8859-1`, or ASCII with UTF-8 mode off) `/src/café` named other
    bytes, another (missing) folder, and `/src/项目` could not be encoded at all. Its UTF-8
    bytes are what the harness meant; `value` itself is kept when only it exists."""
    try:
        meant = os.fsdecode(value.encode("utf-8", "surrogateescape"))
    except UnicodeError:  # cannot happen for a str; never let a path cost a hook its write
        return value
    if meant != value and not os.path.exists(meant) and os.path.exists(value):
        return value
    return meant


def as_text(name: str) -> str:
    r"""A name read from the file system (a folder's, for a project name) as the text a
    UTF-8 locale reads: its bytes decoded as UTF-8, whatever this process's locale decoded
    them as (`café` read as `cafÃ©` under ISO-8859-1, as `caf\udcc3\udca9` under ASCII).
    Bytes that are not UTF-8 stay as the locale read them."""
    try:
        return os.fsencode(name).decode("utf-8")
    except UnicodeError:
        return name


def name_text(name: str) -> str:
    """`as_text`, with each byte that is not UTF-8 read as U+FFFD (`caf\\xe9` is `caf�`,
    under every locale): a project name is sent as JSON and shown in the MCP server's
    instructions, where a surrogate escape cannot be encoded (the proxy never answered, a
    hook's write was neither stored nor spooled). Node names such a folder so too, so a
    `cwd` Claude Code or opencode sends names the same project."""
    try:
        raw = os.fsencode(name)
    except UnicodeError:  # a lone surrogate that is no escaped byte (`\ud83d`)
        raw = name.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace")


#: How a name too long for the service is shortened: `…` + its tail + `~` + this many hex
#: digits of the SHA-256 of the whole name.
HASH_CHARS = 8


def bounded(name: str) -> str:
    """`name` if the service takes it (at most MAX_PROJECT_CHARS as sent and once composed,
    NFC, as the service composes it), else `…<tail>~<hash>`: its last characters, from the
    first `/` among them where there is one, and a short hash of the whole (composed) name,
    so two long names that end alike stay two projects and one name is always shortened
    alike. A deep local remote or a long GitLab subgroup URL otherwise got every write
    refused (422) and every recall an error."""
    if len(name) <= MAX_PROJECT_CHARS and (name.isascii() or 3 * len(name) <= MAX_PROJECT_CHARS):
        return name  # NFC makes a name at most three times longer
    import unicodedata

    composed = unicodedata.normalize("NFC", name)
    if len(composed) <= MAX_PROJECT_CHARS:
        return name if len(name) <= MAX_PROJECT_CHARS else composed
    from ..lite import sha256_hex

    digest = sha256_hex(composed.encode("utf-8", "surrogatepass"))[:HASH_CHARS]
    tail = composed[-(MAX_PROJECT_CHARS - 2 - HASH_CHARS):]
    slash = tail.find("/")
    if slash >= 0:  # from a component's start
        tail = tail[slash:]
    short = f"…{tail.strip()}~{digest}"
    # never read as a remote's address (`…x@host:path`), which the service would rename
    return f"…~{digest}" if looks_like_remote(short) else short


def working_folder() -> str | None:
    """This process's current folder; None when it no longer exists (deleted under it)."""
    try:
        return os.getcwd()
    except OSError:
        return None


def hook_folder(cwd: str | None) -> str:
    """The folder a hook run is for: its input's `cwd` (`harness_path`), else this process's
    current folder, else the one deleted under it (`deleted_folder`), else the root (named
    by its path, as `detect_project` names it): never an error, so a hook always has a
    project to file its write under."""
    if cwd:
        return harness_path(cwd)
    return working_folder() or deleted_folder() or os.sep


def deleted_folder() -> str | None:
    """Where the current folder was, once it was deleted: Linux's `/proc/self/cwd` link
    (`PATH (deleted)`), else `$PWD` when it names a folder that is gone; None when neither
    tells. A hook in such a folder still files what it stores under that folder's project."""
    try:
        link = os.readlink("/proc/self/cwd")
    except OSError:
        link = ""
    if link.endswith(" (deleted)") and os.path.isabs(link):
        return link[:-len(" (deleted)")]
    pwd = os.environ.get("PWD", "")
    if os.path.isabs(pwd) and not os.path.exists(pwd):
        return pwd
    return None


def detect_project(cwd: str | Path) -> str:
    """The project for a working directory: normalised remote URL, else the repository's
    top-level folder name (a worktree's: its main checkout's, `_main_checkout`), else the
    folder's own name. A folder without a name (the filesystem root `/`, a name of blanks,
    which the service would strip to nothing) is named by its path: without a project,
    recall there would reach every project and what is remembered there would be global.
    Always valid text, short enough for the service (`name_text`, `bounded`)."""
    return bounded(_detected(cwd))


def _detected(cwd: str | Path) -> str:
    """`detect_project` before `bounded`."""
    start = os.path.realpath(os.path.expanduser(os.fspath(cwd)))
    top, git_dir = _find_repository(start)
    if top is not None and git_dir is not None:
        remote = remote_url(git_dir)
        if remote and (named := normalise_remote(_from_top(remote, top))).strip():
            return named  # (not `https:///`)
        main = _main_checkout(git_dir)
        if main is not None:
            return main
    folder = name_text(top or start)  # the name a UTF-8 locale gives it, whatever this one's
    name = os.path.basename(folder)
    return name if name.strip() else folder.strip()


def _main_checkout(git_dir: str) -> str | None:
    """The name of a linked worktree's repository: its main checkout's folder (the common
    git dir's parent, as `git worktree list` finds it), or a bare repository's own
    (`app.git` is `app`, as a remote to it is named); None for any other checkout. Every
    worktree of a repository without a remote is then one project with its main checkout,
    as every clone with a remote is."""
    common = _common_dir(git_dir)
    if common is None:
        return None
    folder = name_text(common)
    if os.path.basename(folder) == ".git":
        folder = os.path.dirname(folder)
    name = os.path.basename(folder)
    if name.endswith(".git") and name != ".git":
        name = name[:-len(".git")]
    return name if name.strip() else (folder.strip() or None)


def _from_top(remote: str, top: str) -> str:
    """A relative local remote (`../shared.git`) as the path git reads it as, from the
    repository's top folder: two unrelated repositories whose remotes are both
    `../shared.git` are two projects, not one named `../shared`."""
    path = local_path(remote)
    if not path or os.path.isabs(path) or path.startswith("~"):
        return remote
    return os.path.normpath(os.path.join(name_text(top), path))  # both as text, as `path` is


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
            text = _read_path_file(dot_git)
            if text is not None and text.startswith("gitdir:"):
                target = text[len("gitdir:"):].strip()
                return folder, os.path.realpath(os.path.join(folder, target))
            return folder, None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None, None
        folder = parent


def remote_url(git_dir: str | Path) -> str | None:
    """The `origin` remote's URL (else the first remote's) from the repository's config, as
    git reads it."""
    # worktrees keep their config in the main git dir
    common = _common_dir(os.fspath(git_dir)) or os.fspath(git_dir)
    sections = _read_config(os.path.join(common, "config"))
    if sections is None:
        return None
    remotes = [s for s in sections if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for section in remotes:
        url = git_value(sections[section].get("url", "").strip())
        if url:
            return _rewritten(url, sections)
    return None


def _common_dir(git_dir: str) -> str | None:
    """The main git dir a linked worktree's git dir names in its `commondir` file, else None
    (a main checkout, a submodule)."""
    pointer = _read_path_file(os.path.join(git_dir, "commondir"))
    return os.path.realpath(os.path.join(git_dir, pointer)) if pointer else None


def _read_path_file(path: str) -> str | None:
    """The path git wrote in one of its small files (`.git`'s `gitdir:`, `commondir`),
    stripped; None when it cannot be read. Read as the file system's bytes (`os.fsdecode`),
    not as UTF-8: a checkout under a folder whose name is not UTF-8 is found all the same."""
    try:
        with open(path, "rb") as handle:
            return os.fsdecode(handle.read().strip())
    except (OSError, ValueError):
        return None


def _read_config(config: str) -> dict[str, dict[str, str]] | None:
    """section -> {key: first value} of a git config file, sections named as git names them
    (`_git_section`); None when it cannot be read."""
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
    merged: dict[str, dict[str, str]] = {}
    for name, options in sections.items():
        kept = merged.setdefault(_git_section(name), {})
        for key, value in options.items():
            kept.setdefault(key, value)
    return merged


def _git_section(header: str) -> str:
    """A section header as git reads it: the section's name in any case, a quoted
    subsection's as written (`Remote "origin"` is `remote "origin"`, not `remote "Origin"`),
    the old `remote.origin` form in lower case whole."""
    name, quote, subsection = header.partition('"')
    if quote:
        return f'{name.strip().lower()} "{subsection}'
    name, dot, subsection = header.strip().lower().partition(".")
    return f'{name} "{subsection}"' if dot else name


#: What git reads a backslash and the character after it as, in a value.
_ESCAPES = {"n": "\n", "t": "\t", "b": "\b"}


def git_value(raw: str) -> str:
    """A config value as git reads it: its double quotes gone (their text kept as written),
    a `#` or `;` outside them starting a comment, a backslash escape read (`n`, `t`, `b`, or
    the character itself), each blank outside them a space between words and none at the
    end."""
    if not any(c in raw for c in '"\\#;'):
        return raw
    out: list[str] = []
    quoted = escaped = False
    gap = ""
    for char in raw:
        if escaped:
            out += [gap, _ESCAPES.get(char, char)]
            gap, escaped = "", False
        elif char == "\\":
            escaped = True
        elif char == '"':
            out.append(gap)
            gap, quoted = "", not quoted
        elif quoted:
            out.append(char)
        elif char in "#;":
            break
        elif char in " \t\r\n":
            gap += " "
        else:
            out += [gap, char]
            gap = ""
    return "".join(out)


def _rewritten(url: str, sections: dict[str, dict[str, str]]) -> str:
    """A shorthand remote (`gh:acme/app`) with the longest `url.<base>.insteadOf` prefix it
    starts with replaced by that base, as git fetches it; the repository's config and the
    user's are read. A full URL (`://`, `user@host:`) is kept: it already names its
    repository, and a rewrite of it to a mirror would rename a project whose memories are
    stored under its own name."""
    if "://" in url or "@" in url:
        return url
    rules = _instead_of(sections)
    for config in _user_configs():
        rules += _instead_of(_read_config(config) or {})
    prefix, base = max(((p, b) for p, b in rules if url.startswith(p)),
                       key=lambda rule: len(rule[0]), default=("", ""))
    return base + url[len(prefix):] if prefix else url


def _instead_of(sections: dict[str, dict[str, str]]) -> list[tuple[str, str]]:
    """(prefix, base) of each `[url "<base>"] insteadOf = <prefix>` in a config."""
    rules = []
    for name, options in sections.items():
        prefix = git_value(options.get("insteadof", "").strip())
        if prefix and name.startswith('url "') and name.endswith('"'):
            rules.append((prefix, name[len('url "'):-1]))
    return rules


def _user_configs() -> list[str]:
    """The user's git config files: GIT_CONFIG_GLOBAL, else the XDG one and ~/.gitconfig."""
    configured = os.environ.get("GIT_CONFIG_GLOBAL")
    if configured:
        return [configured]
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return [os.path.join(xdg, "git", "config"), os.path.expanduser("~/.gitconfig")]


def _configparser_sections(config: str) -> dict[str, dict[str, str]] | None:
    """section -> {key: value} of the keys read (`url`, `insteadof`) as
    `configparser.RawConfigParser(strict=False)` reads the file, the first value of an
    option given twice kept; None when it cannot."""
    import configparser

    parser = configparser.RawConfigParser(strict=False, dict_type=_FirstValues)
    try:
        parser.read(config, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    return {section: {key: parser.get(section, key, fallback="") for key in ("url", "insteadof")}
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
