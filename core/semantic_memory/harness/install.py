"""`memory-mcp install/uninstall <harness>`: merge hook and MCP entries into a harness's own
config files, keeping everything else the user has there.

An adapter describes each file it touches as a `ConfigFile` with two in-place edits of the
parsed document (install, uninstall). This module turns them into changes: a unified diff for
`--dry-run`, otherwise an atomic write. A file whose parsed content an edit leaves equal is not
rewritten, so running install twice changes nothing.

The text is edited where the document changed, nothing else: JSON keeps its indentation, key
order and final newline (jsonc.py), TOML its layout (tomlkit, plus `tidy_toml` for the blank
line before a table). So uninstall gives back the bytes install started from. Install checks
that before it writes (it runs the uninstall edit on its own result) and keeps a backup
(`<file>.bak-<time>`) only of a file uninstall could not give back exactly; uninstall keeps
one only of a file it cannot edit in place. Installing again (other options) edits what
uninstall would leave, so it writes what a first install would have, and uninstall still gives
back the bytes of before the first. docs/harnesses.md lists the cases.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..config import Settings
from . import jsonc
from .client import configured_url
from .settings import TOOL_CAPTURE_OPTION

Document = Any  # a JSON object (dict) or a tomlkit document


class InstallError(Exception):
    """A config file cannot be edited safely (unreadable, malformed); nothing was written."""


#: What a local MCP server (`memory-mcp proxy` or `--stdio`) reads from its environment: for
#: harnesses that pass a stdio server only a fixed few variables unless told (Codex).
MCP_ENV_VARS = ("MEMORY_PLUGIN_URL", "MEMORY_PLUGIN_TOKEN", "MEMORY_TOKEN", "MEMORY_DB_PATH",
                "MEMORY_DB_URL", "MEMORY_DISCOVERY_FILE", "MEMORY_MODEL_PATH",
                "MEMORY_MAX_CONTENT_CHARS", "MEMORY_MCP_PROXY_TIMEOUT_S", "MEMORY_HOOK_BACKOFF_S")


@dataclass(frozen=True)
class InstallTarget:
    """Where and what to install, as the adapters need it."""

    harness: str
    home: Path
    project_dir: Path | None  # None: the user-level config
    executable: str  # the installed `memory-mcp` entry point
    mcp: str  # "proxy", "http", "stdio" or "none" (see `local_mcp`)
    mcp_url: str
    token: bool  # MEMORY_TOKEN is set: MCP entries send it (read from the environment)
    hook_timeout_s: int  # the harness-side timeout: above the hook's own budget
    #: The tools MEMORY_PLUGIN_TOOL_CAPTURE names at install, lowercase and comma-separated
    #: ("" when none: the tool hook is not installed).
    tool_capture: str

    def hook_command(self, event: str, tool: bool = False) -> str:
        """The command the harness runs for `event`. A `tool` event's carries the tools to
        capture (`--tool-capture=…`): the list install was given is the one that runs, unless
        MEMORY_PLUGIN_TOOL_CAPTURE names tools where the agent runs, which replaces it."""
        command = f"{shlex.quote(self.executable)} hook {self.harness} {event}"
        if tool and self.tool_capture:
            command += f" {shlex.quote(TOOL_CAPTURE_OPTION + self.tool_capture)}"
        return command

    def is_our_command(self, command: Any) -> bool:
        """A hook command this project wrote for this harness (any install path)."""
        return isinstance(command, str) and re.search(
            rf"memory-mcp['\"]?\s+hook\s+{re.escape(self.harness)}(\s|$)", command) is not None

    def is_our_server(self, entry: Any) -> bool:
        """An MCP server entry for this service: its URL, or a `memory-mcp` command."""
        if not hasattr(entry, "get"):  # a JSON object or a TOML table
            return False
        return entry.get("url") == self.mcp_url or "memory-mcp" in str(entry.get("command", ""))

    @property
    def local_mcp(self) -> bool:
        """The MCP entry is a command the harness starts (stdio), not the service's URL."""
        return self.mcp in ("proxy", "stdio")

    @property
    def stdio_command(self) -> list[str]:
        """The local MCP server: `memory-mcp proxy` (forwards to the service, bounded in time)
        or `memory-mcp --stdio` (opens the store, and an embedding model, itself)."""
        return [self.executable, "proxy" if self.mcp == "proxy" else "--stdio"]


def make_target(harness: str, settings: Settings, *, project_dir: str | None = None,
                mcp: str = "proxy") -> InstallTarget:
    return InstallTarget(
        harness=harness,
        home=Path.home(),
        project_dir=Path(project_dir).expanduser().resolve() if project_dir else None,
        executable=entry_point_path(),
        mcp=mcp,
        mcp_url=(settings.plugin_url.rstrip("/") if settings.plugin_url
                 else configured_url(settings)[0]) + "/mcp",
        token=bool(settings.token or settings.plugin_token),
        hook_timeout_s=max(2, math.ceil(settings.hook_budget_s * 2)),
        tool_capture=",".join(sorted(settings.tool_capture())),
    )


