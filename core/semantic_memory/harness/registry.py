"""Finding harness adapters: plugins implementing `register_harnesses`.

A hook process needs one adapter and has little time, so `find_adapter` first loads only the
entry points named like the harness (`claude_code` for `claude-code`); only when none of them
registers it are all installed plugins loaded.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ..config import Settings

ENTRY_POINT_GROUP = "semantic_memory"


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
    eps = _entry_points(settings)
    named = [ep for ep in eps if _key(ep.name) == _key(name)]
    if named:
        adapter = _collect([ep.load() for ep in named]).get(name)
        if adapter is not None:
            return adapter
    return all_adapters(settings).get(name)
