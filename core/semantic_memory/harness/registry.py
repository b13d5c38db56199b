"""Finding harness adapters: plugins implementing `register_harnesses`.

A hook process needs one adapter and has little time: `find_adapter` reads the installed
distributions' `entry_points.txt` itself (importlib.metadata costs more than the rest of the
hook; what it found is kept in `hooks.adapters.json` beside the db until an import folder
changes), imports only the `semantic_memory` entry points named like the harness
(`claude_code` for `claude-code`) and calls their `register_harnesses` directly: adapters
mark it with `semantic_memory.harness.hookimpl`, which is pluggy's marker without importing
pluggy. Only when none of them registers the harness, and none failed trying (an import
error, a raising `register_harnesses`, an object that is no adapter: one line naming it), are
all plugins loaded through the plugin manager.

One harness name, one adapter: when a second distribution registers a name already taken,
it is refused with one line naming both, and the first one registered keeps the name
(`all_adapters` writes the line to stderr, the hook run to its log line, `conflicts` returns
them for `plugins` and `doctor`). Every such line reads as the plugin manager's problems do:
`plugin NAME (DISTRIBUTION VERSION): …` (`origin`).
"""

from __future__ import annotations

import os
import sys

from ..errors import one_line
from ..lite import dumps, plugin_origin, replace_private, try_loads
from ..stdout_guard import stdout_to_stderr
from .adapter import HarnessAdapter
from .settings import beside_db

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ..config import Settings
    from .settings import HookSettings

#: The entry point group of every plugin (`plugins.ENTRY_POINT_GROUP`, not imported: pluggy).
ENTRY_POINT_GROUP = "semantic_memory"
#: The attribute pluggy's `HookimplMarker("semantic_memory")` sets on a hook implementation.
IMPL_ATTRIBUTE = ENTRY_POINT_GROUP + "_impl"


def _key(name: str) -> str:
    return name.lower().replace("_", "-")


def refusal(name: str, kept: str, refused: str) -> str:
    """The one line that reports a refused duplicate adapter (`kept` and `refused`: origins)."""
    return f"plugin {refused}: harness adapter {name!r} refused: the name is taken by {kept}"


def _keep_first(found: list[tuple[Any, str]], conflicts: list[str]) -> dict[str, Any]:
    """adapter name -> adapter of (adapter, distribution) pairs in registration order; a later
    one with a name already taken is refused (a line in `conflicts`)."""
    adapters: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for adapter, source in found:
        name = adapter.name
        if name in adapters:
            if adapters[name] is not adapter:
                conflicts.append(refusal(name, origin[name], source))
            continue
        adapters[name], origin[name] = adapter, source
    return adapters


def all_adapters(settings: Settings | HookSettings,
                 conflicts: list[str] | None = None) -> dict[str, Any]:
    """Every installed adapter by harness name (the plugin manager every command uses). A
    refused duplicate goes to `conflicts`, or as one line to stderr when none is given."""
    from ..plugins import build_plugin_manager

    pm = build_plugin_manager(settings.full() if hasattr(settings, "full") else settings)
    distributions = pm.distributions
    found: list[tuple[Any, str]] = []
    lines: list[str] = []
    # registration order, whatever trylast says: no plugin takes a name from an earlier one
    for plugin, function, _ in pm.implementations("register_harnesses"):
        dist = distributions.get(plugin)
        source = plugin_origin(plugin, " ".join(dist or ()))
        registered: list[Any] = []
        try:
            with stdout_to_stderr():  # as at import: stdout is the answer
                function(register=registered.append)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - left out, not fatal
            lines.append(f"plugin {source}: register_harnesses failed: {one_line(exc)}")
            continue
        _sort_registered(registered, source, found, lines)
    adapters = _keep_first(found, lines)
    if conflicts is not None:
        conflicts.extend(lines)
    else:
        for line in lines:
            sys.stderr.write(f"memory-mcp: {line}\n")
    return adapters


def conflicts(settings: Settings | HookSettings) -> list[str]:
    """The refused duplicate adapters, one line each (for `plugins` and `doctor`)."""
    lines: list[str] = []
    all_adapters(settings, lines)
    return lines


def find_adapter(name: str, settings: Settings | HookSettings,
                 conflicts: list[str] | None = None) -> Any | None:
    """The adapter for harness `name`, loading as few plugins as possible; None if none.
    A refused duplicate, or a plugin that failed to load, goes to `conflicts`."""
    lines = [] if conflicts is None else conflicts
    allow = settings.plugin_allowlist()
    cache = beside_db(settings, "hooks.adapters.json")
    known = len(lines)
    found = _registered(_cached_entry_points(name, cache), allow, lines)
    if found is None:  # a stale cache naming a module gone: look again
        found = _registered(_cached_entry_points(name, cache, fresh=True), allow, lines) or []
    adapter = _keep_first(found, lines).get(name)
    if adapter is not None or len(lines) > known:
        # The plugin named like the harness is its adapter, and it was refused: loading every
        # plugin would only meet it again, and cost the hook more than its whole budget.
        return adapter
    return all_adapters(settings, lines).get(name)