def transient_place(program: str) -> tuple[str, Path] | None:
    """("cache", folder) when `program` lies in a cache, which empties without asking (`uvx`,
    `uv tool run` and `pipx run` run from uv's or pipx's: `uv cache clean` removes it), ("temp",
    folder) in the temp folder (a reboot may empty it), None in a place that lasts. A hook
    command pointing there fails on every prompt once it is gone (exit 127)."""
    import tempfile

    if not os.path.isabs(program):  # found on PATH when the hook runs: wherever that is
        return None
    home = Path.home()
    caches = [os.environ.get("UV_CACHE_DIR"), os.environ.get("XDG_CACHE_HOME"),
              home / ".cache", home / "Library" / "Caches",
              Path(os.environ.get("LOCALAPPDATA") or home) / "uv" / "cache",
              os.environ.get("PIPX_HOME") and Path(os.environ["PIPX_HOME"]) / ".cache",
              home / ".local" / "share" / "pipx" / ".cache", home / ".local" / "pipx" / ".cache"]
    where = Path(os.path.realpath(program))
    for kind, folders in (("cache", caches), ("temp", [tempfile.gettempdir()])):
        for folder in filter(None, folders):
            real = Path(os.path.realpath(folder))
            if where.is_relative_to(real):
                return kind, real
    return None


def entry_point_path() -> str:
    """The absolute path of the installed `memory-mcp` script (not `uv run`: a hook must start
    fast), beside this interpreter when it is there, else on PATH."""
    import shutil

    beside = Path(sys.executable).with_name("memory-mcp")
    if beside.exists():
        return str(beside)
    return shutil.which("memory-mcp") or "memory-mcp"


@dataclass
class ConfigFile:
    """One harness config file and the edits install and uninstall make to it."""

    path: Path
    format: str  # "json", "jsonc" (JSON with comments, edited in place) or "toml"
    install: Callable[[Document], None]
    uninstall: Callable[[Document], None]
    #: Which of the project's entries this file holds, by name ("UserPromptSubmit hook",
    #: "MCP server"): `memory-mcp doctor` shows them.
    installed: Callable[[Document], dict[str, bool]]
    #: A file only earlier releases wrote to, that install now takes our entries out of (a
    #: project's `.mcp.json`): one that leaves empty goes, on install as on uninstall.
    legacy: bool = False
    #: Whether the file's folder is the harness's own (a project's `.claude/`, `~/.codex/`):
    #: removing the file removes the folder too when that leaves it empty. False for a file
    #: in a folder of the user's (a project's `.mcp.json`: never the --project folder itself).
    owns_folder: bool = True


@dataclass
class Change:
    path: Path
    before: str | None
    after: str | None  # None: uninstall left the file empty, so it goes
    #: Whether to keep a copy of `before`: only when the opposite command could not give it
    #: back byte for byte (install), or the file could not be edited in place (uninstall).
    backup: bool = True
    #: The backup whose bytes `after` is (uninstall gives back what install kept): it goes.
    restores: Path | None = None
    #: What the backup holds when not `before`: the file without our entries, when install
    #: runs again over an installed file (a copy of that would hold them).
    saved: str | None = None
    #: The harness's folder removing the file (`after` None) may leave empty, to go too
    #: (`ConfigFile.owns_folder`); None: the folder stays.
    folder: Path | None = None

    def diff(self) -> str:
        import difflib

        return "".join(difflib.unified_diff(
            (self.before or "").splitlines(keepends=True),
            (self.after or "").splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path) if self.after is not None else "/dev/null"))


def load(file: ConfigFile) -> tuple[str | None, Document]:
    """(original text or None, parsed document); InstallError when it cannot be parsed."""
    try:
        # newline="": "\r\n" stays as it is, so an untouched line is written back unchanged
        with open(file.path, encoding="utf-8", newline="") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {file.path}: {exc}") from None
    return text, parse(file, text)


def parse(file: ConfigFile, text: str | None) -> Document:
    """The document `text` holds (None: no file); InstallError when it cannot be parsed."""
    try:
        if file.format in ("json", "jsonc"):
            if _holds_nothing(file, text):
                doc = {}
            else:
                doc = json.loads(text) if file.format == "json" else jsonc.loads(text)
            if not isinstance(doc, dict):
                raise ValueError("the top level is not an object")
        else:
            import tomlkit

            doc = tomlkit.parse(text or "")
    except Exception as exc:  # noqa: BLE001 - json, tomlkit and our own ValueError
        kind = {"json": "JSON", "jsonc": "JSON (with comments)"}.get(file.format, "TOML")
        raise InstallError(f"{file.path} is not valid {kind} ({exc}); "
                           "fix or move it — nothing was changed") from None
    return doc


def _holds_nothing(file: ConfigFile, text: str | None) -> bool:
    """A JSON file that holds no value: none, blank, or (JSONC) only comments (a config
    commented out). Install reads it as `{}`."""
    if not text or not text.strip():
        return True
    if file.format != "jsonc":
        return False
    try:  # an object after the comments is the whole document only when they are all it holds
        return jsonc.loads(text + "\n{}") == {}
    except jsonc.JSONCError:
        return False


