"""Plain data types shared by the pipeline, the channels and the interfaces."""

from __future__ import annotations

import math
import re
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from . import remotes
from .safety.terminal import strip_terminal_controls

#: Kinds the docs name; any short identifier is accepted. Only `artifact` (tool captures)
#: expires, after MEMORY_TTL_ARTIFACT_DAYS; everything else is permanent.
KINDS = ("preference", "decision", "fact", "artifact", "note", "summary")
EXPIRING_KIND = "artifact"
#: A plugin object's name (a channel, an embedder): what settings, weights and messages key
#: it by.
PLUGIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


#: The latest time a memory may carry: 9999-12-31T23:59:59Z, the last second ISO 8601 and
#: Python's datetime can write.
MAX_TS = 253_402_300_799.0


def in_time_range(ts: float) -> bool:
    """Whether unix seconds `ts` is a time a memory may carry: 1970 to year 9999 (also False
    for NaN and infinities, which no interface could show)."""
    return 0 <= ts <= MAX_TS


def iso(ts: float) -> str:
    """Unix seconds -> ISO 8601 UTC, the form every interface shows. A time out of range (a
    row written before ingest checked the range) is shown at its nearest bound, never raised
    on: one such row must not stop a listing or an export."""
    if not in_time_range(ts):
        ts = 0.0 if math.isnan(ts) or ts < 0 else MAX_TS
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds")


def iso_exact(ts: float) -> str:
    """`iso` to the microsecond where `ts` has a fraction (`…T12:00:00.250000+00:00`), else
    whole seconds: what an export writes, so that an import restores a memory's times as they
    were (to the microsecond, what ISO 8601 and datetime carry), where every other interface
    shows seconds."""
    if not in_time_range(ts):
        return iso(ts)
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="auto")


#: A duration back from now ("30m", "24h", "7d", "2w"): a number, then a unit.
_AGO = re.compile(r"([0-9]+(?:\.[0-9]+)?) *([A-Za-z]+)")
#: Unix seconds as people write them: digits, maybe a fraction. Python's float() also reads
#: "1_000", " 1000 ", "1e3", "nan", "inf" and other scripts' digits ("١٠٠٠"): odd spellings
#: that are more likely a mistake than a time in 1970, so they are refused.
_SECONDS = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
#: The characters of an ISO 8601 time: datetime.fromisoformat also takes any character
#: between the date and the time ("2025-01-01_12").
_ISO = re.compile(r"[0-9:.,+\-TWZ ]+")
#: Seconds per unit of a duration. Upper case reads the same, except `M` (`_UNCLEAR_UNITS`).
_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_MONTHS = "months are not a unit: use 30d"
#: Units a person may mean but that are no unit here, each with why: `1M` read as one minute
#: would filter by the last minute where a month was meant.
_UNCLEAR_UNITS = {"M": f"M could be months or minutes: write m for minutes ({_MONTHS})",
                  **dict.fromkeys(("mo", "mon", "mos", "month", "months"), _MONTHS),
                  **dict.fromkeys(("y", "yr", "yrs", "year", "years"),
                                  "years are not a unit: use 365d")}


class TimeOutOfRange(ValueError):
    """A time that reads, but lies outside what a memory may carry (`in_time_range`)."""


class UnclearDuration(ValueError):
    """A duration whose unit reads two ways or is no unit here (`1M`, `1mo`, `1y`); its
    message is the one-line reason."""


def parse_time(value: str | float | int) -> float:
    """ISO 8601 (naive = UTC), unix seconds, or a duration back from now ("7d": a week ago;
    s, m, h, d, w) -> unix seconds; ValueError for anything else (a text with spaces around
    it, a number spelt other than as digits with maybe a fraction, NaN, an infinity), its
    subclass UnclearDuration for a unit that reads two ways (`M`) or none (months, years),
    TimeOutOfRange for a time outside 1970 to year 9999."""
    ts = _read_time(value)
    if not in_time_range(ts):
        raise TimeOutOfRange("time out of range (1970 to year 9999)")
    return ts


