"""Harness adapters: the machinery behind `memory-mcp hook`, `install`, `uninstall` and
`doctor`. An adapter plugin subclasses `HarnessAdapter` and registers an instance through the
`register_harnesses` hook, marked with this package's `hookimpl`; docs/harness-adapters.md
walks through writing one.

Kept free of the pipeline, the store, click, pluggy and the service: a hook process imports
only this (and the install machinery only when the CLI asks for it: `ConfigFile`,
`InstallTarget`).
"""

from __future__ import annotations

from .adapter import HarnessAdapter, HookCall, ToolCall
from .registry import IMPL_ATTRIBUTE
from .transcript import Turn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["ConfigFile", "HarnessAdapter", "HookCall", "InstallTarget", "ToolCall", "Turn",
           "hookimpl"]


def hookimpl(function: F) -> F:
    """`semantic_memory.hookspecs.hookimpl` (pluggy's `HookimplMarker("semantic_memory")`,
    no options) without importing pluggy: a hook process imports the adapter's module, and
    pluggy with `inspect` would cost it more than everything else it does. The plugin manager
    sees no difference (tests/test_hook_cpu.py compares the two markers)."""
    setattr(function, IMPL_ATTRIBUTE, {"wrapper": False, "hookwrapper": False,
                                       "optionalhook": False, "tryfirst": False,
                                       "trylast": False, "specname": None})
    return function


def __getattr__(name: str) -> Any:
    if name in ("ConfigFile", "InstallTarget"):
        from . import install

        return getattr(install, name)
    raise AttributeError(name)