def dump(file: ConfigFile, doc: Document, before: str | None = None) -> str:
    """The file's new text, `before` edited in place: JSON (with comments or without) keeps its
    comments, layout, key order and final newline; TOML its layout (tomlkit)."""
    return render(file, doc, before)[0]


def render(file: ConfigFile, doc: Document, before: str | None) -> tuple[str, bool]:
    """(the new text, whether it is `before` edited in place rather than written anew)."""
    if file.format in ("json", "jsonc"):
        if before and before.strip() and _holds_nothing(file, before):
            # Only comments: they stay, above the object (the install's backup has the file).
            return before + ("" if before.endswith("\n") else "\n") + jsonc.dump(doc), True
        edited = jsonc.edit(before or "", doc)
        return (edited, True) if edited is not None else (jsonc.dump(doc), not (before or "").strip())
    import tomlkit

    return tidy_toml(before or "", tomlkit.dumps(doc)), True


def tidy_toml(before: str, after: str) -> str:
    """tomlkit's edit with a table's separation made reversible: a table added after other
    text gets one blank line before its header, and so does a header that added lines now
    come right before (tomlkit puts a table added to a super table, as Codex's
    `[hooks.state."…"]`, before the next table); where tables go, no doubled blank line and no
    blank last line is left behind (the blank line install put before them)."""
    import difflib

    if before and not before.endswith("\n"):
        # tomlkit ends the last line before what it adds: diffed as it stood, that line was a
        # change carrying the first added header with it, and missed the blank line.
        ended = before + _newline_of(after[: len(before) + 2])
        if after.startswith(ended):
            before = ended
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    inserted = False  # the last lines written were added
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            if inserted and _is_header(new[j1]) and out[-1].strip():
                out.append(_newline_of(out[-1]))
            out += new[j1:j2]
        elif tag == "insert":
            for line in new[j1:j2]:
                if _is_header(line) and out and out[-1].strip():
                    out.append(_newline_of(out[-1]))
                out.append(line)
        elif tag == "delete" and any(_is_header(line) for line in old[i1:i2]):
            following = old[i2] if i2 < len(old) else None
            if out and not out[-1].strip() and (following is None or not following.strip()):
                out.pop()  # the blank line before the removed table
        inserted = tag == "insert"
    return "".join(out)


def _is_header(line: str) -> bool:
    """A TOML table header line (`[t]`, `[[t]]`); never a line inside a multi-line value, as
    tomlkit writes those (their items are indented or follow `key = [`)."""
    return line.startswith("[")


