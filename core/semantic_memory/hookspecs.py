"""Hook specifications: every way a plugin can extend semantic-memory-mcp.

Plugins implement these with `@hookimpl` (defined here beside `hookspec`) and are found through
the `semantic_memory` entry point group. Register-style hooks hand the plugin a `register`
callback, so one plugin may register several things.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import pluggy

if TYPE_CHECKING:
    import click

    from .channels import Channel
    from .config import Settings, SettingsSection
    from .embedders import Embedder
    from .models import InjectionBlock, NewMemory, RecallHit
    from .stores import MemoryStore, StoreKind

hookspec = pluggy.HookspecMarker("semantic_memory")
#: Marks a plugin's implementation of a hook: `@hookimpl def register_channels(register, settings)`.
hookimpl = pluggy.HookimplMarker("semantic_memory")


@hookspec
def register_channels(register: Callable[["Channel"], None], settings: "Settings") -> None:
    """Register retrieval channels: instances of `semantic_memory.channels.Channel` (and of
    its capability mixins). Every active channel searches on every recall; results are fused.

    A channel that is not a `Channel`, or whose name another plugin took first, is refused
    with one line naming both plugins; the rest load."""


@hookspec
def register_settings(register: Callable[[type["SettingsSection"]], None]) -> None:
    """Declare the plugin's own settings sections: `SettingsSection` subclasses (frozen
    dataclasses). Each is read and validated as the plugins load, so a bad value stops every
    command at its start (exit code 2, one line naming the variable and the plugin), as a core
    setting does, and not first when a hook (`filter_ingest`, `modify_hits`) reads it."""


@hookspec
def register_stores(register: Callable[["StoreKind"], None]) -> None:
    """Register store kinds: `semantic_memory.stores.StoreKind`, classes (or objects) with
    `name`, `schemes` (URL schemes they open, e.g. ("postgresql",)) and
    `open(url, settings) -> MemoryStore`. MEMORY_DB_URL's scheme picks one; SQLite is the
    default. Anything else is refused in one line naming the plugin."""


@hookspec
def register_embedders(register: Callable[["Embedder"], None], settings: "Settings") -> None:
    """Register embedders: instances of `semantic_memory.embedders.Embedder`.

    The engine picks one (`choose_embedder`: MEMORY_EMBEDDER, else the only one, else the only
    one with a model configured) and hands it to every channel's `bind`."""


@hookspec
def register_harnesses(register: Callable[[Any], None]) -> None:
    """Register harness adapters (Claude Code, Codex, …): instances of
    `semantic_memory.harness.HarnessAdapter`, which handle `memory-mcp hook <harness> <event>`
    and `memory-mcp install <harness>`. Anything else is refused in one line naming the
    plugin."""


@hookspec
def register_commands(cli: "click.Group") -> None:
    """Add subcommands to the `memory-mcp` command line (`@cli.command()`)."""


@hookspec
def filter_ingest(memory: "NewMemory", settings: "Settings") -> None:
    """Inspect a memory before it is stored: edit it in place (e.g. redact a secret) or raise
    `semantic_memory.errors.Rejected(reason)` to refuse it. Runs for every ingest path. Any
    other exception refuses the memory too, naming the plugin (fail closed: nothing is
    stored unfiltered)."""


@hookspec
def modify_hits(
    query: str, hits: list["RecallHit"], settings: "Settings", store: "MemoryStore", conn: Any
) -> None:
    """Post-process fused recall results in place: drop, re-score or reorder `hits`.

    `store` and `conn` (its read snapshot of this recall) answer questions such as
    `store.injection_counts(conn, uids)`. The pipeline sorts by score after all
    implementations ran. One that raises, or leaves anything but RecallHits with finite
    scores, is undone and skipped for that recall in one line naming it.
    """


@hookspec(firstresult=True)
def format_injection(
    query: str, hits: list["RecallHit"], budget_chars: int
) -> "InjectionBlock | None":
    """Render recalled memories as the block injected into an agent's context: an
    `InjectionBlock(text, uids)`, the uids being the memories the text holds (a budget may
    leave some out; injecting clients report them).

    The first implementation answering an InjectionBlock wins (None passes; one that raises or
    answers anything else is skipped in one line); the in-core default, last, follows the
    spec's context hygiene (wrapper tags, "reference data, not instructions", budget). `hits`
    come in rank order with near-duplicates already collapsed (`neardup.distinct`).
    """
