"""The core pipeline: ingest -> filters -> dedup -> store + index; recall -> channels -> fuse ->
post-process -> injection block. Interfaces (CLI, MCP, REST) all go through `MemoryEngine`."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Callable, Iterable, Iterator

from . import held, neardup, neighbours, supersede
from .channels import Backfills, Channel, check_channel, skip_reason
from .config import Settings
from .embedders import NO_EMBEDDER_PLUGIN, Embedder, check_embedder, choose_embedder
from .private import strip_private
from .safety.redaction import redact, ruleset_info
from .errors import UnknownMemory, one_line
from .ingest import SUPERSEDE_MAX_CHARS, UID, UpdateResult, Writer
from .retrieval import NO_DEADLINE, Deadline, Searcher, hook_deadline
from .limits import MAX_RECALL_K, MAX_TAG_CHARS
from .models import (
    Holdings,
    IngestResult,
    InjectionBlock,
    Memory,
    NewMemory,
    RecallFilters,
    RecallHit,
    iso,
    iso_exact,
    now,
    project_name,
)
from .plugins import CORE_PLUGINS, PluginManager, build_plugin_manager, collect, store_kinds
from .stores import MemoryStore, open_store
from .stores.base import VALUE_COLUMNS, StoreError, top_values
from .telemetry import fill_days, to_api


def as_stored(text: str | None) -> str | None:
    """A free-text field as the store keeps it: private spans out, secrets redacted (what
    ingest's hygiene does to a memory's fields, so a lookup by it finds what was stored)."""
    return redact(strip_private(text)) if text else text


log = logging.getLogger("semantic_memory")

#: What every interface says while recall is by words only (no embedder set up).
KEYWORD_MODE_NOTE = (
    "Recall is by words until an embedder is set up (MEMORY_MODEL_PATH, see docs/vector.md): "
    "a query finds memories that share its words, not a rephrasing of them."
)


def keyword_mode_why(embedder: dict[str, Any]) -> str | None:
    """Why recall is by words only, when something other than setting a model up would change
    it (the embedder's info as `stats` gives it): the embedder plugin to install for the
    vector channel, or the reason the embedder is off (refused, unknown, a model that cannot
    be used); None when none is set up (KEYWORD_MODE_NOTE then says what to do). One embedder
    that names a model path and has it empty (llama-cpp without MEMORY_MODEL_PATH) is that."""
    reason = embedder.get("reason")
    if reason == NO_EMBEDDER_PLUGIN:
        return (f"{NO_EMBEDDER_PLUGIN} for the vector channel (install semantic-memory-llama-cpp, "
                "see docs/vector.md)")
    if reason and not ("model_path" in embedder and not embedder["model_path"]):
        return f"the embedder is off ({reason})"
    return None


#: The fields of an export line, in order (`forgotten` is added to forgotten memories only).
EXPORT_FIELDS = ("uid", "content", "kind", "source", "project", "tags", "created_at",
                 "updated_at", "session", "seq")
DAY = 86_400.0
#: Days of per-day injection counts in the telemetry summary (the browse page's chart).
SUMMARY_DAYS = 30
#: The longest `stats` reuses its counts per kind, source and project (a pass over the whole
#: table: ~0.8 s at 1M memories) while the store's totals and newest change stay the same.
#: Any write those see (a memory stored, edited, forgotten, purged) recounts at once; this
#: bounds what they cannot see (changes cancelling out within these seconds).
STATS_REUSE_S = 30.0
#: An import merges the FTS5 indexes when its new memories are at least this share of the
#: store: the merge rewrites the whole index (6-9 s holding the write lock at 1M memories).
#: Below it FTS5's own automerge keeps up: recall after 2,000 to 50,000 new memories in 1M was
#: as fast unmerged as merged, after 100,000 ~20% slower (docs/benchmarks.md, Scale).
MERGE_SHARE = 0.1
#: How far back the service's first maintenance run looks for names an older release wrote
#: (`_normalize_recent_names`), and how much each later run looks back past the one before (a
#: write in flight as the last run began).
NAMES_FIRST_WINDOW_S = 7 * 86_400.0
NAMES_OVERLAP_S = 60.0
#: The service's start-up purge merges the indexes and VACUUMs only when what it removed is at
#: least this share of the rows (`memory-mcp purge` always does): ~11 s of write lock at 1M
#: memories, for one forgotten memory as for many.
STARTUP_RECLAIM_SHARE = 0.1


@dataclass(frozen=True)
class _GroupCounts:
    """What `stats` reuses (STATS_REUSE_S): the counts, and the store state they were read at."""

    key: tuple[int, int, float | None]
    at: float
    by_kind: dict[str, int]
    by_source: dict[str, int]
    by_project: dict[str, int]
    without_project: int


def _recall_mode(embedder_info: dict[str, Any] | None) -> str:
    return "keyword" if embedder_info is None or embedder_info.get("active") is False \
        else "hybrid"


def _status(channel: Channel) -> str | None:
    """A channel's `status()`, or the one line of why it could not say."""
    try:
        return channel.status()
    except Exception as exc:  # noqa: BLE001 - stats shows the error, not a traceback
        return f"status failed: {one_line(exc)}"


def _joined(*lines: str | None) -> str | None:
    return "; ".join(line for line in lines if line) or None


def _purged(channels: list[Channel]) -> str | None:
    """Each channel's `purged()`: one line for those that could not rewrite what they keep
    outside the store, or failed trying (named), joined; None when every one did."""
    lines = []
    for channel in channels:
        try:
            line = channel.purged()
        except Exception as exc:  # noqa: BLE001 - the purge is committed: reported, not raised
            line = f"the {channel.name} channel could not rewrite its files: {one_line(exc)}"
        if line:
            lines.append(line)
    return "; ".join(lines) or None


def _hit_problem(hit: Any) -> str:
    """What a `modify_hits` left in the hits that is not a RecallHit with a finite score, said
    without the memory's content (memory content never goes to a log)."""
    if not isinstance(hit, RecallHit):
        return f"left a {type(hit).__name__} in the hits, not a RecallHit"
    score = hit.score if isinstance(hit.score, (int, float)) else type(hit.score).__name__
    return f"left memory {hit.memory.uid} with score {score}, not a finite number"


def _overran(exc: held.Overran, deadline: Deadline) -> str:
    """A post-processing hook's overrun, for its log line (after its name and the hook's)."""
    if exc.started:
        return f"took longer than {deadline}; skipped until it returns"
    return f"did not start within {deadline} (no free thread); skipped for this recall"


def _block_problem(block: Any, budget_chars: int) -> str | None:
    """Why a `format_injection` answer cannot be injected (None when it can): the wrong type,
    or a text longer than the `budget_chars` it was given (a caller sized its prompt by it: a
    hook would drop the whole block, and say nothing relevant was found)."""
    if not isinstance(block, InjectionBlock):
        return f"answered {type(block).__name__}, not an InjectionBlock"
    if not isinstance(block.text, str):
        return f"answered an InjectionBlock whose text is {type(block.text).__name__}, not a str"
    if not isinstance(block.uids, list) or not all(isinstance(u, str) for u in block.uids):
        return (f"answered an InjectionBlock whose uids are {type(block.uids).__name__}, "
                "not a list of str")
    if len(block.text) > budget_chars:
        return (f"answered a block of {len(block.text)} characters, over its budget of "
                f"{budget_chars}")
    return None


@dataclass(frozen=True)
class UnforgetResult:
    """Outcome of `unforget`: `restored` (live again), `duplicate` (a live memory of its
    project, `duplicate_of`, holds its text now: it stays forgotten) or `live` (it was not
    forgotten), with the memory as it is now."""

    status: str
    memory: Memory
    duplicate_of: str | None = None

    def line(self) -> str:
        """What `memory-mcp unforget` prints once `restored`: live again, and, when a newer
        memory restates it, that recall leaves it out as superseded by that one."""
        uid, by = self.memory.uid, self.memory.superseded_by
        return f"unforgot {uid}: it is live again" + (
            f", superseded by the newer {by} (recall leaves it out; `memory-mcp unsupersede "
            f"{uid}` makes it current)" if by else "")

    def refusal(self) -> str | None:
        """Why the memory was not brought back, in one line (None once `restored`)."""
        uid = self.memory.uid
        if self.status == "live":
            return f"memory {uid} is not forgotten"
        if self.status == "duplicate":
            return (f"not unforgotten: memory {self.duplicate_of} now holds the same text in "
                    f"this project; {uid} stays forgotten")
        return None


def forgotten_record(memory: Memory, purged_after_s: float | None) -> dict[str, Any]:
    """A forgotten memory as `memory-mcp forgotten --json` and `GET /api/forgotten` list it:
    its `updated_at` is when it was forgotten (`forgotten_at`), from which the start-up
    purge's grace counts (`purged_after`; None when only a purge by hand removes it,
    `Settings.forget_purged_after_s`)."""
    return memory.to_dict() | {
        "forgotten_at": iso(memory.updated_at),
        "purged_after": iso(memory.updated_at + purged_after_s)
        if purged_after_s is not None else None}


@dataclass
class PurgeReport:
    soft_deleted: int = 0
    expired_artifacts: int = 0
    expired_injections: int = 0
    vacuumed: bool = False
    #: Memories current again: a memory purged had replaced them (`store.purge`).
    current_again: int = 0
    #: Why the index merge and VACUUM after the purge were skipped (a full disk): what the
    #: purge removed is gone all the same, and the report says so.
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if not self.current_again:  # most purges bring none back: the report reads as before
            out.pop("current_again")
        if self.warning is None:
            out.pop("warning")
        return out


@dataclass
class MatchPurgeReport:
    """What `MemoryEngine.purge_matching` removed (`memory-mcp purge --matching`)."""

    memories: int = 0
    revisions: int = 0
    prompts: int = 0  # injection reports whose prompt was blanked
    #: Memories current again: a memory purged had replaced them.
    current_again: int = 0
    #: Why the index rewrite after it was skipped: what went is gone all the same.
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "warning" or v is not None}