def _newline_of(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n"


def plan(files: list[ConfigFile], uninstall: bool = False) -> list[Change]:
    """The changes install (or uninstall) would make; files it leaves equal are not listed.
    Installing again over an installed file edits it in place (our entries stay where they
    are) when uninstall then gives back what it leaves of the file now (`_uninstalled`), and
    otherwise edits that instead, as a first install would. Files that already are what that
    writes are left as they are: install run on its own result changes nothing, even where an
    adapter's edit takes a TOML table out and adds it again (tomlkit lays a re-added table out
    with other blank lines around it)."""
    befores = [load(file)[0] for file in files]
    if uninstall:
        changes, texts = _changes(files, befores, befores, uninstall=True)
        _restore_backups(files, befores, texts, changes)
        return changes
    bases = _uninstalled(files, befores)
    changes, texts = _changes(files, befores, befores)
    if bases != befores:
        anew, anew_texts = _changes(files, befores, bases)
        if not anew or _undone(files, texts) != bases:
            changes, texts = anew, anew_texts
    _keep_backups(files, texts, changes, bases)
    return changes


def _changes(files: list[ConfigFile], befores: list[str | None], starts: list[str | None],
             uninstall: bool = False) -> tuple[list[Change], list[str | None]]:
    """(the changes, each file's text once they are made) of editing each file's text in
    `starts`, in order, from what it is now (`befores`)."""
    changes = []
    texts: list[str | None] = []
    for file, before, start in zip(files, befores, starts, strict=True):
        doc = parse(file, start)
        original = _content(file, parse(file, before), before)
        _edit(file, doc, uninstall)
        after, in_place = render(file, doc, start)
        same = (after if file.format == "toml" else _content(file, doc, after)) == original
        if same or (before is None and uninstall):
            texts.append(before)
            continue
        gone = (uninstall or file.legacy) and _emptied(file, doc, after)
        changes.append(Change(file.path, before, None if gone else after,
                              backup=uninstall and not in_place,
                              folder=file.path.parent if file.owns_folder else None))
        texts.append(changes[-1].after)
    return changes, texts


def _content(file: ConfigFile, doc: Document, text: str | None) -> str:
    """What an edit is compared by: a JSON document's content, a TOML file's text."""
    return json.dumps(doc, sort_keys=True) if file.format != "toml" else dump(file, doc, text)


def _uninstalled(files: list[ConfigFile], texts: list[str | None]) -> list[str | None]:
    """What uninstall leaves of each file (every file in order: Codex's edits depend on the
    one before); the text itself where it holds none of our entries or cannot be edited back
    in place. Installing again with other options (tool capture, `--mcp none`) over an
    installed file writes, from this, exactly what a first install would have: uninstall
    gives that back byte for byte, and the installed file needs no backup."""
    out: list[str | None] = []
    for file, text in zip(files, texts, strict=True):
        doc = parse(file, text)
        original = _content(file, doc, text)
        try:
            _edit(file, doc, uninstall=True)
        except InstallError:  # a layout we never wrote: install says so itself
            out.append(text)
            continue
        left, in_place = render(file, doc, text)
        if _content(file, doc, left) == original or not in_place:
            out.append(text)
        else:
            out.append(None if _emptied(file, doc, left) else left)
    return out


def _edit(file: ConfigFile, doc: Document, uninstall: bool) -> None:
    try:
        (file.uninstall if uninstall else file.install)(doc)
    except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a layout we never wrote
        raise InstallError(f"{file.path} is not laid out as expected ({exc}); "
                           "fix or move it — nothing was changed") from None


def _emptied(file: ConfigFile, doc: Document, after: str) -> bool:
    """Uninstall left nothing in the file, so it goes (a JSONC file that still holds comments
    is the user's: kept)."""
    if file.format == "jsonc":
        return not doc and "".join(after.split()) == "{}"
    return not (doc if file.format == "json" else after.strip())


def _undone(files: list[ConfigFile], texts: list[str | None]) -> list[str | None]:
    """What uninstall would make of each text (None: no file), every file in order (an
    adapter's edits may depend on the one before, as Codex's trust entries on its
    hooks.json)."""
    out: list[str | None] = []
    for file, text in zip(files, texts, strict=True):
        doc = parse(file, text)
        _edit(file, doc, uninstall=True)
        undone = None if text is None else dump(file, doc, text)
        out.append(None if undone is not None and _emptied(file, doc, undone) else undone)
    return out


def _keep_backups(files: list[ConfigFile], texts: list[str | None], changes: list[Change],
                  bases: list[str | None]) -> None:
    """Run uninstall on what install is about to write: a change uninstall turns back into
    what install edited (`bases`) byte for byte needs no backup. Over an installed file, a
    backup holds that base, not the file (which holds our entries), and none is kept when an
    earlier install's clean one holds the file as it was before."""
    by_path = {change.path: change for change in changes}
    for file, undone, base in zip(files, _undone(files, texts), bases, strict=True):
        change = by_path.get(file.path)
        if change is None:
            continue
        change.backup = base is not None and undone != base
        if change.backup and base != change.before:
            change.backup = _clean_backup(file)[0] is None
            change.saved = base


def _restore_backups(files: list[ConfigFile], befores: list[str | None],
                     texts: list[str | None], changes: list[Change]) -> None:
    """Uninstall after an install that had to keep a backup (its edit was not exactly
    reversible in place): take the newest backup that holds none of our entries; when
    uninstall makes the same of it, once installed, as of the file as it is now, nothing was
    changed by hand since, so its bytes go back and the backup goes. (Comparing what uninstall
    leaves, not the installed files: install may have run with other options than this
    uninstall, such as tool capture or `--mcp none`.) Install runs on every file in order
    (Codex's edits depend on the one before)."""
    by_path = {change.path: change for change in changes}
    for file, before, text in zip(files, befores, texts, strict=True):
        backup, base = _clean_backup(file)
        if backup is None:
            base = text
        doc = parse(file, base)
        try:
            _edit(file, doc, uninstall=False)
        except InstallError:
            continue
        change = by_path.get(file.path)
        if backup is None or change is None or base == change.after:
            continue
        installed = dump(file, doc, base)
        if installed != before:
            undone = parse(file, installed)
            _edit(file, undone, uninstall=True)
            left: str | None = dump(file, undone, installed)
            if _emptied(file, undone, left):
                left = None
            if left != change.after:
                continue
        change.after, change.backup, change.restores = base, False, backup


def _clean_backup(file: ConfigFile) -> tuple[Path | None, str | None]:
    """The newest readable backup of `file` holding none of our entries, and its text."""
    for backup in backups_of(file.path):
        try:
            with open(backup, encoding="utf-8", newline="") as handle:
                text = handle.read()
            if not any(file.installed(parse(file, text)).values()):
                return backup, text
        except (OSError, UnicodeDecodeError, InstallError, AttributeError, TypeError,
                KeyError, ValueError):
            continue
    return None, None


def backups_of(path: Path) -> list[Path]:
    """The `<file>.bak-<time>[-n]` files apply wrote beside `path`, newest first."""
    found = []
    for candidate in path.parent.glob(f"{path.name}.bak-*"):
        match = re.fullmatch(r"\.bak-(\d{8}-\d{6})(?:-(\d+))?",
                             candidate.name[len(path.name):])
        if match:
            found.append((match.group(1), int(match.group(2) or 1), candidate))
    return [candidate for *_, candidate in sorted(found, reverse=True)]


def apply(changes: list[Change]) -> list[Path]:
    """Write the changes (a backup first of each existing file that needs one, see Change);
    returns the backups. All or nothing: every new text is written beside its file, every
    backup made and every file to remove moved aside before any file is put in place, so a
    folder that cannot be written (a read-only home or config folder, a full disk) changes
    nothing: InstallError, in one line naming the path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    undo: list[Callable[[], None]] = []
    finish: list[Callable[[], None]] = []
    backups: list[Path] = []
    try:
        for change in changes:
            _stage(change, stamp, undo, finish, backups)
    except InstallError as exc:
        for step in reversed(undo):
            step()
        raise InstallError(f"{exc}; nothing was changed") from None
    failed: list[str] = []
    for step in finish:  # renames in folders staging wrote to: one failing is rare
        try:
            step()
        except InstallError as exc:
            failed.append(str(exc))
    if failed:
        raise InstallError("; ".join(failed))
    return backups


@contextmanager
def _writing(what: str) -> Iterator[None]:
    """An OSError inside as InstallError: `<what>: <reason>`."""
    try:
        yield
    except OSError as exc:
        raise InstallError(f"{what}: {exc.strerror or exc}") from None


def _quietly(step: Callable[[], object]) -> Callable[[], None]:
    """`step` for an undo or a clean-up: what it cannot do is left as it is."""
    def run() -> None:
        try:
            step()
        except OSError:
            pass
    return run


def _stage(change: Change, stamp: str, undo: list[Callable[[], None]],
           finish: list[Callable[[], None]], backups: list[Path]) -> None:
    """Prepare `change` without touching its file (InstallError when it cannot be): its folder,
    its backup, its new text beside it, or the file moved aside to be removed. `undo` gets
    what takes that back, `finish` what puts it in place."""
    import shutil

    path = change.path
    _make_folder(path.parent, undo)
    mode = 0o600
    if change.before is not None:
        with _writing(f"cannot read {path}"):
            mode = path.stat().st_mode & 0o777
    if change.before is not None and change.backup:
        backup = path.with_name(f"{path.name}.bak-{stamp}")
        n = 1
        while backup.exists():  # never overwrite an earlier backup (same second)
            n += 1
            backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
        with _writing(f"cannot write the backup {backup}"):
            if change.saved is None:
                undo.append(_quietly(backup.unlink))
                shutil.copy2(path, backup)
            else:
                fd = os.open(backup, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
                undo.append(_quietly(backup.unlink))
                with open(fd, "w", encoding="utf-8", newline="") as handle:
                    handle.write(change.saved)
        backups.append(backup)
    if change.after is None:
        aside = path.with_name(f".{path.name}.{os.getpid()}.removed")
        with _writing(f"cannot remove {path}"):
            os.replace(path, aside)
        undo.append(_quietly(lambda: os.replace(aside, path)))
        finish.append(_quietly(aside.unlink))
        if change.folder is not None:
            finish.append(partial(_remove_empty_folder, change.folder))
        return
    # Through a symlink (a config kept in a dotfiles folder): the link stays, and its
    # target is replaced atomically in the target's own folder.
    real = Path(os.path.realpath(path))
    tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
    with _writing(f"cannot write {path}"):
        undo.append(_quietly(tmp.unlink))
        with open(tmp, "w", encoding="utf-8", newline="") as handle:  # "\r\n" kept as is
            handle.write(change.after)
        os.chmod(tmp, mode)
    finish.append(partial(_put_in_place, tmp, real, path))
    if change.restores is not None:
        finish.append(_quietly(change.restores.unlink))


def _make_folder(folder: Path, undo: list[Callable[[], None]]) -> None:
    """Create `folder` and the folders above it that are missing; `undo` removes them."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        with _writing(f"cannot create the folder {created}"):
            created.mkdir()
        undo.append(_quietly(created.rmdir))


def _put_in_place(tmp: Path, real: Path, path: Path) -> None:
    """The staged text over the file (a rename in its own folder, which staging could
    write)."""
    try:
        os.replace(tmp, real)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InstallError(f"cannot write {path}: {exc.strerror or exc}") from None


def _remove_empty_folder(folder: Path) -> None:
    """The harness's folder a removed config file leaves empty (`~/.codex/`,
    `~/.config/opencode/`, a project's `.claude/`, as install created it); only that one
    folder, and never the home folder or the shared config folder (`~/.config`,
    XDG_CONFIG_HOME), which hold other programs'."""
    home = Path.home().resolve()
    folder = folder.resolve()
    if folder in (home, Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config").resolve()):
        return
    try:
        folder.rmdir()  # only an empty one: anything else in it keeps it
    except OSError:
        pass


def status(files: list[ConfigFile]) -> dict[str, bool]:
    """Entry name -> installed, over all files (an unreadable file holds nothing)."""
    out: dict[str, bool] = {}
    for file in files:
        try:
            _, doc = load(file)
            found = file.installed(doc)
        except (InstallError, AttributeError, TypeError, KeyError, ValueError):
            found = {}  # unreadable, or a layout install never wrote: nothing of ours
        for name, present in found.items():
            out[name] = out.get(name, False) or bool(present)
    return out


@dataclass(frozen=True)
class Named:
    """A program or module an entry of ours in a config file names, as written there."""

    program: str
    path: Path  # the config file
    #: "hooks" (a hook command runs it), "command" (an MCP server's or a plugin's command) or
    #: "module" (a plugin file the harness loads: opencode's `file://` spec).
    kind: str

    def present(self) -> bool:
        """Whether it is there: a module as a file, a program as one that can run."""
        return Path(self.program).is_file() if self.kind == "module" else runs(self.program)


def named_programs(files: list[ConfigFile]) -> list[Named]:
    """The `memory-mcp` programs and plugin modules our entries in `files` name: those in
    what uninstall takes out of each file (every file in order, as Codex's edits depend on
    the one before), so another scope's entries in a shared file (`~/.claude.json`) and the
    user's own are left out. `memory-mcp doctor` checks that each is there."""
    found: list[Named] = []
    for file in files:
        try:
            doc = load(file)[1]
            before = Counter(_names(doc))
            _edit(file, doc, uninstall=True)
        except InstallError:
            continue
        found += [Named(program, file.path, kind)
                  for program, kind in before - Counter(_names(doc))]
    return found


def _names(doc: Document) -> Iterator[tuple[str, str]]:
    """(program or module, kind) for each `memory-mcp` word and `file://` URL in `doc`."""
    from urllib.parse import unquote, urlparse

    for text in _strings(doc):
        if text.startswith("file://"):
            yield unquote(urlparse(text).path), "module"
            continue
        if "memory-mcp" not in text:  # most strings: no need to split them
            continue
        try:
            words = shlex.split(text)
        except ValueError:
            continue
        kind = "hooks" if HOOK_COMMAND.search(text) else "command"
        for word in words:
            if Path(word).name in ("memory-mcp", "memory-mcp.exe"):
                yield word, kind


def runs(program: str) -> bool:
    """Whether `program` (a path, or a name looked up on PATH) is there to run: an executable
    file whose `#!` interpreter is there too (a venv's scripts outlive the Python it linked
    to, and then fail as a missing one does)."""
    import shutil

    path = program if os.path.isabs(program) else shutil.which(program)
    if path is None or not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return False
    if not head.startswith(b"#!"):
        return True  # a binary
    words = head[2:].split(b"\n", 1)[0].split()
    return not words or os.access(words[0], os.X_OK)


def _strings(node: Any) -> Iterator[str]:
    """Every string in a parsed JSON or TOML document."""
    if isinstance(node, str):
        yield str(node)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


# --- a harness whose adapter is gone ---------------------------------------------------------
# Uninstalling an adapter's distribution leaves its hook entries in the harness's config, and
# every hook then fails (no adapter for the harness). Without the adapter the core cannot know
# its files, but it knows the commands it wrote: `memory-mcp hook HARNESS …`; and opencode's,
# which runs no hook command: a `plugin` entry naming the bundle the adapter shipped (gone
# with it) and an `mcp.memory` server, in opencode's own config files (below).

#: A hook command install wrote, and the harness it runs.
HOOK_COMMAND = re.compile(r"memory-mcp['\"]?\s+hook\s+([A-Za-z0-9][\w.-]*)")
#: A config file larger than this is no harness's settings: not read.
MAX_CONFIG_BYTES = 4_000_000


#: The variables that move a harness's user config folder out of the home folder (where
#: install then writes): the hooks of a harness whose adapter is gone are looked for there too.
CONFIG_HOME_VARS = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "KIMI_CODE_HOME")


def settings_folders(folder: Path, user: bool) -> list[Path]:
    """Where the harnesses keep their settings: the hidden folders right inside `folder` (the
    home folder or a project's) and, for the user's (`user`), the folders CONFIG_HOME_VARS
    name, each once."""
    try:
        found = sorted(p for p in folder.iterdir() if p.name.startswith(".") and p.is_dir())
    except OSError:
        found = []
    seen = {p.resolve() for p in found}
    for value in (os.environ.get(name) for name in CONFIG_HOME_VARS) if user else ():
        moved = Path(value) if value else None
        if moved is not None and moved.is_dir() and moved.resolve() not in seen:
            found.append(moved)
            seen.add(moved.resolve())
    return found


def wired_harnesses(folder: Path, user: bool) -> dict[str, list[Path]]:
    """Harness name -> the files that wire it: those whose hook commands run `memory-mcp hook`
    for it, the JSON and TOML files right inside `settings_folders` of `folder` (the home
    folder, `user`, or a project's), where the harnesses keep their settings
    (`.claude/settings.json`, a project's `.claude/settings.local.json`,
    `$CODEX_HOME/hooks.json`, `$KIMI_CODE_HOME/config.toml`); and opencode's config files that
    name our plugin (`opencode_wired`: `$XDG_CONFIG_HOME/opencode/`, a project's own)."""
    found: dict[str, list[Path]] = {}
    for sub in settings_folders(folder, user):
        try:
            files = sorted(p for p in sub.iterdir() if p.suffix in (".json", ".toml"))
        except OSError:
            continue
        for path in files:
            text = _config_text(path)
            for harness in sorted(set(HOOK_COMMAND.findall(text or ""))):
                found.setdefault(harness, []).append(path)
    opencode = opencode_wired(folder, None) if user else opencode_wired(Path.home(), folder)
    if opencode:
        found[OPENCODE] = opencode
    return found


def _config_text(path: Path) -> str | None:
    """The text of a config file that may be a harness's settings; None when it is no file,
    cannot be read, or is too large to be one."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def orphan_files(target: InstallTarget) -> list[ConfigFile]:
    """What `uninstall` edits for a harness whose adapter is not installed: each file of the
    target's folders (the project's, else the user's: the home folder's and those
    CONFIG_HOME_VARS name, and opencode's) that wires it (`wired_harnesses`), its edit taking
    out what install wrote there that the core alone cannot serve: the hook entries (an MCP
    server entry stays), or opencode's plugin entry and, beside it, its `mcp.memory` server
    (as the adapter's own uninstall does)."""
    folder = target.project_dir or target.home
    plugin = target.harness == OPENCODE
    return [ConfigFile(path, "toml" if path.suffix == ".toml" else "jsonc",
                       install=lambda doc: None,
                       uninstall=partial(remove_opencode_entries if plugin
                                         else remove_hook_entries, target=target),
                       installed=partial(_holds_opencode_entries if plugin
                                         else _holds_hook_entries, target=target),
                       # a project's own `opencode.json`: never remove the project folder
                       owns_folder=path.parent != target.project_dir)
            for path in wired_harnesses(folder, user=target.project_dir is None).get(
                target.harness, [])]


def orphan_entries(harness: str) -> str:
    """What `uninstall` takes out for `harness` without its adapter (`orphan_files`), said
    for its message."""
    if harness == OPENCODE:
        return (f"its plugin entry (…/{OPENCODE_PLUGIN}) and its `mcp.{OPENCODE_SERVER}` "
                "server entry only")
    return f"its `memory-mcp hook {harness}` entries only (its MCP server entry, if any, stays)"


def remove_hook_entries(doc: Document, target: InstallTarget) -> None:
    """Take out every hook entry running `target`'s harness, in either layout install writes:
    the JSON one Claude Code and Codex share, or a TOML list of `[[hooks]]` tables (Kimi
    Code's)."""
    hooks = doc.get("hooks")
    if isinstance(hooks, dict):
        remove_command_hooks(doc, target)
    elif isinstance(hooks, list):
        mine = [e for e in hooks if isinstance(e, dict)
                and target.is_our_command(e.get("command"))]
        for entry in mine:
            hooks.remove(entry)
        if mine and not len(hooks):  # a `hooks = []` of the user's own stays
            del doc["hooks"]


def _holds_hook_entries(doc: Document, target: InstallTarget) -> dict[str, bool]:
    return {"hook": any(target.is_our_command(text) for text in _strings(doc))}


# --- opencode: a plugin in its config, no hook command ----------------------------------------
# The memory loop runs inside opencode, as a plugin. Its adapter (semantic_memory_opencode)
# writes a `plugin` entry naming the bundle it ships (`file://…/semantic-memory.js`) and an
# `mcp.memory` server into opencode's config. Those facts live here, and the adapter uses
# them, so that `uninstall` and `doctor` still know them once the adapter is gone.

OPENCODE = "opencode"
#: The bundled plugin's file name (`npm run build` in opencode-plugin/ writes it).
OPENCODE_PLUGIN = "semantic-memory.js"
#: The MCP server entry install writes in opencode's `mcp` object.
OPENCODE_SERVER = "memory"


def opencode_config_dir(home: Path) -> Path:
    """opencode's user config folder (xdg-basedir's rule: a relative XDG_CONFIG_HOME is
    ignored)."""
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base and os.path.isabs(base) else home / ".config") / "opencode"


def opencode_config_paths(home: Path, project_dir: Path | None) -> list[Path]:
    """The files opencode reads its config from, the user's (`project_dir` None) or a
    project's, in the order opencode (and install) picks the one that exists."""
    if project_dir is not None:
        return [project_dir / "opencode.json", project_dir / "opencode.jsonc",
                project_dir / ".opencode" / "opencode.json",
                project_dir / ".opencode" / "opencode.jsonc"]
    folder = opencode_config_dir(home)
    return [folder / "opencode.jsonc", folder / "opencode.json", folder / "config.json"]


def plugin_spec(entry: Any) -> str | None:
    """The spec of an opencode `plugin` list entry (`spec` or `[spec, options]`)."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, list) and entry and isinstance(entry[0], str):
        return entry[0]
    return None


def is_our_plugin(entry: Any) -> bool:
    """An opencode `plugin` entry this project wrote: a file:// spec of its bundle, wherever
    it lives (a wheel's package folder, a checkout's opencode-plugin/)."""
    spec = plugin_spec(entry)
    return bool(spec) and spec.startswith("file://") and spec.endswith(f"/{OPENCODE_PLUGIN}")


def spec_file(entry: Any) -> Path:
    """The file an opencode `plugin` entry's file:// spec names."""
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(plugin_spec(entry) or "").path))


