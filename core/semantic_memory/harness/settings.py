"""The settings a hook process reads, without importing `config.py`.

`Settings` is a frozen dataclass over ~60 fields: importing it costs a hook `dataclasses`
(and with it `inspect`, `ast`, `re`, `enum`) and `pathlib`, about as much CPU as the bare
interpreter's start-up. A hook reads a dozen of those fields, so `HookSettings` reads just
those `MEMORY_*` variables, with `Settings`' defaults, parsing and error messages (the two
are compared field by field in tests/test_hook_cpu.py). Anything else an adapter asks for is
read through a full `Settings.from_env()`, built on first use. Paths are plain strings here
(`beside_db`, `discovery_file`); the `Path` properties of `Settings` import pathlib when used.
"""

from __future__ import annotations

import os

from ..limits import MAX_BUDGET_CHARS
from ..path_settings import path_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

    from ..config import Settings

#: name -> (type, default) of the `Settings` fields a hook process reads.
FIELDS: dict[str, tuple[str, object]] = {
    "db_path": ("str", ""),  # "" = the default, ~/.local/share/memory-mcp/memory.db
    "discovery_file": ("str", ""),
    "token": ("str", ""),
    "plugins": ("str", ""),
    "plugin_url": ("str", ""),
    "plugin_token": ("str", ""),
    "plugin_limit": ("int", 5),
    "plugin_budget_chars": ("int", 2000),
    "plugin_tool_capture": ("str", ""),
    "plugin_autostart": ("bool", False),
    "plugin_debug": ("bool", False),
    "project": ("str", ""),
    "hook_budget_s": ("float", 1.5),
    "hook_backoff_s": ("float", 30.0),
    "port": ("int", 8765),  # the service's: where hooks look when nothing else says
}
DEFAULT_DB_PATH = "~/.local/share/memory-mcp/memory.db"
#: How an installed tool hook's command names the tools to capture (`--tool-capture=bash,read`):
#: MEMORY_PLUGIN_TOOL_CAPTURE as install found it, for where the agent runs without it.
TOOL_CAPTURE_OPTION = "--tool-capture="


class SettingsError(ValueError):
    """A `MEMORY_*` variable a hook reads holds a value it cannot use (`ConfigError`'s text)."""