class MemoryEngine:
    """One open store with its plugins. Thread-safe; share one per process."""

    #: Until when the maintenance has checked the names of written rows
    #: (`_normalize_recent_names`); None before its first run.
    _names_checked_at: float | None = None

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        plugins: Iterable[Any] = (),
        plugin_manager: PluginManager | None = None,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.pm = plugin_manager or build_plugin_manager(self.settings, tuple(plugins))
        self.store: MemoryStore = open_store(self.settings, store_kinds(self.pm))
        refused: list[str] = []

        def check(embedder: Any) -> str | None:
            if problem := check_embedder(embedder):
                refused.append(problem)
            return problem

        self.embedders: list[Embedder] = collect(
            self.pm, "register_embedders", "embedder", lambda e: e.name, check,
            settings=self.settings)
        self.embedder, problem = choose_embedder(self.embedders, self.settings.embedder)
        if problem:
            self.pm.refuse("embedders", problem)
        #: Why no embedder is in use though one was asked for or registered (what `plugins`
        #: says): the vector channels, bound to none, cannot tell it from none installed.
        self._no_embedder = None if self.embedder is not None else problem or (
            f"the embedder was refused ({refused[0]})" if refused else None)
        registered: list[Channel] = collect(
            self.pm, "register_channels", "channel", lambda c: c.name, check_channel,
            settings=self.settings)
        #: Every channel registered (refused ones aside), in use or not.
        self.registered_channels = registered
        #: Channels left out because they do not speak this store: name -> why.
        self.skipped_channels = {c.name: why for c in registered
                                 if (why := skip_reason(c, self.store.name))}
        channels = self._ready(sorted(
            (c for c in registered if c.name not in self.skipped_channels), key=lambda c: c.name))
        # Capabilities, sorted once (docs/plugins.md): the hot paths never probe members.
        self._backfillers = [c for c in channels if isinstance(c, Backfills)]
        configured = self.settings.weights()
        known = sorted(c.name for c in registered)
        for name in sorted(set(configured) - set(known)):  # a typo, or a plugin's name
            self.pm.refuse("channels", f"MEMORY_CHANNEL_WEIGHTS names {name!r}, which no "
                           f"installed channel has ({', '.join(known) or 'none'}): its weight "
                           "is not used")
        weights = {c.name: configured.get(c.name, c.weight) for c in channels}
        score_weights = {
            c.name: configured.get(c.name, c.weight if c.score_weight is None else c.score_weight)
            for c in channels}
        #: The stages (ingest.py, retrieval.py); the engine is their façade.
        self.writer = Writer(self.store, self.pm, self.settings, channels)
        self.searcher = Searcher(self.store, self.settings, channels, weights, score_weights)
        self._group_counts: _GroupCounts | None = None

    def _ready(self, channels: list[Channel]) -> list[Channel]:
        """Bind and set up each channel; one whose `bind` or `setup` raises is left out with
        one line naming it (a broken plugin never takes the others down)."""
        ready = []
        for channel in channels:
            step = "bind"
            try:
                channel.bind(store=self.store, embedder=self.embedder)
                step = "setup"
                with self.store.long_write() as conn:  # DDL: no round-trip deadline
                    channel.setup(conn)
            except Exception as exc:  # noqa: BLE001
                owner = self.pm.owner_of.get(id(channel), "?")
                self.pm.refuse(self.pm.origin(owner), f"channel {channel.name!r} left out: "
                                                      f"{step} failed: {one_line(exc)}")
                continue
            ready.append(channel)
        return ready

    @property
    def plugin_problems(self) -> list[str]:
        """Every plugin or registration refused while loading, one line each."""
        return [str(p) for p in self.pm.problems]

    # --- write path (ingest.py) -------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        """Benchmarks and tests swap settings on an open engine: both stages see them."""
        self._settings = value
        if hasattr(self, "searcher"):
            self.writer.settings = self.searcher.settings = value

    @property
    def channels(self) -> list[Channel]:
        """The channels in use, by name (both stages share the list)."""
        return self.searcher.channels

    @channels.setter
    def channels(self, value: list[Channel]) -> None:
        self.searcher.channels = self.writer.channels = value

    @property
    def weights(self) -> dict[str, float]:
        """RRF weight per channel (defaults, then MEMORY_CHANNEL_WEIGHTS)."""
        return self.searcher.weights

    @weights.setter
    def weights(self, value: dict[str, float]) -> None:
        self.searcher.weights = value

    @property
    def score_weights(self) -> dict[str, float]:
        """Score-fusion weight per channel."""
        return self.searcher.score_weights

    @score_weights.setter
    def score_weights(self, value: dict[str, float]) -> None:
        self.searcher.score_weights = value

    def ingest(self, items: list[NewMemory], *, batch_is_session: bool = True,
               prepare: bool = True) -> list[IngestResult]:
        """Store a batch in one transaction (`Writer.ingest`)."""
        return self.writer.ingest(items, batch_is_session=batch_is_session, prepare=prepare)

    def update(self, uid: str, *, content: str | None = None, kind: str | None = None,
               tags: list[str] | None = None, project: str | None = None,
               if_version: str | None = None) -> UpdateResult:
        """Edit a live memory in place (`Writer.update`); `if_version`: only if unchanged
        since the caller read that `edit_version`."""
        return self.writer.update(uid, content=content, kind=kind, tags=tags, project=project,
                                  if_version=if_version)

    def unsupersede(self, uid: str) -> str | None:
        """Undo a supersession: memory `uid` is current again. Returns the uid that had
        replaced it; None when `uid` was not superseded. Raises UnknownMemory for no live
        memory `uid`."""
        current = self.store.get(uid) if isinstance(uid, str) and UID.match(uid) else None
        if current is None or current.deleted:
            raise UnknownMemory(f"no live memory with uid {str(uid)[:80]!r}")
        return self.store.unsupersede(uid)

    def supersedes(self, uid: str) -> list[str]:
        """The uids of the memories `uid` replaced (its history), newest first."""
        return self.store.supersedes(uid)

    def store_one(self, item: NewMemory) -> IngestResult:
        return self.ingest([item])[0]

    def forget(self, uid: str) -> bool:
        """Soft-delete one memory; False when no live memory has this uid (`forget_memory`)."""
        return self.forget_memory(uid) is not None

    def forget_memory(self, uid: str) -> list[str] | None:
        """Soft-delete one memory and log it (one INFO line with its uid, never its text: the
        service's log says what an agent forgot). Returns the uids of the memories it had
        replaced, current again (usually none); None when no live memory has this uid. It
        can be taken back (`unforget`) until a purge: `memory-mcp purge`, or the start-up
        maintenance once MEMORY_FORGET_GRACE_DAYS have passed."""
        current = self.store.forget(uid, now())
        if current is not None:
            log.info("forgot memory %s%s", uid, f"; current again: {', '.join(current)}"
                     if current else "")
        return current

    def forgotten(self, project: str | None = None, limit: int = 20) -> list[Memory]:
        """Forgotten memories not yet purged, the latest forgotten first (`updated_at` is when);
        `project=""`: the global ones (those without a project)."""
        if project is not None and not project.strip():
            return self.store.forgotten(limit, global_only=True)
        return self.store.forgotten(limit, project_name(project))

    def unforget(self, uid: str) -> UnforgetResult:
        """Take a forget back: memory `uid` is live again (its `updated_at` now), found by
        recall at once, since the channels keep what they derived from a forgotten memory
        until it is purged. The memories the forget made current stay current; a newer one
        that restates it (stored meanwhile) supersedes it (`Writer.unforget`). Refused
        (`duplicate`) where a live memory of its project holds its text now. Raises
        UnknownMemory for a uid never stored, or purged."""
        memory, holder = self.writer.unforget(uid) \
            if isinstance(uid, str) and UID.match(uid) else (None, None)
        if memory is None:
            raise UnknownMemory(f"no memory with uid {str(uid)[:80]!r} (never stored, or "
                                "purged)")
        if not memory.deleted:
            return UnforgetResult("live", memory)
        if holder is not None:
            return UnforgetResult("duplicate", memory, holder)
        restored = self.store.get(uid) or memory
        log.info("unforgot memory %s%s", uid, f"; superseded by newer memory "
                 f"{restored.superseded_by}" if restored.superseded_by else "")
        return UnforgetResult("restored", restored)  # the writer woke the embedding queue

    def revisions(self, uid: str) -> list[dict[str, Any]]:
        """The earlier versions of `uid`, newest first, times as ISO 8601 (UTC)."""
        return [{**r, "updated_at": iso(r["updated_at"]), "replaced_at": iso(r["replaced_at"])}
                for r in self.store.revisions(uid)]

    # --- read path -------------------------------------------------------------------------

    def recall(
        self, query: str, k: int = 10, filters: RecallFilters | None = None, *,
        exclude: Callable[[Memory], bool] | None = None, relevant_only: bool = False,
        with_global: bool = True,
    ) -> list[RecallHit]:
        """Search every channel, fuse, post-process, bring the top hits' neighbours along
        (`neighbours.py`), return the top k. The stages are `retrieval.py`'s.

        `exclude`: memories to leave out (e.g. those already in an agent's context).
        `relevant_only`: keep only hits a channel vouches for (`Searcher.vouched`): what an
        injection takes, where a ranked list of the nearest memories is not enough.
        `with_global`: a project's recall also brings global memories (those without a
        project, which every project shares) that a channel vouches for.
        """
        filters = filters or RecallFilters()
        k = max(1, min(int(k), MAX_RECALL_K))
        if not query or not query.strip():
            return []
        with self.store.snapshot() as conn:
            hits = self._recall(conn, query, k, filters, exclude, relevant_only)
            if with_global and filters.project is not None:
                hits = self._with_global(conn, query, k, filters, exclude, hits)
            return hits

    def _with_global(
        self, conn: Any, query: str, k: int, filters: RecallFilters,
        exclude: Callable[[Memory], bool] | None, hits: list[RecallHit],
    ) -> list[RecallHit]:
        """A project's `hits` with the global memories that a channel vouches for, best k.

        The global memories are searched on their own (the project's search keeps its id range
        and its ranking), and ranked among few: fused scores are normalised per search, so a
        weak match could top that list, and only relevance lets one in. One that says word
        for word what a project's hit says adds nothing, and one a project's hit overrides
        (`_overrides`) is left out. Then both lists are ranked by score; a tie keeps the
        project's memory first."""
        shared = replace(filters, project=None, global_only=True)
        if not self.store.any_live(conn, shared):
            return hits
        said = {h.memory.content for h in hits}
        found = [h for h in self._recall(conn, query, k, shared, exclude, relevant_only=True)
                 if h.memory.content not in said
                 and not any(self._overrides(own.memory, h.memory) for own in hits)]
        return sorted(hits + found, key=lambda h: h.score, reverse=True)[:k] if found else hits

    def _overrides(self, own: Memory, shared: Memory) -> bool:
        """Whether a project's memory restates a global one with changed details, by the rule
        that supersedes within a project (same kind, `supersede.supersedes`): in that project
        its own word holds, as a project's setting overrides a user-wide one, whichever is
        newer ("port 5432" everywhere, "port 5433" in web)."""
        return (self.settings.supersede and own.kind == shared.kind
                and own.kind in supersede.SUPERSEDABLE_KINDS
                and max(len(own.content), len(shared.content)) <= SUPERSEDE_MAX_CHARS
                and supersede.supersedes(shared.content, own.content))

    def _recall(
        self, conn: Any, query: str, k: int, filters: RecallFilters,
        exclude: Callable[[Memory], bool] | None, relevant_only: bool,
    ) -> list[RecallHit]:
        """One search of the memories `filters` admits: `recall`'s stages."""
        # Fusion needs slack below k: a fused top-k member may rank up to ~2k in one channel.
        depth = max(2 * k, self.settings.recall_depth)
        evidence = self.searcher.search(conn, query, depth, filters)
        fused, by_score = self.searcher.fuse(evidence, depth)
        memories = {f.id: evidence.memories[f.id] for f in fused if f.id in evidence.memories}
        if len(memories) < len(fused):  # not loaded by the search already
            memories.update(self.store.load(conn, [f.id for f in fused if f.id not in memories]))
        while ghosts := {f.id for f in fused} - memories.keys():
            # ids no memory holds (a channel's stale table): fuse again without them, so they
            # take no rank place
            evidence.drop(ghosts)
            fused, by_score = self.searcher.fuse(evidence, depth)
            memories.update(self.store.load(conn, [f.id for f in fused
                                                   if f.id not in memories]))
        hits = [
            RecallHit(memories[f.id], f.score, f.ranks, dict(evidence.signals.get(f.id, {})))
            for f in fused if f.id in memories
            # channels filter in SQL; this also covers a channel that does not
            and filters.admits(memories[f.id])
            and not evidence.only_weak(f)
        ]
        self._modify_hits(query, hits, conn)
        hits.sort(key=lambda h: h.score, reverse=True)
        if exclude is not None:
            hits = [h for h in hits if not exclude(h.memory)]
        if relevant_only:
            hits = self.searcher.vouched(conn, query, hits, k)
        # Score fusion's scores say how sure a hit is (RRF's carry ranks): they alone decay
        decay = self.settings.neighbour_decay if by_score else None
        return neighbours.expand(self.store, conn, hits, k, self.settings.neighbours,
                                 self.searcher.neighbour_gap(evidence), filters, exclude,
                                 decay)

    def _modify_hits(self, query: str, hits: list[RecallHit], conn: Any) -> None:
        """Each `modify_hits` on its own, on a copy of the hits adopted only when it succeeds:
        one that raises, leaves anything but RecallHits with finite scores or overruns the
        recall's deadline (`retrieval.hook_deadline`, as channel searches are held) is skipped
        for this recall in one line naming it; one still running past its deadline is skipped
        until it returns. Held to a deadline, it runs on a worker with a snapshot of its own
        (`_modify_beside`), never the recall's `conn`, which the recall goes on using."""
        for plugin in self._implementers("modify_hits"):
            if held.running_late(self.pm, "modify_hits", plugin):
                continue  # a call of it from an earlier recall still runs
            mine = [replace(h, ranks=dict(h.ranks), signals=dict(h.signals)) for h in hits]
            deadline = NO_DEADLINE if plugin in CORE_PLUGINS else hook_deadline(self.settings)
            try:
                if deadline is NO_DEADLINE:  # a one-off command: this thread, this snapshot
                    self._call("modify_hits", plugin, query=query, hits=mine,
                               settings=self.settings, store=self.store, conn=conn)
                elif not held.call_held(self.pm, "modify_hits", plugin, partial(
                        self._modify_beside, plugin, query, mine), deadline.seconds):
                    with self.store.savepoint(conn, "modify_hits"):  # no snapshot to spare
                        self._call("modify_hits", plugin, query=query, hits=mine,
                                   settings=self.settings, store=self.store, conn=conn)
                problem = next((_hit_problem(h) for h in mine if not isinstance(h, RecallHit)
                                or not isinstance(h.score, (int, float))
                                or not math.isfinite(h.score)), None)
            except held.Overran as exc:
                problem = _overran(exc, deadline)
            except Exception as exc:  # noqa: BLE001 - a broken plugin never takes recall down
                problem = f"failed ({one_line(exc)}); skipped for this recall"
            else:
                if problem:
                    problem += "; skipped for this recall"
            if problem:
                log.warning("plugin %s: modify_hits %s", self.pm.origin(plugin), problem)
            else:
                hits[:] = mine

    def _modify_beside(self, plugin: str, query: str, hits: list[RecallHit]) -> bool:
        """`plugin`'s `modify_hits` on this (worker) thread's own snapshot; False when the store
        spares none (a busy connection pool), and it did not run."""
        with self.store.spare_snapshot() as conn:
            if conn is None:
                return False
            self._call("modify_hits", plugin, query=query, hits=hits, settings=self.settings,
                       store=self.store, conn=conn)
            return True

    def _implementers(self, hook: str) -> list[str]:
        """The plugins implementing `hook`, in pluggy's order (`PluginManager.calls`)."""
        return [plugin for plugin, _ in self.pm.calls(hook)]

    def _call(self, hook: str, plugin: str, **kwargs: Any) -> Any:
        """`plugin`'s implementation of `hook` called with `kwargs`."""
        return next(call for name, call in self.pm.calls(hook, **kwargs) if name == plugin)()

    def injection(self, query: str, hits: list[RecallHit], budget_chars: int
                  ) -> InjectionBlock:
        """The ready-to-inject block for these hits (empty when nothing fits) with the uids it
        holds, never holding two near-duplicates (`neardup.distinct`): whatever formats it, a
        block does not spend its budget on the same fact twice. The first `format_injection`
        answering an InjectionBlock within `budget_chars` wins; one that raises, answers
        anything else or a longer block, or overruns the recall's deadline
        (`retrieval.hook_deadline`) is skipped in one line naming it (the core's own
        formatter, last in line, answers then), and one still running past its deadline is
        skipped until it returns."""
        distinct = neardup.distinct(hits)
        for plugin in self._implementers("format_injection"):
            if held.running_late(self.pm, "format_injection", plugin):
                continue  # a call of it from an earlier recall still runs
            deadline = NO_DEADLINE if plugin in CORE_PLUGINS else hook_deadline(self.settings)
            mine = list(distinct)  # a late call's changes reach no formatter after it
            try:
                block = held.call_held(self.pm, "format_injection", plugin, partial(
                    self._call, "format_injection", plugin, query=query, hits=mine,
                    budget_chars=budget_chars), deadline.seconds)
            except held.Overran as exc:
                log.warning("plugin %s: format_injection %s", self.pm.origin(plugin),
                            _overran(exc, deadline))
                continue
            except Exception as exc:  # noqa: BLE001 - a broken plugin never takes recall down
                log.warning("plugin %s: format_injection failed (%s); skipped",
                            self.pm.origin(plugin), one_line(exc))
                continue
            if block is None:  # passes
                continue
            problem = _block_problem(block, budget_chars)
            if problem is None:
                return block
            log.warning("plugin %s: format_injection %s; skipped", self.pm.origin(plugin),
                        problem)
        return InjectionBlock("", [])

    def injection_block(self, query: str, hits: list[RecallHit], budget_chars: int) -> str:
        """`injection(...)`'s text alone."""
        return self.injection(query, hits, budget_chars).text

    def get(self, uid: str) -> Memory | None:
        return self.store.get(uid)

    def list(
        self, filters: RecallFilters | None = None, limit: int = 50, offset: int = 0
    ) -> list[Memory]:
        """Live memories, newest-updated first."""
        return self.store.list(filters or RecallFilters(), limit, offset)

    def count(self, filters: RecallFilters | None = None, at_most: int | None = None) -> int:
        """How many current memories pass `filters` (all of them without). With `at_most`,
        min(that, at_most): a page's total without counting every match. One filter (a
        project, kind or source, with or without `since`) is exact from its index either way;
        two (a project and a kind) read the rows of one of them, which `at_most` bounds."""
        filters = filters or RecallFilters()
        if at_most is None:
            return self.store.count(filters)
        return self.store.count(filters, at_most)

    def counts(self) -> dict[str, int]:
        """Cheap totals for health checks: live and forgotten memories, injection reports
        (index counts, no row read)."""
        with self.store.snapshot() as conn:
            live, deleted = self.store.totals(conn)
            injections = self.store.injection_count(conn)
        return {"memories": live, "forgotten": deleted, "injections": injections}

    def export(self, include_deleted: bool = False) -> Iterator[dict[str, Any]]:
        """Every memory as the JSON-lines record `import` accepts, oldest first: importing it
        restores the same memories (uids, timestamps, and with `include_deleted` the forgotten
        ones, marked `"forgotten": true`)."""
        for memory in self.store.export(include_deleted):
            # built field by field (EXPORT_FIELDS' order): `to_dict`'s deep copy was 3/4 of
            # the export's time
            out = {"uid": memory.uid, "content": memory.content, "kind": memory.kind,
                   "source": memory.source, "project": memory.project, "tags": memory.tags,
                   "created_at": iso_exact(memory.created_at),
                   "updated_at": iso_exact(memory.updated_at),
                   "session": memory.session, "seq": memory.seq}
            if memory.superseded_by is not None:
                out["superseded_by"] = memory.superseded_by
            if memory.deleted:
                out["forgotten"] = True
            yield out

    def _grouped(self, conn: Any, live: int, deleted: int) -> _GroupCounts:
        """The counts per kind, source and project, reused for STATS_REUSE_S while the store's
        totals and newest change (`last_updated`) are what they were."""
        key = (live, deleted, self.store.last_updated(conn))
        cached = self._group_counts
        if cached is not None and cached.key == key and \
                time.monotonic() - cached.at < STATS_REUSE_S:
            return cached
        counts = self.store.value_counts(conn)
        counted = _GroupCounts(
            key, time.monotonic(), top_values(counts["kind"]), top_values(counts["source"]),
            top_values(counts["project"], named_only=True), counts["project"].get(None, 0))
        self._group_counts = counted
        return counted

    def stats(self) -> dict[str, Any]:
        embedder = self.embedder_info()
        with self.store.snapshot() as conn:
            live, deleted = self.store.totals(conn)
            groups = self._grouped(conn, live, deleted)
            return {
                "memories": live,
                "forgotten": deleted,
                "by_kind": dict(groups.by_kind),
                "by_source": dict(groups.by_source),
                "by_project": dict(groups.by_project),
                "without_project": groups.without_project,
                "channels": [
                    {"name": c.name, "weight": self.weights[c.name],
                     "score_weight": self.score_weights[c.name], "status": _status(c)}
                    for c in self.channels
                ],
                "skipped_channels": dict(self.skipped_channels),
                "injections": self.store.injection_totals(conn, now() - 7 * DAY),
                "recall_mode": _recall_mode(embedder),
                "embedder": embedder,
                "device": (embedder or {}).get("device"),
                # memories stored but not yet embedded (service/embed_queue.py)
                "embedding_queue": self.writer.pending() if self.writer.deferrable() else 0,
                # and those its model refused a vector for (found by their words)
                "embedding_refused": self.writer.refused() if self.writer.deferrable() else 0,
                "store": self.store.name,
                "db_path": self.store.location,
                "db_bytes": self.store.size_bytes(),
                "schema_version": self.store.schema_version,
                "secret_ruleset": ruleset_info(),
            }

    # --- telemetry -------------------------------------------------------------------------

    def record_injection(
        self, *, uids: list[str], harness: str | None = None, hook: str | None = None,
        project: str | None = None, query: str | None = None, chars: int = 0,
        session: str | None = None,
    ) -> int:
        """Append one injection report; returns its id. Every text field is cleaned like a
        memory's (private spans out, secrets redacted)."""
        row = {"ts": now(), "harness": as_stored(harness), "hook": as_stored(hook),
               "project": as_stored(project), "query": as_stored(query), "chars": int(chars),
               "session": as_stored(session)}
        return self.store.record_injection(row, uids)

    def injected_in_session(self, session: str) -> frozenset[str]:
        """Uids of the memories already injected in this agent session (one index range)."""
        return frozenset(self.store.injected_in_session(as_stored(session)))

    def in_session_context(self, session: str) -> Callable[[Memory], bool]:
        """Whether a memory is already in the context of agent session `session`: injected
        into it, or flushed from it (tagged `session:<session>`). A harness names its context
        anew after each compaction, so what compaction dropped can come back."""
        injected = self.injected_in_session(session)
        tag = as_stored(f"session:{session}"[:MAX_TAG_CHARS])  # as a flush tags its memories
        return lambda memory: memory.uid in injected or tag in memory.tags

    def in_agent_context(self, session: str | None, harness: str | None
                         ) -> Callable[[Memory], bool] | None:
        """Whether a memory is already in an agent's context: in its session's
        (`in_session_context`), or imported from a file its harness loads into every session
        itself (`Memory.loaded_by`). None when neither is named."""
        in_session = self.in_session_context(session) if session else None
        if not harness:
            return in_session
        if in_session is None:
            return lambda memory: memory.loaded_by(harness)
        return lambda memory: memory.loaded_by(harness) or in_session(memory)

    def injections(
        self, *, harness: str | None = None, project: str | None = None,
        limit: int = 50, offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Injection telemetry rows, newest first; `project=""`: those made outside any
        project (as every other filter reads a blank project)."""
        blank = project is not None and not project.strip()
        rows = self.store.injections(harness, None if blank else project_name(project), limit,
                                     offset, global_only=blank)
        return [to_api(r) for r in rows]

    def memory_injections(self, uid: str, limit: int = 50, offset: int = 0
                          ) -> tuple[list[dict[str, Any]], int]:
        """The injections memory `uid` took part in, newest first, and their total."""
        rows, total = self.store.memory_injections(uid, limit, offset)
        return [to_api(r) for r in rows], total

    def injection_summary(self, top: int = 10) -> dict[str, Any]:
        """Totals (all time and 7 days), per-harness / per-hook counts, the most-injected
        memories and per-day counts of the last SUMMARY_DAYS days."""
        current = now()
        with self.store.snapshot() as conn:
            totals = self.store.injection_totals(conn, current - 7 * DAY)
            top_rows = self.store.top_injected(conn, top)
            return {
                **totals, "approx_tokens": totals["chars"] // 4,
                "last_7_days_approx_tokens": totals["last_7_days_chars"] // 4,
                "by_harness": self.store.injection_groups(conn, "harness"),
                "by_hook": self.store.injection_groups(conn, "hook"),
                "per_day": fill_days(self.store, conn, SUMMARY_DAYS, current),
                "top_memories": [{"uid": u, "injections": n,
                                  "content": (c or "")[:200] if c is not None else None}
                                 for u, n, c in top_rows],
            }

    def values(self, column: str, prefix: str = "", limit: int = 100) -> tuple[list[str], int]:
        """Distinct values of `column` (one of VALUE_COLUMNS) among live memories that start
        with `prefix` (case-insensitive), most used first, at most `limit`; and how many match."""
        if column not in VALUE_COLUMNS:
            raise ValueError(f"values: unknown column {column!r}")
        rows = self.store.values(column, prefix)
        return [value for value, _ in rows[: max(0, limit)]], len(rows)

    @property
    def recall_mode(self) -> str:
        """"hybrid" when an embedder is active, else "keyword" (recall by words only)."""
        return _recall_mode(self.embedder_info())

    def embedder_info(self) -> dict[str, Any] | None:
        """What the vector side reports (model, dim, device, vectorized count), or None when no
        channel has an embedder. Channels opt in with an `embedder_info()` method."""
        for channel in self._backfillers:
            result = channel.embedder_info()
            if result is not None:
                return self._with_reason(dict(result))
        return None

    def _with_reason(self, report: dict[str, Any]) -> dict[str, Any]:
        """A vector channel's report, its `reason` the engine's when no embedder is in use
        for a reason the channel cannot see (several configured, MEMORY_EMBEDDER unknown, the
        only one refused)."""
        if self._no_embedder and "reason" in report:
            report["reason"] = self._no_embedder
        return report

    # --- maintenance -----------------------------------------------------------------------

    def finish_import(self, new: int, batch: int) -> int:
        """What a JSON-lines import ends with, once every line is stored (`new` of them, in
        batches of `batch`): each `superseded_by` that names no live memory cleared (a line's
        own uid, one stored nowhere, one the file marks forgotten; left, it hid the memory
        imported for good, where only the whole file can tell: a line may name a later one),
        then `merge_after_import`. Returns how many memories are current again for it."""
        with self.store.write() as conn:
            current_again = self.store.clear_dangling_supersessions(conn)
        self.merge_after_import(new, batch)
        return current_again

    def merge_after_import(self, new: int, batch: int) -> bool:
        """After an import that stored `new` memories in batches of `batch`: merge the FTS5
        indexes (`store.optimize`) when they are at least MERGE_SHARE of the store now;
        returns whether it did. One batch or a small share is left to FTS5's automerge."""
        if new < batch or new < MERGE_SHARE * self.count(RecallFilters(include_superseded=True)):
            return False
        try:
            self.store.optimize()
        except StoreError as exc:  # every line is stored: the merge only makes search faster
            log.warning("import: the full-text index merge was skipped: %s", one_line(exc))
            return False
        return True

    def purge(self, reclaim_share: float = 0.0, grace_days: float = 0) -> PurgeReport:
        """Hard-delete soft-deleted memories (with `grace_days`, only those forgotten longer
        ago; 0: every one, `memory-mcp purge`) and apply the TTLs (what a memory gone had
        replaced is current again: `current_again`); then merge the full-text
        indexes and VACUUM when what went is at least `reclaim_share` of the rows (memories
        and injection reports; 0: whenever anything went, `memory-mcp purge`). Below a real
        share SQLite reuses the freed pages and FTS5's automerge folds the deletions in, while
        the VACUUM holds the write lock for seconds on a big store (~4-8 s at 1M memories);
        there the store only merges its indexes, a step at a time (`store.scrub_indexes`, as
        `store.optimize(vacuum=True)` does too), so that the words of what went leave them
        while writes go on. Then the store's journal is
        emptied (`store.flush_journal`: SQLite's WAL kept the text purged), and each channel
        rewrites what it keeps outside the store without them (`Channel.purged`)."""
        counts = self.counts() if reclaim_share > 0 else None
        current = now()
        artifacts, injections = self.settings.ttl_artifact_days, self.settings.ttl_injection_days
        forgotten, expired, reports, current_again = self.store.purge(
            current - artifacts * DAY if artifacts > 0 else None,
            current - injections * DAY if injections > 0 else None, self.writer.forget_ids,
            current - grace_days * DAY if grace_days > 0 else None)
        report = PurgeReport(forgotten, expired, reports, current_again=current_again)
        removed = report.soft_deleted + report.expired_artifacts + report.expired_injections
        rows = sum(counts.values()) if counts else 0
        if not removed:
            return report
        reclaim = removed >= reclaim_share * rows
        try:  # the purge is committed: a failure here is reported, not raised
            if reclaim:
                self.store.optimize(vacuum=True)
                report.vacuumed = True
            elif forgotten or expired:  # the words of the memories gone
                self.store.scrub_indexes()
        except StoreError as exc:
            what = "the index merge and VACUUM were" if reclaim else "the index rewrite was"
            report.warning = f"{what} skipped: {one_line(exc)}"
        else:
            report.warning = self.store.flush_journal()
        if forgotten or expired:
            report.warning = _joined(report.warning, _purged(self.channels))
        if report.warning is not None:
            log.warning("purge: %s", report.warning)
        return report

    def holding(self, text: str, project: str | None = None) -> Holdings:
        """Every place the store keeps `text`, case-insensitive (`store.holding`);
        `project=""`: the global ones only."""
        if project is not None and not project.strip():
            return self.store.holding(text, global_only=True)
        return self.store.holding(text, project_name(project))

    def purge_matching(self, found: Holdings, text: str) -> MatchPurgeReport:
        """Hard-delete what `holding(text)` found (`store.purge_holdings`): the channels drop
        what they derived from the memories, the full-text indexes are merged a step at a
        time so that their words leave them (`store.scrub_indexes`), the journal is emptied
        (`store.flush_journal`) and the channels rewrite their own files (`Channel.purged`),
        as after `purge`."""
        report = MatchPurgeReport(*self.store.purge_holdings(found, text,
                                                              self.writer.forget_ids))
        if not (report.memories or report.revisions or report.prompts):
            return report
        log.info("purged %d memories, %d earlier versions and %d injection prompts holding a "
                 "text", report.memories, report.revisions, report.prompts)
        try:
            if report.memories:
                self.store.scrub_indexes()
        except StoreError as exc:
            report.warning = f"the index rewrite was skipped: {one_line(exc)}"
        else:
            report.warning = self.store.flush_journal()
        if report.memories or report.revisions:  # an edited memory's old text: its vector
            report.warning = _joined(report.warning, _purged(self.channels))
        return report

    def _normalize_recent_names(self) -> None:
        """Rewrite the projects, kinds and sources of the rows written since the last run (the
        first run: NAMES_FIRST_WINDOW_S back) as ingest writes them. A process of an older
        release left running across an upgrade (an agent session's `--stdio` server, which no
        discovery file names) goes on writing names as it did ("GitHub.com/Acme/App/"), which
        no filter finds; the schema step that rewrote the older rows ran once. One range of
        the `updated_at` index a run."""
        start = now()
        since = self._names_checked_at if self._names_checked_at is not None \
            else start - NAMES_FIRST_WINDOW_S
        if self.store.normalize_names(since):
            log.info("maintenance: rewrote the project, kind or source names of memories "
                     "written by an older release's process as this release writes them")
        self._names_checked_at = start - NAMES_OVERLAP_S

    def startup_maintenance(self) -> PurgeReport | None:
        """The routine a service runs at its start and every MEMORY_MAINTENANCE_INTERVAL_S
        when MEMORY_MAINTENANCE_ON_START is on: the TTLs applied and a purge of the memories
        forgotten over MEMORY_FORGET_GRACE_DAYS ago (an agent's forget can be taken back until
        then) that reclaims space only when STARTUP_RECLAIM_SHARE of the rows went; first, a
        full-text index grown past what FTS5 reads back is rebuilt (`bound_index_levels`)."""
        if not self.settings.maintenance_on_start:
            return None
        self.store.bound_index_levels()
        self._normalize_recent_names()
        grace = self.settings.forget_grace_days
        report = self.purge(STARTUP_RECLAIM_SHARE, grace)
        kept = self.counts()["forgotten"] if grace > 0 else 0
        log.info("maintenance: %s%s", report.to_dict(),  # at the start and every interval
                 f"; {kept} forgotten memories kept until {grace} days after their forget "
                 "(MEMORY_FORGET_GRACE_DAYS; `memory-mcp forgotten` lists them)" if kept else "")
        return report

    def backfill(self, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
        """Let every `Backfills` channel (e.g. vectors) fill in what live memories lack;
        `progress` hears (done, total). The result sums `embedded` over the channels."""
        if not self._backfillers:
            return {"embedded": 0, "reason": "no embedder configured"}
        out: dict[str, Any] = {"embedded": 0, "channels": {}}
        for channel in self._backfillers:
            detail = self._with_reason(dict(channel.backfill(self.store, progress)))
            out["channels"][channel.name] = detail  # type: ignore[attr-defined]
            out["embedded"] += int(detail.get("embedded", 0))
        return out

    def close(self) -> None:
        self.searcher.close()
        self.store.close()
