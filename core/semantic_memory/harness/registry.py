"""Finding harness adapters: plugins implementing `register_harnesses`.

A hook process needs one adapter and has little time, so `find_adapter` first loads only the
entry points named like the harness (`claude_code` for `claude-code`); only when none of them
registers it are all installed plugins loaded.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..config import Settings
from ..plugins import ENTRY_POINT_GROUP

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint


def _key(name: str) -> str:
    return name.lower().replace("_", "-")


def _collect(plugins: list[Any]) -> dict[str, Any]:
    import pluggy

    from .. import hookspecs

    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    for plugin in plugins:
        pm.register(plugin)
    found: list[Any] = []
    pm.hook.register_harnesses(register=found.append)
    return {adapter.name: adapter for adapter in found}


def _entry_points(settings: Settings) -> list[EntryPoint]:
    from importlib.metadata import entry_points

    allow = settings.plugin_allowlist()
    return [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if allow is None or ep.name in allow]


def all_adapters(settings: Settings, extra: tuple[Any, ...] = ()) -> dict[str, Any]:
    """Every installed adapter by harness name (plus those of `extra` plugins)."""
    plugins = []
    for ep in _entry_points(settings):
        try:
            plugins.append(ep.load())
        except Exception:  # noqa: BLE001 - a broken plugin must not hide the others
            continue
    return _collect([*plugins, *extra])


def find_adapter(name: str, settings: Settings) -> Any | None:
    """The adapter for harness `name`, loading as few plugins as possible; None if none."""
    allow = settings.plugin_allowlist()
    for ep_name, target in _named_entry_points(name):
        if allow is not None and ep_name not in allow:
            continue
        module_name, _, attr = target.partition(":")
        plugin: Any = import_module(module_name)
        for part in filter(None, attr.split(".")):
            plugin = getattr(plugin, part)
        adapter = _collect([plugin]).get(name)
        if adapter is not None:
            return adapter
    return all_adapters(settings).get(name)


def _named_entry_points(name: str) -> list[tuple[str, str]]:
    """(entry point name, "module[:attr]") of the `semantic_memory` entry points named like
    the harness, read straight from the installed distributions' entry_points.txt: the
    importlib.metadata machinery costs a hook process more than everything else it imports
    (~50 ms), and `all_adapters` stays the fallback."""
    found = []
    for folder in filter(None, sys.path):  # not "": the harness's working folder
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                if not entry.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(entry.path, "entry_points.txt"), encoding="utf-8") as f:
                        text = f.read()
                except OSError:
                    continue
                section = None
                for line in text.splitlines():
                    line = line.strip()
                    if line.startswith("["):
                        section = line.strip("[]").strip()
                    elif section == ENTRY_POINT_GROUP and "=" in line:
                        ep_name, _, target = (part.strip() for part in line.partition("="))
                        if _key(ep_name) == _key(name):
                            found.append((ep_name, target))
    return found