def _read_time(value: str | float | int) -> float:
    if isinstance(value, bool):
        raise ValueError("a timestamp cannot be a boolean")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError("a timestamp must be a finite number")
        return float(value)
    if _SECONDS.fullmatch(value):
        return float(value)
    ago = _AGO.fullmatch(value)
    if ago:
        number, unit = ago.groups()
        reason = _UNCLEAR_UNITS.get(unit, _UNCLEAR_UNITS.get(unit.lower()))
        if reason is not None:
            raise UnclearDuration(f"{value!r}: {reason}")
        if unit.lower() in _UNIT_S:
            return time.time() - float(number) * _UNIT_S[unit.lower()]
    if not _ISO.fullmatch(value) or value != value.strip():
        raise ValueError(f"not ISO 8601: {value!r}")
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def project_name(project: Any) -> Any:
    """A project name as stored and filtered by: without surrounding whitespace, so that
    "web " (a shell variable, a pasted name) is the project "web", not one no recall in "web"
    ever reaches; composed (NFC), so that a folder macOS names in decomposed form
    ("cafe\u0301-app") is the project the user types ("café-app"); a remote's address
    (`https://github.com/acme/app.git`, `git@github.com:acme/app.git`, `…/app.git`) named as
    the hooks name its clones (`remotes.normalise_remote`); a repository of a well-known host
    named as its HTTPS clone ("GitHub.com/Acme/App" and "github.com-work/acme/app" are
    "github.com/acme/app", `remotes.canonical_name`); and without a trailing slash, but for
    an absolute path: that is a folder's own name (the root `/`, `/work/ /` for a folder
    named with blanks, `harness.project.detect_project`). Anything but a string is left for
    validation to refuse. A name it returns is its own name: one copied from a listing finds
    its memories."""
    if not isinstance(project, str):
        return project
    name = unicodedata.normalize("NFC", project)
    for _ in range(8):  # each pass shortens a name or lowers its case: a few reach its own
        named = _named_once(name)
        if named == name:
            break
        name = named
    return name


def _named_once(name: str) -> str:
    """One pass of `project_name`: a remote's address within a remote's address
    (`file://https://…`) or a `.git` within a `.git` is named by the next."""
    name = name.strip()
    if remotes.looks_like_remote(name):
        name = remotes.normalise_remote(name) or name  # not `https:///`: no project at all
    elif not name.startswith("/"):
        name = name.rstrip("/") or name
    return remotes.canonical_name(name)


def identifier(name: Any) -> Any:
    """A kind or source as stored and filtered by: lower-cased and composed (NFC), so that
    "Fact" is a fact (the supersession rule, `--kind fact` and artifact expiry all name them in
    lower case)."""
    return unicodedata.normalize("NFC", name.lower()) if isinstance(name, str) else name


@dataclass
class NewMemory:
    """What a caller asks to store. Ingest filters may edit it in place."""

    content: str
    kind: str = "fact"
    source: str = "chat"
    project: str | None = None
    tags: list[str] = field(default_factory=list)
    created_at: float | None = None
    # The agent session (or capture) it came from: memories of one session are kept in arrival
    # order, and recall brings a hit's neighbours along. A batch without one is its own session.
    session: str | None = None
    # Restoring a backup (`memory-mcp import` of an export) keeps each memory's identity and
    # state; everything else leaves these unset.
    uid: str | None = None
    updated_at: float | None = None
    forgotten: bool = False
    seq: int | None = None
    #: The uid of a live memory this one replaces (`memory_store(replaces=…)`): explicit
    #: supersession, whatever the rule says.
    replaces: str | None = None
    #: Restoring a backup: the uid that had superseded this memory.
    superseded_by: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.content, str):
            self.content = strip_terminal_controls(self.content)
        if isinstance(self.tags, list):
            self.tags = [strip_terminal_controls(t) if isinstance(t, str) else t
                         for t in self.tags]
        if isinstance(self.project, str):
            self.project = strip_terminal_controls(self.project)
        self.project = project_name(self.project)
        self.kind, self.source = identifier(self.kind), identifier(self.source)


#: Tag prefix of an imported memory whose file a harness loads into every session itself
#: (its CLAUDE.md, AGENTS.md): recall for that harness leaves it out (`Memory.loaded_by`).
LOADED_BY = "loaded-by:"


@dataclass
class Memory:
    """A stored memory row."""

    id: int
    uid: str
    content: str
    kind: str
    source: str
    project: str | None
    tags: list[str]
    created_at: float
    updated_at: float
    deleted: bool = False
    session: str | None = None
    seq: int | None = None  # its place in `session`
    #: The uid of the newer memory that replaces this one (supersession); None while current.
    superseded_by: str | None = None

    def loaded_by(self, harness: str) -> bool:
        """Whether `harness` loads this memory's source file into every session itself: its
        agent has the text already, so injecting it again would only spend the budget."""
        return LOADED_BY + harness in self.tags

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("id")
        if self.superseded_by is None:  # most are current: keep their dict as it was
            data.pop("superseded_by")
        data["created_at"] = iso(self.created_at)
        data["updated_at"] = iso(self.updated_at)
        return data


@dataclass
class IngestResult:
    """Outcome of one ingest: `new`, `duplicate` (existing entry refreshed, nothing else
    changed) or `rejected`."""

    status: str
    uid: str | None = None
    reason: str | None = None
    #: The uids of the memories this write superseded (`replaces`, or restated with changed
    #: details): they leave recall, and the caller should know.
    supersedes: list[str] | None = None
    #: A `duplicate` of a memory whose kind or tags differ from this write's: what the write
    #: asked for and did not get (`kind`, the `tags` the memory lacks). A duplicate only
    #: refreshes the memory; `reason` says how to apply them (an update).
    not_applied: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True)
