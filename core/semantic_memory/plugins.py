"""The plugin manager: in-core default plugins plus installed ones from entry points."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

import pluggy

from . import hookspecs
from .config import Settings

ENTRY_POINT_GROUP = "semantic_memory"

#: Plugins that ship inside core. They always load (MEMORY_PLUGINS restricts installed ones).
DEFAULT_PLUGINS = (
    "semantic_memory.stores.sqlite",
    "semantic_memory.default_plugins.hygiene",
    "semantic_memory.default_plugins.boost",
    "semantic_memory.default_plugins.injection",
)


@dataclass
class PluginInfo:
    """What `memory-mcp plugins` shows about one loaded plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    hooks: list[str] = field(default_factory=list)


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, remembering which distribution each installed plugin came from."""

    def __init__(self) -> None:
        super().__init__(ENTRY_POINT_GROUP)
        self.add_hookspecs(hookspecs)
        self.distributions: dict[str, tuple[str, str]] = {}

    def describe(self) -> list[PluginInfo]:
        infos = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:  # blocked
                continue
            dist = self.distributions.get(name)
            hooks = sorted(h.name for h in self.get_hookcallers(plugin) or [])
            infos.append(PluginInfo(name, dist and dist[0], dist and dist[1], hooks))
        return infos


def build_plugin_manager(settings: Settings, extra: list[Any] | tuple[Any, ...] = ()) -> PluginManager:
    """Load default plugins, installed entry-point plugins (filtered by MEMORY_PLUGINS) and
    `extra` ones (tests register in-test plugins this way)."""
    from importlib.metadata import entry_points  # not at import: hooks import this module

    pm = PluginManager()
    for module_name in DEFAULT_PLUGINS:
        pm.register(import_module(module_name), name=module_name.rsplit(".", 1)[-1])
    allow = settings.plugin_allowlist()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if allow is not None and ep.name not in allow:
            continue
        if pm.has_plugin(ep.name):
            continue
        pm.register(ep.load(), name=ep.name)
        if ep.dist is not None:
            pm.distributions[ep.name] = (ep.dist.name, ep.dist.version)
    for plugin in extra:
        pm.register(plugin)
    if settings.trace_hooks:
        pm.trace.root.setwriter(lambda message: sys.stderr.write(message))
        pm.enable_tracing()
    return pm