def opencode_wired(home: Path, project_dir: Path | None) -> list[Path]:
    """opencode's config files (the user's, or `project_dir`'s) whose `plugin` list names our
    bundle; a file that cannot be read or parsed names none."""
    found = []
    for path in opencode_config_paths(home, project_dir):
        text = _config_text(path)
        try:
            doc = jsonc.loads(text) if text and text.strip() else None
        except jsonc.JSONCError:
            continue
        plugins = doc.get("plugin") if isinstance(doc, dict) else None
        if isinstance(plugins, list) and any(is_our_plugin(e) for e in plugins):
            found.append(path)
    return found


def remove_opencode_entries(doc: Document, target: InstallTarget) -> None:
    """Take out our `plugin` entries and our `mcp.memory` server, and the list and object
    that leaves empty; everything else (the user's plugins, a `memory` server that is not this
    service) stays."""
    plugins = doc.get("plugin")
    if isinstance(plugins, list) and any(is_our_plugin(e) for e in plugins):
        plugins[:] = [e for e in plugins if not is_our_plugin(e)]
        if not plugins:
            del doc["plugin"]
    servers = doc.get("mcp")
    if isinstance(servers, dict) and target.is_our_server(servers.get(OPENCODE_SERVER)):
        del servers[OPENCODE_SERVER]
        if not servers:
            del doc["mcp"]


