"""Harness adapters: the machinery behind `memory-mcp hook`, `install`, `uninstall` and
`doctor`. An adapter plugin subclasses `HarnessAdapter` and registers an instance through the
`register_harnesses` hook; docs/harness-adapters.md walks through writing one.

Kept free of the pipeline, the store, click and the service: a hook process imports only this
(and the install machinery only when the CLI asks for it: `ConfigFile`, `InstallTarget`).
"""

from typing import Any

from .adapter import HarnessAdapter, HookCall, ToolCall
from .transcript import Turn

__all__ = ["ConfigFile", "HarnessAdapter", "HookCall", "InstallTarget", "ToolCall", "Turn"]


def __getattr__(name: str) -> Any:
    if name in ("ConfigFile", "InstallTarget"):
        from . import install

        return getattr(install, name)
    raise AttributeError(name)