class HookSettings:
    """The `MEMORY_*` variables a hook reads; any other `Settings` attribute falls through
    to a full `Settings.from_env()` (built once, on first use)."""

    __slots__ = (*FIELDS, "_env", "_full")

    db_path: str
    discovery_file: str
    token: str
    plugins: str
    plugin_url: str
    plugin_token: str
    plugin_limit: int
    plugin_budget_chars: int
    plugin_tool_capture: str
    plugin_autostart: bool
    plugin_debug: bool
    project: str
    hook_budget_s: float
    hook_backoff_s: float
    port: int

    def __init__(self, env: Mapping[str, str] | None = None, **values: Any) -> None:
        for name, (_, default) in FIELDS.items():
            setattr(self, name, values.pop(name, default))
        if values:
            raise TypeError(f"not a hook setting: {', '.join(values)}")
        if not self.db_path:
            self.db_path = os.path.expanduser(DEFAULT_DB_PATH)
        self._env = env
        self._full: Settings | None = None

    @property
    def env(self) -> Mapping[str, str]:
        """The variables these settings were read from (as `Settings.env`)."""
        return os.environ if self._env is None else self._env

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> HookSettings:
        """Read the hook's `MEMORY_<FIELD>` variables; SettingsError (or `ConfigError`) names
        a bad one. Any other `MEMORY_*` variable set is checked as every command checks it
        (`Settings.from_env()`), so a typo fails a hook as it fails the service; only that
        costs a hook the full settings module."""
        source = os.environ if env is None else env
        values: dict[str, object] = {}
        for name, (kind, _) in FIELDS.items():
            variable = f"MEMORY_{name.upper()}"
            raw = source.get(variable)
            if raw:
                values[name] = _parse(variable, raw, kind)
        values["project"] = project_setting(str(values.get("project", "")))
        settings = cls(env, **values)
        settings.validate()
        others = sorted(f"{key}={value}" for key, value in source.items()
                        if key.startswith("MEMORY_") and value and key[7:].lower() not in FIELDS)
        if others:
            settings.check(others)
        return settings

    def check(self, others: list[str]) -> None:
        """Check the other `MEMORY_*` variables set (`NAME=value` lines) through
        `Settings.from_env()`, which raises ConfigError for a bad one. Values that passed
        are remembered by their digest (and config.py's version) in `hooks.settings-checked`
        beside the db, so the next hooks in the same environment skip the full settings
        module: the service's variables are often exported where the agent runs too."""
        from ..lite import replace_private, sha256_hex

        try:
            config = os.stat(os.path.join(os.path.dirname(os.path.dirname(__file__)),
                                          "config.py"))
            version = f"{config.st_mtime_ns}:{config.st_size}"
        except OSError:
            version = ""
        key = sha256_hex("\0".join([version, *others]).encode("utf-8", "surrogatepass"))
        stamp = beside_db(self, "hooks.settings-checked")
        try:
            with open(stamp, encoding="ascii") as handle:
                if handle.read() == key:
                    return
        except (OSError, ValueError):
            pass
        self.full()  # raises ConfigError for a bad variable
        try:
            replace_private(stamp, key.encode("ascii"))
        except OSError:
            pass

    def validate(self) -> None:
        """`Settings.validate`'s checks of these fields, with its messages; and the service
        URL, which only hooks use: one they cannot send to would cost every write."""
        for name, path in (("MEMORY_DB_PATH", self.db_path),
                           ("MEMORY_DISCOVERY_FILE", self.discovery_file)):
            if (problem := path_problem(name, path)) is not None:
                raise SettingsError(problem)
        if self.plugin_url:
            from .urls import split_url

            try:
                split_url(self.plugin_url)
            except ValueError:
                raise SettingsError("MEMORY_PLUGIN_URL must be an http(s) URL "
                                    f"(http://host:port), not {self.plugin_url!r}") from None
        if not 1 <= self.plugin_limit <= 50:
            raise SettingsError(f"MEMORY_PLUGIN_LIMIT must be 1..50, not {self.plugin_limit}")
        if not 500 <= self.plugin_budget_chars <= MAX_BUDGET_CHARS:
            raise SettingsError(f"MEMORY_PLUGIN_BUDGET_CHARS must be 500..{MAX_BUDGET_CHARS}, not "
                                f"{self.plugin_budget_chars}")
        if not 0.05 <= self.hook_budget_s <= 60:
            raise SettingsError(f"MEMORY_HOOK_BUDGET_S must be 0.05..60, not {self.hook_budget_s}")
        if not 0 <= self.hook_backoff_s <= 3600:  # also rejects NaN
            raise SettingsError(
                f"MEMORY_HOOK_BACKOFF_S must be 0..3600, not {self.hook_backoff_s}")
        if not 0 <= self.port <= 65535:
            raise SettingsError(f"MEMORY_PORT must be 0..65535, not {self.port}")

    def full(self) -> Settings:
        """Every setting (`Settings.from_env()`), for what a hook reads rarely."""
        if self._full is None:
            from ..config import Settings

            self._full = Settings.from_env(self._env)
        return self._full

    def __getattr__(self, name: str) -> Any:  # only for names that are not slots
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.full(), name)

    # --- what `Settings` derives from these fields ------------------------------------------

    def tool_capture(self) -> set[str]:
        """MEMORY_PLUGIN_TOOL_CAPTURE as lowercase tool names."""
        return {t.strip().lower() for t in self.plugin_tool_capture.split(",") if t.strip()}

    def plugin_allowlist(self) -> set[str] | None:
        names = {p.strip() for p in self.plugins.split(",") if p.strip()}
        return names or None

    @property
    def resolved_db_path(self) -> Path:
        from pathlib import Path

        return Path(self.db_path).expanduser()

    @property
    def spool_path(self) -> Path:
        return self.resolved_db_path.with_name("spool")

    @property
    def backoff_path(self) -> Path:
        return self.resolved_db_path.with_name("hooks.backoff.json")

    @property
    def discovery_path(self) -> Path | None:
        path = discovery_file(self)
        if path is None:
            return None
        from pathlib import Path

        return Path(path)


def beside_db(settings: Settings | HookSettings, name: str) -> str:
    """The file `name` in the db file's folder (`settings.resolved_db_path.with_name(name)`),
    as a string: no pathlib for it."""
    db = os.path.expanduser(settings.db_path).rstrip("/") or "/"
    return os.path.join(os.path.dirname(db), name)


def discovery_file(settings: Settings | HookSettings) -> str | None:
    """`settings.discovery_path` as a string (None: MEMORY_DISCOVERY_FILE=off)."""
    if settings.discovery_file.lower() == "off":
        return None
    if settings.discovery_file:
        return os.path.expanduser(settings.discovery_file)
    db = os.path.expanduser(settings.db_path).rstrip("/") or "/"
    return beside_db(settings, os.path.basename(db) + ".server.json")


def project_setting(raw: str) -> str:
    """MEMORY_PROJECT by the rule the service reads it by too (`project_setting.py`): blank is
    unset; SettingsError for a name every write would be refused for."""
    from ..project_setting import read_project_setting

    try:
        return read_project_setting(raw)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def _parse(name: str, raw: str, kind: str) -> object:
    """`config._parse`: the same values and the same error text."""
    try:
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError:
        article = "an" if kind == "int" else "a"
        raise SettingsError(f"{name}: cannot use {raw!r} as {article} {kind}") from None
    return raw