class RecallFilters:
    """Optional narrowing of a recall or a listing; None means "any"."""

    project: str | None = None
    kind: str | None = None
    source: str | None = None
    since: float | None = None  # unix seconds, on updated_at
    #: Superseded memories (replaced by a newer one) are left out unless this is set.
    include_superseded: bool = False
    #: Only global memories (those without a project, which every project shares).
    global_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "project", project_name(self.project))
        object.__setattr__(self, "kind", identifier(self.kind))
        object.__setattr__(self, "source", identifier(self.source))
        if self.global_only and self.project is not None:
            raise ValueError("a filter takes a project or global_only, not both")

    @property
    def narrows(self) -> bool:
        """Whether anything beyond "live and current" is asked for: a search may then rank the
        whole index alone only if it checks every hit against `sql()`."""
        return (self.global_only or self.since is not None
                or any(v is not None for v in (self.project, self.kind, self.source)))

    def admits(self, memory: Memory) -> bool:
        """`sql()`'s condition for one memory already loaded."""
        return (not memory.deleted
                and (self.include_superseded or memory.superseded_by is None)
                and all(wanted is None or getattr(memory, column) == wanted
                        for column, wanted in (("project", self.project), ("kind", self.kind),
                                               ("source", self.source)))
                and not (self.global_only and memory.project is not None)
                and (self.since is None or memory.updated_at >= self.since))

    def sql(self, alias: str = "m", placeholder: str = "?") -> tuple[str, list[Any]]:
        """An SQL condition over the `memories` table (aliased) for live rows matching the filters,
        with `placeholder` marking each parameter (`%s` for psycopg).

        Channel plugins append it to their own queries so that filtering is uniform.
        """
        clauses = [f"{alias}.deleted = 0"]
        if not self.include_superseded:
            clauses.append(f"{alias}.superseded_by IS NULL")
        params: list[Any] = []
        for column in ("project", "kind", "source"):
            value = getattr(self, column)
            if value is not None:
                clauses.append(f"{alias}.{column} = {placeholder}")
                params.append(value)
        if self.global_only:
            clauses.append(f"{alias}.project IS NULL")
        if self.since is not None:
            clauses.append(f"{alias}.updated_at >= {placeholder}")
            params.append(self.since)
        return " AND ".join(clauses), params


@dataclass
class ChannelHit:
    """One candidate from one channel: the memory's row id and the channel's own score."""

    id: int
    score: float
    #: Named evidence the post-processing may use (e.g. {"cosine": 0.71}); copied to RecallHit.
    signals: dict[str, float] = field(default_factory=dict)
    #: The channel's own verdict that this candidate is too weak to stand alone (a vector hit
    #: below the cosine floor): a fused hit that only weak verdicts found is dropped.
    weak: bool = False


@dataclass
class InjectionBlock:
    """The block injected into an agent's context, and the uids of the memories it holds (what
    an injecting client reports to /inject/report): a budget may leave some hits out."""

    text: str = ""
    uids: list[str] = field(default_factory=list)


def folded(text: str) -> str:
    """`text` as a search for it everywhere compares it: NFKC-normalised and case-folded,
    without the dot above that case-folding leaves of a Turkish "İ" ("İstanbul" is found by
    "istanbul")."""
    return unicodedata.normalize("NFKC", text).casefold().replace("\u0307", "")


@dataclass
class Holdings:
    """Where a text is stored (`memory-mcp purge --matching`): the memories whose content or
    tags hold it, the earlier versions (revisions) of other memories that hold it, by
    revision id with the uid of their memory, and the injection reports whose prompt holds
    it, by report id."""

    memories: list[Memory] = field(default_factory=list)
    revisions: dict[int, str] = field(default_factory=dict)
    reports: list[int] = field(default_factory=list)
    #: The ids of the memories that hold the text only together: two pieces of one long
    #: exchange, the text cut between them.
    across: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.memories or self.revisions or self.reports)


@dataclass
class RecallHit:
    """A fused result: the memory, its fused score and its 1-based rank in each channel."""

    memory: Memory
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    signals: dict[str, float] = field(default_factory=dict)  # e.g. cosine, injections
    #: The uid of the hit this memory came in next to (neighbour expansion); None for a hit.
    neighbour_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self.memory.to_dict()
        data["score"] = round(self.score, 6)
        data["ranks"] = dict(self.ranks)
        if self.neighbour_of:
            data["neighbour_of"] = self.neighbour_of
        if self.signals:
            data["signals"] = {k: round(v, 6) for k, v in self.signals.items()}
        return data


def now() -> float:
    return time.time()
