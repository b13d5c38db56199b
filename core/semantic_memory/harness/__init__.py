"""Harness adapters: the machinery behind `memory-mcp hook`, `install`, `uninstall` and
`doctor`. An adapter plugin subclasses `HarnessAdapter` and registers an instance through the
`register_harnesses` hook; docs/harness-adapters.md walks through writing one.

Kept free of the pipeline, the store, click and the service: a hook process imports only this.
"""

from .adapter import HarnessAdapter, HookCall, ToolCall
from .install import ConfigFile, InstallTarget
from .transcript import Turn

__all__ = ["ConfigFile", "HarnessAdapter", "HookCall", "InstallTarget", "ToolCall", "Turn"]
