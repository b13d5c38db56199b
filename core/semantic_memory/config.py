"""Settings from the `MEMORY_*` environment variables (names and defaults follow the spec).

`SettingsSection` is how a group of variables is declared: a frozen dataclass whose fields are
read from `<prefix><FIELD>`. The core's is `Settings`; each plugin has its own section
(the llama-cpp embedder's `MEMORY_EMBED_*`, the vector channel's `MEMORY_VECTOR_ANN*`, the
PostgreSQL store's pool) and reads it with `settings.section(TheirSection)`, from the same
environment the core's were read from. A section declared through the `register_settings`
hook is validated as the plugins load; one read first in a `register_*` hook is validated
then (the project's own plugins), one read first at run time only then.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Mapping, TypeVar

from .limits import MAX_BUDGET_CHARS
from .path_settings import path_problem


class ConfigError(ValueError):
    """A `MEMORY_*` variable holds a value that cannot be used."""


def _default_db_path() -> str:
    return str(Path("~/.local/share/memory-mcp/memory.db").expanduser())


S = TypeVar("S", bound="SettingsSection")


@dataclass(frozen=True)
class Range:
    """The values a numeric setting takes: `low`..`high`, `low` itself left out when
    `open_low`; `also` is one more value with a meaning of its own (-1: the model's). NaN and
    the infinities are never in it, nor a number so large it can only be a mistake."""

    low: float
    high: float
    open_low: bool = False
    also: float | None = None

    def admits(self, value: float) -> bool:
        if value == self.also:
            return True
        return (self.low < value if self.open_low else self.low <= value) and value <= self.high

    def __str__(self) -> str:
        low, high = _number(self.low), _number(self.high)
        span = f"({low}, {high}]" if self.open_low else f"{low}..{high}"
        return span + (f" (or {_number(self.also)})" if self.also is not None else "")


#: A channel's weight in MEMORY_CHANNEL_WEIGHTS (the defaults are 0.15 to 1.2).
CHANNEL_WEIGHT = Range(0, 100)


def within(low: float, high: float, *, open_low: bool = False,
           also: float | None = None) -> dict[str, Range]:
    """A field's range, as its metadata: `field(default=0.5, metadata=within(0, 1))`. Checked
    by `SettingsSection.from_env` before `validate`, with one message for every setting."""
    return {"range": Range(low, high, open_low, also)}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class SettingsSection:
    """A declared group of settings: subclass it as a frozen dataclass; field `embed_dim` of a
    section with prefix `MEMORY_` reads MEMORY_EMBED_DIM (bool, int, float or str, parsed as
    the core's are). A number declares its range on the field (`metadata=within(1, 1000)`),
    checked first; `validate` then raises ConfigError naming a variable for what a range
    cannot say. A plugin declares its sections through the `register_settings` hook: each is
    then checked as the plugins load, and one that fails either stops every command at its
    start with that one line (naming the plugin), like a core setting."""

    #: Prepended to the upper-cased field name to name its variable.
    prefix: ClassVar[str] = "MEMORY_"

    @classmethod
    def variable(cls, name: str) -> str:
        """The environment variable of field `name`."""
        return f"{cls.prefix}{name.upper()}"

    @classmethod
    def values_from(cls, env: Mapping[str, str]) -> dict[str, object]:
        """The fields whose variables are set (non-empty) in `env`, parsed."""
        values: dict[str, object] = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if not f.init or f.metadata.get("from_env") is False:
                continue
            raw = env.get(cls.variable(f.name))
            if raw:
                values[f.name] = _parse(cls.variable(f.name), raw, f.type)
        return values

    @classmethod
    def from_env(cls: type[S], env: Mapping[str, str] | None = None, **overrides: Any) -> S:
        """Read the section from `env` (default: the process environment), then validate."""
        values = cls.values_from(os.environ if env is None else env)
        values.update(overrides)
        section = cls(**values)
        section._check_ranges()
        section.validate()
        return section

    def _check_ranges(self) -> None:
        """Raise ConfigError naming the first field outside its declared range (`within`)."""
        for f in fields(self):  # type: ignore[arg-type]
            limits = f.metadata.get("range")
            value = getattr(self, f.name)
            if limits is not None and not limits.admits(value):
                raise ConfigError(f"{self.variable(f.name)} must be within {limits}, not {value}")

    def validate(self) -> None:
        """Raise ConfigError naming a variable whose value cannot be used (what a range alone
        cannot say). Default: nothing."""


@dataclass(frozen=True)
class Settings(SettingsSection):
    """The core's tunables. `Settings.from_env()` reads them; tests build them directly.
    `env` is where they were read from (a directly built one: the process environment),
    and where `section()` reads a plugin's own."""

    db_path: str = field(default_factory=_default_db_path)
    # The store, as a URL: `sqlite:///path` or `postgresql://…` (the semantic-memory-postgres
    # plugin); empty = the SQLite file db_path. Never shown (repr) or logged: it may hold a
    # password. MEMORY_DB_URL_FILE reads it from a file instead (a secret mount).
    db_url: str = field(default="", repr=False)
    db_url_file: str = ""
    model_path: str = ""
    device: str = "cuda"
    host: str = "127.0.0.1"
    port: int = 8765
    discovery_file: str = ""  # empty = "<db>.server.json"; "off" disables
    token: str = ""
    rrf_k: int = field(default=60, metadata=within(1, 10_000))
    # Cosine floor for vector-only hits; -1 = the model's calibrated floor (0.45 for Qwen3).
    recall_min_cosine: float = field(default=-1.0, metadata=within(0, 1, also=-1))
    inject_boost: float = field(default=0.15, metadata=within(0, 10))
    ttl_artifact_days: int = field(default=90, metadata=within(0, 36_500))  # 0 = never
    ttl_injection_days: int = field(default=90, metadata=within(0, 36_500))
    maintenance_on_start: bool = True
    # Seconds between the service's maintenance runs after the one at its start: an artifact
    # past its TTL or a forget past its grace goes within this long, not at the next restart.
    maintenance_interval_s: float = field(default=3600.0, metadata=within(1, 604_800))
    # Days a forgotten memory waits before the service's start-up maintenance purges it, so a
    # forget (an agent's `memory_forget` too) can be taken back (`memory-mcp unforget`) until
    # then; 0 = at the next start. `memory-mcp purge` ignores it: it purges every one.
    forget_grace_days: int = field(default=30, metadata=within(0, 3650))
    dedup_sim: float = field(default=0.98, metadata=within(0, 1))  # 0 = off
    # The service embeds new memories in the background (`service/embed_queue.py`): a write is
    # stored and keyword-indexed at once, its vector follows (near-duplicates are merged then).
    # 0 = every write waits for its embedding, as the CLI and a bare engine do.
    embed_background: bool = True
    # --- embedder / vector channel (the model's own knobs are its plugin's section) ---
    # Which registered embedder the vector channel uses (empty: the only one installed, or
    # the only one configured).
    embedder: str = ""
    # Keyword fast path: skip embedding the query when BM25 evidence is this confident (0..1);
    # fast_path = 0 always embeds.
    fast_path: bool = True
    fast_path_min: float = field(default=0.8, metadata=within(0, 1))
    # When the vector channel leads the fusion (its weight exceeds the keyword channels'), the
    # keyword channels' weights are scaled by (IDF coverage)**power per query; 0 = off.
    fusion_gate_power: float = field(default=16.0, metadata=within(0, 100))
    # How the channels fuse: "score" (per-query normalised scores mixed by the channels' score
    # weights, an embedder holding `fusion_vector_share` of the weight; -1 = the model's own
    # share) or "rrf" (ranks). Score fusion also for keyword channels alone: it kept every LoCoMo
    # and coding dev fold within 2 points of its best channel, RRF not (docs/retrieval.md).
    fusion: str = "score"
    fusion_vector_share: float = field(default=-1.0, metadata=within(0, 1, also=-1))
    # Score fusion: a channel whose first hit clearly leads its second speaks louder for this
    # query: its normalised scores x (1 + fusion_lead x lead), lead = (first - second) /
    # (first - last) in 0..1. 0 = plain min-max.
    fusion_lead: float = field(default=1.0, metadata=within(0, 10))
    # Per-channel fusion weights, "name=weight,name=weight"; unnamed channels use their default.
    channel_weights: str = ""
    # How many candidates each channel contributes before fusion (at least 2k for a recall of k).
    recall_depth: int = field(default=50, metadata=within(1, 10_000))
    # Seconds a recall waits for one channel's search; past it the recall goes on without that
    # channel, which is not asked again until that search ends (0 = no limit).
    channel_timeout_s: float = field(default=2.0, metadata=within(0, 600))
    # Neighbour expansion: memories brought along from each side of a top hit in its session
    # (0 = off), and how many ranks behind the hit each step away puts them (-1 = 1, or the
    # embedder's own when its channel answers). Under score fusion a neighbour also goes no
    # higher than its hit's score x decay**steps would rank (1 = off).
    neighbours: int = field(default=2, metadata=within(0, 10))
    neighbour_gap: float = field(default=-1.0, metadata=within(0, 100, open_low=True, also=-1))
    neighbour_decay: float = field(default=0.75, metadata=within(0, 1, open_low=True))
    # Query feedback in the porter channel: the words its first hits add are searched again
    # (a second search per recall; pays off only where memories have no session neighbours).
    query_feedback: bool = False
    # Supersession at ingest: a fact/preference/decision restating an older one of the same
    # project and kind with changed details replaces it in recall (`supersede.py`); 0 = only
    # explicit `replaces`.
    supersede: bool = True
    # Comma-separated plugin names to load (empty = all installed). Tests and bug reports use it.
    plugins: str = ""
    # Largest accepted memory, in characters.
    max_content_chars: int = field(default=100_000, metadata=within(1, 10_000_000))
    # 1 = log every plugin hook call with its arguments and results to stderr.
    trace_hooks: bool = False
    # Largest accepted HTTP request body (REST and /mcp), in bytes; larger ones get 413.
    max_body_bytes: int = field(default=4 * 1024 * 1024, metadata=within(1024, 1_000_000_000))
    # Seconds a client has to deliver a whole request body (REST and /mcp); later ones get 408.
    body_timeout_s: float = field(default=30.0, metadata=within(0, 3600, open_low=True))
    # MCP streamable-HTTP sessions held at once: past it, opening one closes the least recently
    # used idle session (agents that die never close theirs).
    mcp_max_sessions: int = field(default=100, metadata=within(1, 100_000))
    # Seconds an MCP session may go without a request in flight before it is closed (the client
    # then gets 404 and initializes a new one).
    mcp_session_idle_s: float = field(default=1800.0,
                                      metadata=within(0, 7 * 86400, open_low=True))
    # Seconds `memory-mcp proxy` (the stdio MCP server install registers) gives one tool call
    # to the service: past it a store is spooled and the other tools answer an error.
    mcp_proxy_timeout_s: float = field(default=3.0, metadata=within(0.1, 600))
    # Extra Host names the HTTP service answers (DNS-rebinding allow-list), comma-separated,
    # e.g. "memory.lan,192.168.1.5"; loopback names and the bound address are always allowed.
    allowed_hosts: str = ""
    # A hit goes into a hook's injection only when a channel vouches for it: the IDF-weighted
    # share of the query a keyword hit contains (0..1), or a vector hit's cosine floor.
    inject_min_coverage: float = field(default=0.5, metadata=within(0, 1))
    # A vector hit's cosine floor for injecting (never below the recall floor); -1 = the
    # recall floor (bench/relevance.py --knob cosine measures it).
    inject_min_cosine: float = field(default=-1.0, metadata=within(0, 1, also=-1))
    # Slow clients: seconds a request's headers may take, and the open connections allowed
    # (in all, and from one address); over a cap the slowest waiting connection is closed.
    header_timeout_s: float = field(default=10.0, metadata=within(0, 3600, open_low=True))
    max_connections: int = field(default=1000, metadata=within(16, 1_000_000))
    max_connections_per_client: int = field(default=250, metadata=within(1, 1_000_000))
    # --- harness hooks and plugins (`memory-mcp hook`, the opencode plugin) ---
    # The service URL; empty = the discovery file, else http://127.0.0.1:8765.
    plugin_url: str = ""
    # Bearer token for the service (empty = MEMORY_TOKEN).
    plugin_token: str = ""
    # Memories per injection and the block's character budget.
    plugin_limit: int = 5
    plugin_budget_chars: int = 2000
    # Tools whose output is captured (comma-separated, case-insensitive; empty = none).
    plugin_tool_capture: str = ""
    # 1 = a SessionStart hook that finds no service starts one (MEMORY_PORT=0, discovery file).
    plugin_autostart: bool = False
    # 1 = hooks log each decision to stderr.
    plugin_debug: bool = False
    # The project memories are stored under and recalled for (empty = the git repository).
    project: str = ""
    # Wall-clock budget of one hook process, in seconds: past it the hook exits 0, silently.
    hook_budget_s: float = 1.5
    # Seconds the hooks skip the network after one met a dead or hung service (0 = never):
    # their writes go to the spool at once and their recalls inject nothing.
    hook_backoff_s: float = 30.0
    # Set by the service (`memory-mcp serve`, stdio too), never by a variable: this process
    # lives on, so plugins may start background work, such as building an index, that a
    # one-off command would leave half done when it exits.
    serving: bool = field(default=False, metadata={"from_env": False})
    # Where these were read from: plugins' sections are read from it too (`section`).
    env: Mapping[str, str] = field(default_factory=lambda: os.environ, repr=False,
                                   compare=False, metadata={"from_env": False})

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read `MEMORY_<FIELD>` for every field; raise ConfigError naming a bad variable."""
        env = os.environ if env is None else env
        values = cls.values_from(env)
        values.update(overrides)
        if values.get("project"):
            values["project"] = _project_setting(str(values["project"]))
        if values.get("db_url_file") and not values.get("db_url"):
            values["db_url"] = _read_secret("MEMORY_DB_URL_FILE", str(values["db_url_file"]))
        settings = cls(env=env, **values)  # type: ignore[arg-type]
        settings._check_ranges()
        settings.validate()
        return settings

    def section(self, cls: type[S]) -> S:
        """A plugin's own settings, read from the environment these were read from."""
        return cls.from_env(self.env)

    def validate(self) -> None:
        for name, path in (("MEMORY_DB_PATH", self.db_path),
                           ("MEMORY_DISCOVERY_FILE", self.discovery_file),
                           ("MEMORY_MODEL_PATH", self.model_path)):
            if (problem := path_problem(name, path)) is not None:
                raise ConfigError(problem)
        if not self.db_url:
            _check_sqlite_path(self.db_path)
        if self.db_url and "://" not in self.db_url:  # never echoed: it may hold a password
            raise ConfigError("MEMORY_DB_URL must be a URL (sqlite:////absolute/path.db or "
                              "postgresql://…); a file path goes in MEMORY_DB_PATH")
        if self.device not in ("cuda", "cpu"):
            raise ConfigError(f"MEMORY_DEVICE must be 'cuda' or 'cpu', not {self.device!r}")
        if self.fusion not in ("rrf", "score"):
            raise ConfigError(f"MEMORY_FUSION must be 'rrf' or 'score', not {self.fusion!r}")
        # Not declared ranges: the hooks' settings (harness/settings.py) repeat these messages.
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"MEMORY_PORT must be 0..65535, not {self.port}")
        # The block's wrapper and notice take ~200 characters: below 500 hardly a memory fits.
        if not 1 <= self.plugin_limit <= 50:
            raise ConfigError(f"MEMORY_PLUGIN_LIMIT must be 1..50, not {self.plugin_limit}")
        if not 500 <= self.plugin_budget_chars <= MAX_BUDGET_CHARS:
            raise ConfigError(f"MEMORY_PLUGIN_BUDGET_CHARS must be 500..{MAX_BUDGET_CHARS}, not "
                              f"{self.plugin_budget_chars}")
        if not 0.05 <= self.hook_budget_s <= 60:
            raise ConfigError(f"MEMORY_HOOK_BUDGET_S must be 0.05..60, not {self.hook_budget_s}")
        if not 0 <= self.hook_backoff_s <= 3600:  # also rejects NaN
            raise ConfigError(f"MEMORY_HOOK_BACKOFF_S must be 0..3600, not {self.hook_backoff_s}")
        for host in filter(None, (h.strip() for h in self.allowed_hosts.split(","))):
            if not _is_host_name(host):
                raise ConfigError(f"MEMORY_ALLOWED_HOSTS: {host!r} is not a host name or IP "
                                  "address (give names only: no scheme, port or path)")
        self.weights()  # parses MEMORY_CHANNEL_WEIGHTS

    @property
    def resolved_db_path(self) -> Path:
        return Path(self.db_path).expanduser()

    def make_data_folder(self) -> None:
        """Create the db file's folder (the SQLite store, the spool, the hook log and the
        discovery file live there) when it is missing, for its owner only (0700): under the
        usual umask 022 it was 0755, and every local user could read every memory. The folders
        above it are made as usual, and one that exists is left as it is (the user's choice).
        A folder that cannot be made is left to what opens the store, which says so in one
        line."""
        try:
            self.resolved_db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            pass

    @property
    def forget_purged_after_s(self) -> float | None:
        """Seconds after its forget that a service start purges a forgotten memory; None when
        no start does (MEMORY_MAINTENANCE_ON_START off: only a person's purge removes it)."""
        return self.forget_grace_days * 86_400.0 if self.maintenance_on_start else None

    @property
    def spool_path(self) -> Path:
        """The write spool's folder, beside the db file (see spool.py)."""
        return self.resolved_db_path.with_name("spool")

    @property
    def backoff_path(self) -> Path:
        """The hooks' shared back-off state, beside the db file (see backoff.py)."""
        return self.resolved_db_path.with_name("hooks.backoff.json")

    @property
    def discovery_path(self) -> Path | None:
        if self.discovery_file.lower() == "off":
            return None
        if self.discovery_file:
            return Path(self.discovery_file).expanduser()
        db = self.resolved_db_path
        return db.with_name(db.name + ".server.json")

    def weights(self) -> dict[str, float]:
        """Parse MEMORY_CHANNEL_WEIGHTS ("trigram=0.5,vector=1")."""
        out: dict[str, float] = {}
        for part in filter(None, (p.strip() for p in self.channel_weights.split(","))):
            name, sep, value = part.partition("=")
            try:
                if not sep:
                    raise ValueError
                out[name.strip()] = float(value)
            except ValueError:
                raise ConfigError(
                    f"MEMORY_CHANNEL_WEIGHTS: expected name=number, got {part!r}"
                ) from None
            if not CHANNEL_WEIGHT.admits(out[name.strip()]):
                raise ConfigError(f"MEMORY_CHANNEL_WEIGHTS: {name.strip()} must be within "
                                  f"{CHANNEL_WEIGHT}, not {value.strip()}")
        return out

    def tool_capture(self) -> set[str]:
        """MEMORY_PLUGIN_TOOL_CAPTURE as lowercase tool names."""
        return {t.strip().lower() for t in self.plugin_tool_capture.split(",") if t.strip()}

    def plugin_allowlist(self) -> set[str] | None:
        names = {p.strip() for p in self.plugins.split(",") if p.strip()}
        return names or None


#: One DNS label; a host name is labels joined by dots.
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")


#: The longest file path SQLite opens (bytes, absolute, links resolved): its unix VFS keeps a
#: path in 512 bytes, and the journal's name adds `-journal` (measured: 504 opens, 505 is
#: "unable to open database file").
SQLITE_MAX_PATH = 504
#: The longest db file name (bytes): 255, a file name's most, less SQLite's `-journal`.
MAX_DB_NAME = 255 - len("-journal")


def _check_sqlite_path(db_path: str) -> None:
    """ConfigError when SQLite could not open `db_path` for its length: said at once, in
    words, rather than as `unable to open database file` when the store opens."""
    real = os.fsencode(os.path.realpath(os.path.expanduser(db_path)))
    if len(real) > SQLITE_MAX_PATH:
        raise ConfigError(f"MEMORY_DB_PATH is {len(real)} bytes long (as an absolute path, "
                          f"links resolved); SQLite opens at most {SQLITE_MAX_PATH}: choose a "
                          "shorter path")
    name = os.path.basename(real)
    if len(name) > MAX_DB_NAME:  # the file fits, its `-journal` or `-wal` would not
        raise ConfigError(f"MEMORY_DB_PATH's file name is {len(name)} bytes long; with the "
                          f"'-journal' SQLite adds to it, at most {MAX_DB_NAME} fit a folder: "
                          "choose a shorter name")


def _is_host_name(text: str) -> bool:
    """An IP address (IPv6 with or without brackets) or a DNS name: no scheme, port or path."""
    try:
        ipaddress.ip_address(text.strip("[]"))
        return True
    except ValueError:
        pass
    return all(_LABEL.match(label) for label in text.rstrip(".").split("."))


def _project_setting(raw: str) -> str:
    """MEMORY_PROJECT as the hooks read it (`project_setting.py`, the rule's one
    place): blank is unset (the workspace's project), and a name every write would be refused
    for is a bad setting. `--stdio` and the proxy took "   " as a project and stored global
    memories where the hooks stored the repository's."""
    from .project_setting import read_project_setting

    try:
        return read_project_setting(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _read_secret(name: str, path: str) -> str:
    """The first line of a secret file (a connection string), without its newline."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{name}: cannot read {path}: {getattr(exc, 'strerror', exc)}") from None
    lines = text.strip().splitlines()
    if not lines:
        raise ConfigError(f"{name}: {path} is empty")
    return lines[0].strip()


def _parse(name: str, raw: str, type_name: object) -> object:
    # a string under `from __future__ import annotations`, else the type itself
    kind = type_name if isinstance(type_name, str) else getattr(type_name, "__name__", "str")
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
        raise ConfigError(f"{name}: cannot use {raw!r} as {article} {kind}") from None
    return raw