def _holds_opencode_entries(doc: Document, target: InstallTarget) -> dict[str, bool]:
    """Which of our opencode entries `doc` holds, whether the plugin file is there or not."""
    plugins = doc.get("plugin") if isinstance(doc.get("plugin"), list) else []
    servers = doc.get("mcp") if isinstance(doc.get("mcp"), dict) else {}
    return {"plugin": any(is_our_plugin(e) for e in plugins),
            "MCP server": target.is_our_server(servers.get(OPENCODE_SERVER))}


def claim_server(servers: Any, name: str, target: InstallTarget, path: Path) -> None:
    """Refuse to replace an MCP server entry called `name` that is not this service's."""
    existing = servers.get(name) if hasattr(servers, "get") else None
    if existing is not None and not target.is_our_server(existing):
        raise InstallError(f"{path} already has an MCP server named {name!r} that is not this "
                           "service; rename it, or install with --mcp none — nothing was changed")


# --- helpers for the JSON hook layout Claude Code and Codex share -----------------------------
# {"hooks": {"<Event>": [{"matcher": "*", "hooks": [{"type": "command", "command": …}]}]}}


def set_command_hook(config: dict[str, Any], target: InstallTarget, event: str,
                     handler: dict[str, Any], matcher: str | None = None) -> None:
    """Put our handler for `event` in place: replace ours where it is, else append a group."""
    groups = config.setdefault("hooks", {}).setdefault(event, [])
    for group in groups:
        for i, existing in enumerate(group.get("hooks", [])):
            if isinstance(existing, dict) and target.is_our_command(existing.get("command")):
                group["hooks"][i] = handler
                if matcher is not None and len(group["hooks"]) == 1:
                    group["matcher"] = matcher
                return
    group = {"matcher": matcher} if matcher is not None else {}
    group["hooks"] = [handler]
    groups.append(group)


def remove_command_hooks(config: dict[str, Any], target: InstallTarget,
                         events: list[str] | None = None) -> None:
    """Drop our handlers, and the groups, event lists and "hooks" object that removing them
    left empty; a container that was empty before is the user's and stays."""
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return
    removed = False
    for event in list(hooks):
        if events is not None and event not in events:
            continue
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        emptied: list[dict[str, Any]] = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                kept = [h for h in group["hooks"] if not (
                    isinstance(h, dict) and target.is_our_command(h.get("command")))]
                if len(kept) < len(group["hooks"]):
                    group["hooks"], removed = kept, True
                    if not kept:
                        emptied.append(group)
        if emptied:
            hooks[event] = [g for g in groups if not any(g is e for e in emptied)]
            if not hooks[event]:
                del hooks[event]
    if removed and not hooks:
        del config["hooks"]


def has_command_hook(config: dict[str, Any], target: InstallTarget, event: str) -> bool:
    groups = (config.get("hooks") or {}).get(event) or []
    return any(isinstance(h, dict) and target.is_our_command(h.get("command"))
               for g in groups if isinstance(g, dict) for h in g.get("hooks") or [])