def refused_adapter(name: str, settings: Settings | HookSettings) -> str | None:
    """Why the installed plugin named like harness `name` gives no adapter for it, in one
    line naming its distribution (for `doctor`); None when no such plugin is installed."""
    allow = settings.plugin_allowlist()
    entry_points = [ep for ep in _named_entry_points(name) if allow is None or ep[0] in allow]
    if not entry_points:
        return None
    lines: list[str] = []
    adapters = _keep_first(_registered(entry_points, None, lines) or [], lines)
    if name in adapters:
        return None
    if lines:
        return "; ".join(lines)
    sources = ", ".join(f"plugin {plugin_origin(ep_name, dist)}"
                        for ep_name, _, dist in entry_points)
    return f"{sources}: registers no adapter named {name!r}"


def _registered(entry_points: list[tuple[str, str, str]], allow: set[str] | None,
                lines: list[str]) -> list[tuple[Any, str]] | None:
    """(adapter, source) of what each entry point's `register_harnesses` registers; None when
    one names a module that is gone (the cache is stale). A plugin is imported and registers
    with stdout sent to stderr: the harness reads the hook's stdout as its answer (a block, or
    the model's context). One that fails there, raising or calling sys.exit() (its exit
    status would block the prompt in some harnesses), is left out with one line in `lines`."""
    found: list[tuple[Any, str]] = []
    for ep_name, target, dist in entry_points:
        if allow is not None and ep_name not in allow:
            continue
        source = plugin_origin(ep_name, dist)
        module_name, _, attr = target.partition(":")
        registered: list[Any] = []
        try:
            with stdout_to_stderr():
                # importlib's import_module: its package costs `warnings` too
                __import__(module_name)
                plugin: Any = sys.modules[module_name]
                for part in filter(None, attr.split(".")):
                    plugin = getattr(plugin, part)
                register = getattr(plugin, "register_harnesses", None)
                if register is None or not isinstance(getattr(register, IMPL_ATTRIBUTE, None),
                                                      dict):
                    continue  # not marked as a hook implementation: the plugin manager decides
                register(register=registered.append)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                return None
            lines.append(f"plugin {source}: not loaded: {one_line(exc)}")
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - sys.exit() too: left out, not the hook's status
            lines.append(f"plugin {source}: not loaded: {one_line(exc)}")
        _sort_registered(registered, source, found, lines)
    return found


def _path_key() -> str:
    """What the installed distributions depend on: each import folder's modification time
    (installing or removing a distribution adds or removes a folder in it)."""
    parts = []
    for folder in filter(None, sys.path):
        try:
            parts.append(f"{folder}={os.stat(folder).st_mtime_ns}")
        except OSError:
            parts.append(f"{folder}=-")
    return "\n".join(parts)


def _cached_entry_points(name: str, cache: str, fresh: bool = False
                         ) -> list[tuple[str, str, str]]:
    """`_named_entry_points(name)`, remembered in `cache` (beside the db) while no import
    folder changes: scanning every distribution's entry_points.txt costs a hook ~1.5 ms."""
    key = _path_key()
    try:
        with open(cache, "rb") as handle:
            data = try_loads(handle.read())
    except OSError:
        data = None
    known = data.get("found") if isinstance(data, dict) and data.get("key") == key else None
    if not isinstance(known, dict):
        known = {}
    hit = known.get(name)
    if not fresh and isinstance(hit, list) and all(
            isinstance(item, list) and len(item) == 3 and all(isinstance(x, str) for x in item)
            for item in hit):
        return [(item[0], item[1], item[2]) for item in hit]
    found = _named_entry_points(name)
    known[name] = [list(item) for item in found]
    try:
        replace_private(cache, dumps({"key": key, "found": known}).encode("utf-8"))
    except OSError:
        pass
    return found


def _named_entry_points(name: str) -> list[tuple[str, str, str]]:
    """(entry point name, "module[:attr]", "distribution version") of the `semantic_memory`
    entry points named like the harness, read straight from the installed distributions'
    entry_points.txt, in sys.path order (a distribution found twice counts once). The version
    is the folder name's (`name-1.0.dist-info`), as problem lines name it."""
    found = []
    seen: set[str] = set()
    for folder in filter(None, sys.path):  # not "": the harness's working folder
        try:
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries
                               if e.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
        for info in names:
            name_version = info.rsplit(".", 1)[0].split("-")
            dist = name_version[0].replace("_", "-").lower()
            if dist in seen:
                continue
            try:
                with open(os.path.join(folder, info, "entry_points.txt"),
                          encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            seen.add(dist)
            section = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]").strip()
                elif section == ENTRY_POINT_GROUP and "=" in line:
                    ep_name, _, target = (part.strip() for part in line.partition("="))
                    if _key(ep_name) == _key(name):
                        found.append((ep_name, target, " ".join(
                            [dist, *name_version[1:2]])))
    return found


def _sort_registered(registered: list[Any], source: str, found: list[tuple[Any, str]],
                     lines: list[str]) -> None:
    """What a plugin's `register_harnesses` registered: adapters into `found`, anything else
    refused in one line naming the plugin."""
    for adapter in registered:
        if isinstance(adapter, HarnessAdapter):
            found.append((adapter, source))
        else:
            lines.append(f"plugin {source}: {type(adapter).__name__} is not a "
                         "semantic_memory.harness.HarnessAdapter; refused")
