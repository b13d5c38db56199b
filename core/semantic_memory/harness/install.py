"""`memory-mcp install/uninstall <harness>`: merge hook and MCP entries into a harness's own
config files, keeping everything else the user has there.

An adapter describes each file it touches as a `ConfigFile` with two in-place edits of the
parsed document (install, uninstall). This module turns them into changes: a unified diff for
`--dry-run`, otherwise a backup of every file it changes and an atomic write. A file whose
parsed content an edit leaves equal is not rewritten, so running install twice changes nothing.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings
from . import jsonc
from .client import DEFAULT_URL

Document = Any  # a JSON object (dict) or a tomlkit document


class InstallError(Exception):
    """A config file cannot be edited safely (unreadable, malformed); nothing was written."""


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
    tool_capture: bool  # MEMORY_PLUGIN_TOOL_CAPTURE names tools: install the tool hook

    def hook_command(self, event: str) -> str:
        return f"{shlex.quote(self.executable)} hook {self.harness} {event}"

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
        mcp_url=(settings.plugin_url or DEFAULT_URL).rstrip("/") + "/mcp",
        token=bool(settings.token or settings.plugin_token),
        hook_timeout_s=max(2, math.ceil(settings.hook_budget_s * 2)),
        tool_capture=bool(settings.tool_capture()),
    )


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


@dataclass
class Change:
    path: Path
    before: str | None
    after: str | None  # None: uninstall left the file empty, so it goes

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
        text = file.path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = None
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"cannot read {file.path}: {exc}") from None
    try:
        if file.format in ("json", "jsonc"):
            if not text or not text.strip():
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
    return text, doc


def dump(file: ConfigFile, doc: Document, before: str | None = None) -> str:
    """The file's new text; a JSONC file is edited in place (its comments and layout kept)."""
    if file.format == "jsonc":
        return jsonc.update(before or "", doc)
    if file.format == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    import tomlkit

    return tomlkit.dumps(doc)


def plan(files: list[ConfigFile], uninstall: bool = False) -> list[Change]:
    """The changes install (or uninstall) would make; files it leaves equal are not listed."""
    changes = []
    for file in files:
        before, doc = load(file)
        is_json = file.format in ("json", "jsonc")
        original = json.dumps(doc, sort_keys=True) if is_json else dump(file, doc)
        try:
            (file.uninstall if uninstall else file.install)(doc)
        except (AttributeError, TypeError, KeyError, ValueError) as exc:  # a layout we never wrote
            raise InstallError(f"{file.path} is not laid out as expected ({exc}); "
                               "fix or move it — nothing was changed") from None
        after = dump(file, doc, before)
        same = (json.dumps(doc, sort_keys=True) if is_json else after) == original
        if same or (before is None and uninstall):
            continue
        if file.format == "jsonc":  # a file that still holds comments is the user's: kept
            empty = not doc and "".join(after.split()) == "{}"
        else:
            empty = not (doc if is_json else after.strip())
        changes.append(Change(file.path, before, None if uninstall and empty else after))
    return changes


def apply(changes: list[Change]) -> list[Path]:
    """Write the changes (a backup of each existing file first); returns the backups."""
    import shutil

    backups = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for change in changes:
        path = change.path
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o600
        if change.before is not None:
            backup = path.with_name(f"{path.name}.bak-{stamp}")
            n = 1
            while backup.exists():  # never overwrite an earlier backup (same second)
                n += 1
                backup = path.with_name(f"{path.name}.bak-{stamp}-{n}")
            shutil.copy2(path, backup)
            backups.append(backup)
            mode = path.stat().st_mode & 0o777
        if change.after is None:
            path.unlink()
            continue
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(change.after, encoding="utf-8")
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    return backups


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
    """Drop our handlers (and groups they leave empty, and an emptied "hooks")."""
    hooks = config.get("hooks")
    if not isinstance(hooks, dict):
        return
    for event in list(hooks):
        if events is not None and event not in events:
            continue
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                group["hooks"] = [h for h in group["hooks"] if not (
                    isinstance(h, dict) and target.is_our_command(h.get("command")))]
        hooks[event] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not hooks[event]:
            del hooks[event]
    if not hooks:
        del config["hooks"]


def has_command_hook(config: dict[str, Any], target: InstallTarget, event: str) -> bool:
    groups = (config.get("hooks") or {}).get(event) or []
    return any(isinstance(h, dict) and target.is_our_command(h.get("command"))
               for g in groups if isinstance(g, dict) for h in g.get("hooks") or [])
