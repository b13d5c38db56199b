"""Finding harness adapters: plugins implementing `register_harnesses`.

A hook process needs one adapter and has little time, so `find_adapter` first loads only the
entry points named like the harness (`claude_code` for `claude-code`); only when none of them
registers it are all installed plugins loaded.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from typing import Any

from ..config import Settings
from ..plugins import ENTRY_POINT_GROUP, PluginManager, build_plugin_manager


def _key(name: str) -> str:
    return name.lower().replace("_", "-")


def _collect(plugins: list[Any]) -> dict[str, Any]:
    """The adapters these plugin modules register, by harness name."""
    pm = PluginManager()
    for plugin in plugins:
        pm.register(plugin)
    return _registered(pm)


def _registered(pm: PluginManager) -> dict[str, Any]:
    found: list[Any] = []
    pm.hook.register_harnesses(register=found.append)
    return {adapter.name: adapter for adapter in found}


def all_adapters(settings: Settings) -> dict[str, Any]:
    """Every installed adapter by harness name (the plugin manager every command uses)."""
    return _registered(build_plugin_manager(settings))


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
