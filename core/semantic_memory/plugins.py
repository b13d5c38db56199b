"""The plugin manager: in-core default plugins plus installed ones from entry points.

Loading refuses and explains instead of failing: a plugin that cannot be imported, whose hook
signature does not match, or that implements a hook that does not exist (a misspelt name) is
left out with one line naming it; the rest keeps working. `memory-mcp plugins` and `doctor`
list such problems (`PluginManager.problems`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, is_dataclass
from importlib import import_module
from types import ModuleType
from typing import Any

import pluggy

from . import hookspecs
from .config import ConfigError, Settings, SettingsSection
from .errors import one_line
from .lite import plugin_origin
from .stdout_guard import stdout_to_stderr
from .stores import StoreKind, check_store_kind

log = logging.getLogger("semantic_memory")

#: Problems already logged by this process: every command builds plugin managers of its own
#: (the CLI, the engine, `doctor`), and each problem is one line, printed once.
_logged: set[str] = set()

ENTRY_POINT_GROUP = "semantic_memory"

#: Plugins that ship inside core. They always load (MEMORY_PLUGINS restricts installed ones).
DEFAULT_PLUGINS = (
    "semantic_memory.stores.sqlite",
    "semantic_memory.default_plugins.hygiene",
    "semantic_memory.default_plugins.boost",
    "semantic_memory.default_plugins.injection",
)
#: Their names: the project's own code, which no deadline holds (`held`): a slow hygiene
#: filter on a big capture or the core's formatter past a hook's wait is not a hung plugin.
CORE_PLUGINS = frozenset(module.rsplit(".", 1)[-1] for module in DEFAULT_PLUGINS)


@dataclass
class PluginInfo:
    """What `memory-mcp plugins` shows about one loaded plugin."""

    name: str
    distribution: str | None = None
    version: str | None = None
    hooks: list[str] = field(default_factory=list)


@dataclass
class PluginProblem:
    """A plugin, or something it registered, that was left out, and why (one line)."""

    plugin: str
    reason: str

    def __str__(self) -> str:
        return f"plugin {self.plugin}: {self.reason}"


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, remembering which distribution each installed plugin came from and
    which plugins (or registrations) were refused."""

    def __init__(self) -> None:
        super().__init__(ENTRY_POINT_GROUP)
        self.add_hookspecs(hookspecs)
        self.distributions: dict[str, tuple[str, str]] = {}
        self.problems: list[PluginProblem] = []
        #: id(object) -> the plugin that registered it (`collect`), for `memory-mcp plugins`.
        self.owner_of: dict[int, str] = {}
        #: MEMORY_TRACE_HOOKS: `calls` writes each call to stderr, as pluggy's tracing does.
        self.tracing = False
        #: Why MEMORY_PLUGINS cannot be met (it names plugins that are not installed: the
        #: others load), in one line; None when it can. `main` decides what that stops.
        self.unmet_allowlist: str | None = None

    def refuse(self, plugin: str, reason: str) -> None:
        """Record one problem, and log it (a WARNING line, never a traceback) unless this
        process logged it already."""
        problem = PluginProblem(plugin, reason)
        if problem not in self.problems:
            self.problems.append(problem)
        if str(problem) not in _logged:
            _logged.add(str(problem))
            log.warning("%s", problem)

    def origin(self, plugin: str) -> str:
        """`plugin` with its distribution, for messages: "my_channel (my-channel 0.1)"."""
        return plugin_origin(plugin, " ".join(self.distributions.get(plugin, ())))

    def add(self, plugin: Any, name: str, dist: tuple[str, str] | None = None) -> bool:
        """Register one plugin, refusing it (one line) when its hooks do not validate or it
        implements a hook that does not exist. True when it was registered."""
        where = plugin_origin(name, " ".join(dist or ()))
        try:
            self.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            self.refuse(where, f"not loaded: {one_line(exc)}")
            return False
        if dist is not None:
            self.distributions[name] = dist
        unknown = sorted(c.name for c in self.get_hookcallers(plugin) or [] if c.spec is None)
        if unknown:
            self.unregister(plugin)
            self.distributions.pop(name, None)
            self.refuse(where, f"not loaded: {', '.join(unknown)} is not a semantic_memory hook "
                              "(misspelt? see docs/plugins.md)")
            return False
        return True

    def describe(self) -> list[PluginInfo]:
        infos = []
        for name, plugin in self.list_name_plugin():
            if plugin is None:  # blocked
                continue
            dist = self.distributions.get(name)
            hooks = sorted(h.name for h in self.get_hookcallers(plugin) or [])
            infos.append(PluginInfo(name, dist and dist[0], dist and dist[1], hooks))
        return infos

    def implementations(self, hook: str) -> list[tuple[str, Callable[..., Any], list[str]]]:
        """(plugin name, function, argument names) of each implementation of `hook`, in the
        order the plugins were registered (the in-core ones first), whatever `tryfirst` or
        `trylast` says: when two register one name, the earlier plugin keeps it, so no plugin
        can take a name from the core or from a plugin loaded before it."""
        order = {name: i for i, (name, _) in enumerate(self.list_name_plugin())}
        impls = sorted(getattr(self.hook, hook).get_hookimpls(),
                       key=lambda impl: order.get(impl.plugin_name, len(order)))
        return [(impl.plugin_name, impl.function, list(impl.argnames)) for impl in impls]

    def calls(self, hook: str, **kwargs: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        """(plugin name, a call of its implementation with `kwargs`) for each implementation
        of `hook`, in the order pluggy calls them (the last registered first, `tryfirst` and
        `trylast` honoured), so that the caller isolates each: a run-time hook that raises is
        skipped for that call, naming its plugin, and the others still run."""
        for impl in reversed(getattr(self.hook, hook).get_hookimpls()):
            if impl.hookwrapper or getattr(impl, "wrapper", False):
                continue  # wrappers are not part of this contract

            def call(impl: Any = impl) -> Any:
                if self.tracing:
                    sys.stderr.write(f"{hook} [{impl.plugin_name}]\n")
                return impl.function(**{name: kwargs[name] for name in impl.argnames})

            yield impl.plugin_name, call


def no_channel_reason(settings: Settings, skipped: dict[str, str] | None = None) -> str:
    """Why recall can find nothing, whatever is stored, when no channel is active (`recall`,
    `stats`, `doctor` and the service's log say it): none works on this store (`skipped`:
    name -> why), none that MEMORY_PLUGINS loads, or none installed (the core alone)."""
    if skipped:
        why = "; ".join(f"{name}: {reason}" for name, reason in sorted(skipped.items()))
        return f"no retrieval channel works on this store ({why})"
    if settings.plugin_allowlist() is not None:
        return f"no retrieval channel is loaded (MEMORY_PLUGINS={settings.plugins} loads none)"
    return ("no retrieval channel is installed (install semantic-memory-bm25-porter, and "
            "semantic-memory-bm25-trigram for substrings; semantic-memory-sidecar brings "
            "both)")


def collect(pm: PluginManager, hook: str, kind: str, key: Callable[[Any], str],
            check: Callable[[Any], str | None], **kwargs: Any) -> list[Any]:
    """Everything the plugins register through the register-style `hook` (its `register`
    argument is supplied here), refusing with one line each: a plugin whose hook raises, an
    object that fails `check` (which returns the reason), and an object whose name (`key`) an
    earlier plugin took, naming both plugins. `kind` names the objects in messages."""
    accepted: list[Any] = []
    owners: dict[str, str] = {}
    for plugin, function, argnames in pm.implementations(hook):
        found: list[Any] = []
        args = {**kwargs, "register": found.append}
        try:
            function(**{name: args[name] for name in argnames})
        except ConfigError:
            raise  # a bad value in the plugin's own settings section: the user's to fix
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - left out, not fatal
            pm.refuse(pm.origin(plugin), f"{hook} failed: {one_line(exc)}")
            continue
        for obj in found:
            try:
                problem = check(obj)
                name = "" if problem else key(obj)
            except Exception as exc:  # noqa: BLE001 - a member that raises: refused, not fatal
                problem = f"{type(obj).__name__}: {one_line(exc)}"
            if problem:
                pm.refuse(pm.origin(plugin), f"{kind} refused: {problem}")
                continue
            if name in owners:
                pm.refuse(pm.origin(plugin), f"{kind} {name!r} refused: the name is taken by "
                                             f"{pm.origin(owners[name])}")
                continue
            owners[name] = plugin
            pm.owner_of[id(obj)] = plugin
            accepted.append(obj)
    return accepted


def store_kinds(pm: PluginManager) -> dict[str, StoreKind]:
    """URL scheme -> the store kind that opens it, through `register_stores` (`collect`: one
    plugin whose hook raises or registers something else is left out in one line). The first
    kind registered for a scheme keeps it; the in-core SQLite store registers first, so no
    plugin can take `sqlite://` from it."""
    by_scheme: dict[str, StoreKind] = {}
    for kind in collect(pm, "register_stores", "store kind", lambda k: k.name,
                        check_store_kind):
        for scheme in kind.schemes:
            if scheme in by_scheme:
                pm.refuse(pm.origin(pm.owner_of[id(kind)]),
                          f"store kind {kind.name!r}: {scheme}:// refused: store kind "
                          f"{by_scheme[scheme].name!r} opens it")
            else:
                by_scheme[scheme] = kind
    return by_scheme


def check_settings(pm: PluginManager, settings: Settings) -> None:
    """Read and validate every settings section the plugins declare (`register_settings`)
    from the environment `settings` were read from, as the plugins load: a value that cannot
    be used raises ConfigError in one line naming the plugin and the variable, which stops the
    command with exit code 2 as a bad core setting does. A section read only inside a run-time
    hook (`filter_ingest`, `modify_hits`) was checked first on the first write: the service
    started, and then refused every one. A hook that raises, or registers something that is
    not a SettingsSection dataclass, or a section that raises anything but ConfigError (a bug
    in the plugin), is a problem line instead: the rest loads."""
    for plugin, function, _ in pm.implementations("register_settings"):
        where = pm.origin(plugin)
        sections: list[type[SettingsSection]] = []
        try:
            function(register=sections.append)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - left out, not fatal
            pm.refuse(where, f"register_settings failed: {one_line(exc)}")
            continue
        for section in sections:
            if not (isinstance(section, type) and issubclass(section, SettingsSection)
                    and is_dataclass(section)):
                pm.refuse(where, f"settings section refused: {section!r} is not a "
                                 "SettingsSection dataclass")
                continue
            try:
                settings.section(section)
            except ConfigError as exc:
                raise ConfigError(f"plugin {where}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - the plugin's bug: one line, not fatal
                pm.refuse(where, f"settings section {section.__name__} failed: "
                                 f"{one_line(exc)}")


def build_plugin_manager(settings: Settings, extra: list[Any] | tuple[Any, ...] = ()
                         ) -> PluginManager:
    """Load default plugins, installed entry-point plugins (filtered by MEMORY_PLUGINS) and
    `extra` ones (a test or a plugin's own test kit registers its module this way; one that is
    also installed is not registered twice).

    A name in MEMORY_PLUGINS that is not installed (a plugin uninstalled since) is left out as
    a problem, not logged: `unmet_allowlist` says it, and the CLI stops every command on it but
    those that show what is wrong (`--help`, `doctor`, `plugins`). The sections the plugins
    declare are validated last (`check_settings`: ConfigError on a bad value)."""
    from importlib.metadata import entry_points  # not at import: hooks import this module

    pm = PluginManager()
    for module_name in DEFAULT_PLUGINS:
        pm.add(import_module(module_name), module_name.rsplit(".", 1)[-1])
    allow = settings.plugin_allowlist()
    # The project's own distributions first, then the rest by name: a deterministic order, in
    # which a third-party plugin can never take a built-in channel's name.
    installed = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (
        not (ep.dist and ep.dist.name.startswith("semantic-memory")),
        ep.dist.name if ep.dist else "", ep.name))
    if allow is not None and (unknown := sorted(allow - {ep.name for ep in installed} - {"none"})):
        names = ", ".join(sorted({ep.name for ep in installed})) or "none"
        pm.unmet_allowlist = (f"MEMORY_PLUGINS names {', '.join(unknown)}, which "
                              f"{'is' if len(unknown) == 1 else 'are'} not installed "
                              f"(installed: {names})")
        pm.problems.append(PluginProblem(", ".join(unknown), "named in MEMORY_PLUGINS, not "
                                         f"installed (installed: {names})"))
    for ep in installed:
        if allow is not None and ep.name not in allow:
            continue
        dist = (ep.dist.name, ep.dist.version) if ep.dist is not None else None
        if pm.has_plugin(ep.name):
            taken = pm.origin(ep.name)
            pm.refuse(plugin_origin(ep.name, " ".join(dist or ())),
                      f"not loaded: the entry point name is taken by {taken}")
            continue
        try:
            # A plugin printing at import must not write into stdout: `--stdio` speaks
            # JSON-RPC there and `--json` prints data. sys.exit() is an import failure too.
            with stdout_to_stderr():
                plugin = ep.load()
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - unimportable: left out
            where = plugin_origin(ep.name, " ".join(dist or ()))
            pm.refuse(where, f"not loaded: {one_line(exc)}")
            continue
        pm.add(plugin, ep.name, dist)
    for plugin in extra:
        if not pm.is_registered(plugin):
            name = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__name__
            pm.add(plugin, name if not pm.has_plugin(name) else pm.get_canonical_name(plugin))
    check_settings(pm, settings)
    if settings.trace_hooks:
        pm.trace.root.setwriter(lambda message: sys.stderr.write(message))
        pm.enable_tracing()
        pm.tracing = True
    return pm

